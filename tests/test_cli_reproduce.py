"""`slim reproduce`: --quick never writes into figures/, and the examples in its --help work on the notebooks."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from slimlib.cli.cmd_reproduce import REPRODUCE_EXAMPLES, collect_parameters, reproduce_figures_folder
from slimlib.cli.main import build_parser, main
from slimlib.experiments.outputs.runner import RUNNER_PARAMETERS, declared_parameters, find_notebooks

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"


def _examples() -> list[list[str]]:
    lines = [ln.strip() for ln in REPRODUCE_EXAMPLES.splitlines() if ln.strip().startswith("slim reproduce")]
    return [shlex.split(re.split(r"\s+#\s", ln)[0])[1:] for ln in lines]


def test_help_examples_name_real_notebooks_and_declared_parameters(tmp_path, monkeypatch):
    """Each example parses, selects existing notebooks and sets only parameters some notebook declares."""
    declared = set(RUNNER_PARAMETERS)
    for nb in find_notebooks(ROOT / "notebooks"):
        declared |= set(declared_parameters(nb))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "params.yaml").write_text("n_starts: 2\nepsilon: 0.25\n")  # the file the example names
    examples = _examples()
    assert len(examples) >= 5
    for argv in examples:
        args = build_parser().parse_args(argv)
        params = collect_parameters(args)
        assert set(params) <= declared, (argv, set(params) - declared)
        if args.only:
            assert find_notebooks(ROOT / "notebooks", args.only)


def test_quick_mode_figures_go_to_a_scratch_folder():
    parser = build_parser()
    quick = parser.parse_args(["reproduce", "--quick"])
    folder = Path(reproduce_figures_folder(quick, collect_parameters(quick)))
    try:
        assert folder.is_dir() and folder.name.startswith("slim-quick-figures-") and not any(folder.iterdir())
        assert folder.resolve() != (ROOT / "figures").resolve()
    finally:
        folder.rmdir()
    via_p = parser.parse_args(["reproduce", "-p", "quick", "true"])
    folder = Path(reproduce_figures_folder(via_p, collect_parameters(via_p)))
    folder.rmdir()
    assert folder.name.startswith("slim-quick-figures-")
    chosen = parser.parse_args(["reproduce", "--quick", "--figures-dir", "out"])
    assert reproduce_figures_folder(chosen, collect_parameters(chosen)) == "out"
    full = parser.parse_args(["reproduce"])
    assert reproduce_figures_folder(full, collect_parameters(full)) == "figures"


def test_quick_run_leaves_figures_untouched(tmp_path, monkeypatch, capsys):
    """The `slim reproduce --quick` example, on a fixture notebook, from a folder whose figures/ must not change."""
    pytest.importorskip("papermill")
    nb = tmp_path / "notebooks"
    nb.mkdir()
    shutil.copy(FIXTURES / "01_first.ipynb", nb / "01_first.ipynb")
    figures = tmp_path / "figures"
    figures.mkdir()
    (figures / "committed.csv").write_text("kept\n")
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--quick", "--only", "01", "--no-progress"]) == 0
    captured = capsys.readouterr()
    scratch = Path(re.search(r"figures and tables go to (\S+)", captured.err).group(1))
    try:
        assert sorted(p.name for p in figures.iterdir()) == ["committed.csv"]
        assert json.loads((scratch / "first.json").read_text())["quick"] is True
        assert f"figures and tables in {scratch}" in captured.out
    finally:
        shutil.rmtree(scratch)


def test_failed_quick_run_removes_its_empty_scratch_folder(tmp_path, monkeypatch, capsys):
    nb = tmp_path / "notebooks"
    nb.mkdir()
    shutil.copy(FIXTURES / "01_first.ipynb", nb / "01_first.ipynb")
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "--quick", "-p", "scael", "2", "--no-progress"]) == 2
    err = capsys.readouterr().err
    scratch = Path(re.search(r"figures and tables go to (\S+)", err).group(1))
    assert "unknown notebook parameter 'scael'" in err and not scratch.exists()
