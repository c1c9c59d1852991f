"""Notebook hygiene: committed notebooks carry no outputs and have the expected structure (slimlib.experiments.outputs.runner)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest

from slimlib.cli.main import main
from slimlib.experiments.outputs.runner import check_clean, strip_notebook, strip_notebook_dict
from slimlib.experiments.outputs.runner import main as reproduce_main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"
CLEAN_FIXTURES = ["01_first", "02_second", "02_fail"]


def _repo_notebooks() -> list:
    """Every notebooks/*.ipynb on disk (a superset of those in git, so a dirty one fails before its commit)."""
    found = sorted((ROOT / "notebooks").glob("*.ipynb"))
    if found:
        return [pytest.param(p, id=p.name) for p in found]
    reason = "no notebooks/*.ipynb yet; check_clean itself is tested on the fixtures below"
    return [pytest.param(None, id="none", marks=pytest.mark.skip(reason=reason))]


@pytest.mark.parametrize("path", _repo_notebooks())
def test_committed_notebook_is_clean(path):
    assert check_clean(path) == []


@pytest.mark.parametrize("path", _repo_notebooks())
def test_notebook_declares_the_runner_parameters(path):
    """`slim reproduce` injects quick and figures_dir: papermill must see both declared in the parameters cell."""
    from slimlib.experiments.outputs.runner import declared_parameters

    assert {"quick", "figures_dir"} <= set(declared_parameters(path))


@pytest.mark.parametrize("name", CLEAN_FIXTURES)
def test_clean_fixtures_pass(name):
    assert check_clean(FIXTURES / f"{name}.ipynb") == []


def test_executed_notebook_is_detected_and_strip_restores_the_source(tmp_path):
    path = tmp_path / "executed.ipynb"
    # a real papermill output of 01_first: outputs, execution counts, an injected-parameters cell, metadata
    shutil.copy(FIXTURES / "executed_01_first.ipynb", path)
    problems = check_clean(path)
    assert any("has outputs" in p for p in problems)
    assert any("execution count" in p for p in problems)
    assert strip_notebook(path) is True
    assert check_clean(path) == []
    assert json.loads(path.read_text()) == json.loads((FIXTURES / "01_first.ipynb").read_text())
    assert path.read_bytes() == (FIXTURES / "01_first.ipynb").read_bytes()  # same bytes as Jupyter's layout
    assert strip_notebook(path) is False  # idempotent


def _clean() -> dict:
    return json.loads((FIXTURES / "02_fail.ipynb").read_text())


def _variant(tmp_path: Path, edit) -> list[str]:
    nb = _clean()
    edit(nb)
    path = tmp_path / "v.ipynb"
    path.write_text(json.dumps(nb))
    return check_clean(path)


def _tag(nb, i, tags):
    nb["cells"][i]["metadata"]["tags"] = tags


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda nb: nb["cells"].pop(0), "first cell must be a markdown"),
        (lambda nb: _tag(nb, 2, ["parameters"]), "2 cells are tagged 'parameters'"),
        (lambda nb: _tag(nb, 1, []), "0 cells are tagged 'parameters'"),
        (lambda nb: (_tag(nb, 1, []), _tag(nb, 3, ["parameters"])), "must be the first code cell"),
        (lambda nb: nb["cells"][2].update(execution_count=7), "cell 2 has an execution count"),
        (
            lambda nb: nb["cells"][3].update(
                outputs=[{"output_type": "stream", "name": "stdout", "text": "hi"}]
            ),
            "cell 3 has outputs",
        ),
        (lambda nb: nb["cells"][2]["metadata"].update(scrolled=True), "metadata noise"),
        (lambda nb: nb["metadata"].update(papermill={"duration": 1.0}), "metadata noise"),
        (lambda nb: nb["cells"][2].pop("source"), "invalid nbformat 4"),
        (lambda nb: nb.update(nbformat=3), "expected 4"),
    ],
)
def test_dirty_variants_are_detected(tmp_path, edit, expected):
    problems = _variant(tmp_path, edit)
    assert any(expected in p for p in problems), problems


def test_unreadable_file_is_reported(tmp_path):
    path = tmp_path / "broken.ipynb"
    path.write_text("{not json")
    assert "not a readable notebook JSON" in check_clean(path)[0]


def test_strip_keeps_tags_sources_and_kernelspec():
    nb = _clean()
    noisy = copy.deepcopy(nb)
    noisy["cells"][1]["metadata"].update(collapsed=True, papermill={"status": "completed"})
    noisy["metadata"]["language_info"].update(version="3.11.7", mimetype="text/x-python")
    noisy["metadata"]["widgets"] = {"state": {}}
    assert strip_notebook_dict(noisy) == nb


def test_nbstrip_cli_and_module_entry_point(tmp_path, capsys):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    shutil.copy(FIXTURES / "executed_01_first.ipynb", folder / "01_first.ipynb")
    shutil.copy(FIXTURES / "02_second.ipynb", folder / "02_second.ipynb")
    assert main(["nbstrip", "--check", "--notebook-dir", str(folder)]) == 1
    assert "01_first.ipynb: cell 4 has outputs" in capsys.readouterr().out
    assert main(["nbstrip", "--notebook-dir", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "stripped" in out and "clean" in out
    assert main(["nbstrip", "--check", str(folder / "01_first.ipynb")]) == 0
    shutil.copy(FIXTURES / "executed_01_first.ipynb", folder / "01_first.ipynb")
    assert reproduce_main(["--strip", str(folder / "01_first.ipynb")]) == 0
    assert reproduce_main(["--check", str(folder / "01_first.ipynb"), str(folder / "02_second.ipynb")]) == 0
    assert main(["nbstrip", str(folder / "missing.ipynb")]) == 2
