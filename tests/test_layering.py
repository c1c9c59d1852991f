"""The package's layers import one way only, and no module imports slimlib inside a function (to dodge a cycle).

base (errors, schema, metrics, io) <- registry <- model <- advisor <- experiments <- cli
kit and data sit beside advisor: they use model and registry, and data reads the kit's outputs.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "slimlib"
BASE = {"errors", "schema", "metrics", "io", "batchjobs", "__init__"}
#: layer -> the layers it may import (besides itself and the base)
ALLOWED = {
    "base": set(),
    "registry": set(),
    "model": {"registry"},
    "advisor": {"model", "registry"},
    "kit": {"model", "registry"},
    "data": {"kit", "model", "registry"},
    "experiments": {"advisor", "data", "kit", "model", "registry"},
    "cli": {"experiments", "advisor", "data", "kit", "model", "registry"},
}


#: function-local imports that are the feature check of an optional dependency (module -> imported module, why)
OPTIONAL = {
    ("slimlib.kit.harness", "slimlib.kit.engine"): "the engine imports torch (the profiling extra)",
    (
        "slimlib.cli.cmd_advise",
        "slimlib.experiments.bca.advisor_figures",
    ): "matplotlib, for --frontier's figure only",
    (
        "slimlib.cli.cmd_advise",
        "slimlib.experiments.outputs.plotting",
    ): "matplotlib, for --frontier's figure only",
}


def _layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] in BASE:
        return "base"
    return parts[1]


def _modules():
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        yield ".".join(rel.parts), ast.parse(path.read_text(), str(path))


def _imports(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("slimlib"):
            yield node, node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("slimlib"):
                    yield node, alias.name


def test_every_module_belongs_to_a_known_layer():
    unknown = {name for name, _ in _modules() if _layer(name) not in ALLOWED}
    assert not unknown, f"modules outside the layers {sorted(ALLOWED)}: {sorted(unknown)}"


def test_imports_run_one_way():
    bad = []
    for name, tree in _modules():
        mine = _layer(name)
        for _, target in _imports(tree):
            theirs = _layer(target)
            if theirs not in (mine, "base") and theirs not in ALLOWED[mine]:
                bad.append(f"{name} ({mine}) imports {target} ({theirs})")
    assert not bad, "imports against the layering:\n" + "\n".join(bad)


def test_no_function_local_slimlib_imports():
    bad = []
    for name, tree in _modules():
        top = {id(n) for n in tree.body}
        for node, target in _imports(tree):
            if id(node) not in top and (name, target) not in OPTIONAL:
                bad.append(f"{name}:{node.lineno} imports {target} inside a function or block")
    assert not bad, "\n".join(bad)


def test_no_module_name_is_used_twice():
    """Every module and sub-package has a name of its own, so a name says where a thing is."""
    seen: dict[str, list[str]] = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG)
        names = [*rel.parts[:-1], rel.stem] if rel.stem != "__init__" else list(rel.parts[:-1])
        for depth, name in enumerate(names):
            where = "/".join(rel.parts[: depth + 1])
            seen.setdefault(name, [])
            if where not in seen[name]:
                seen[name].append(where)
    twice = {name: where for name, where in seen.items() if len(where) > 1}
    assert not twice, f"module names used twice: {twice}"


#: public names every module of a kind defines by design: a command-line entry point, a CLI module's registration
ENTRY_POINTS = {"main", "register_cli"}


def test_every_public_function_and_class_is_defined_once():
    """A public function or class name says which thing it is: no two modules define the same one."""
    seen: dict[str, list[str]] = {}
    for module, tree in _modules():
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if not node.name.startswith("_") and node.name not in ENTRY_POINTS:
                    seen.setdefault(node.name, []).append(module)
    twice = {name: where for name, where in seen.items() if len(where) > 1}
    assert not twice, f"public names defined in several modules: {twice}"
