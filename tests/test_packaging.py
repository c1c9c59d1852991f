"""Packaging: pyproject.toml is the single source of dependencies and environment.yml mirrors it."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def _name(spec: str) -> str:
    return re.split(r"[<>=!~\[ ;]", spec.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_environment_yml_matches_pyproject():
    proj = _pyproject()["project"]
    wanted = {_name(s): s for s in proj["dependencies"]}
    for extra in ("notebooks", "dev"):
        wanted.update({_name(s): s for s in proj["optional-dependencies"][extra]})
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = {}
    for dep in env["dependencies"]:
        if isinstance(dep, str) and _name(dep) not in ("python", "pip"):
            conda[_name(dep)] = dep
    assert set(conda) == set(wanted), set(conda) ^ set(wanted)
    for name, spec in wanted.items():  # same version bounds
        assert spec.replace(" ", "").lower() == conda[name].replace(" ", "").lower(), name


def test_console_script_and_python_version():
    proj = _pyproject()["project"]
    assert proj["scripts"]["slim"] == "slimlib.cli.main:main"
    assert proj["requires-python"] == ">=3.11"


def test_readme_quick_start_has_the_two_commands_and_ci_calls_the_test_one():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^(bash scripts/\S+)", quick, flags=re.M)
    assert commands == ["bash scripts/reproduce.sh", "bash scripts/test.sh"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "bash scripts/test.sh" in ci
