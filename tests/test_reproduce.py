"""The papermill runner (slimlib.experiments.outputs.runner.run_notebooks) and `slim reproduce`, on tiny fixture notebooks."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import pytest
from optional import requires

from slimlib.cli.cmd_reproduce import collect_parameters
from slimlib.cli.main import main
from slimlib.errors import DataError, UnknownNameError
from slimlib.experiments.outputs.numerics import VARIABLES, portable_numerics_env
from slimlib.experiments.outputs.runner import (
    NotebookError,
    declared_parameters,
    find_notebooks,
    run_notebooks,
)

pytestmark = requires("papermill", "the notebooks extra (papermill, ipykernel) is not installed")

FIXTURES = Path(__file__).parent / "fixtures" / "notebooks"


def _folder(tmp_path: Path, *names: str) -> Path:
    """Copy fixture notebooks into tmp_path/nb; `name` or `src:dest` to rename."""
    nb = tmp_path / "nb"
    nb.mkdir()
    for name in names:
        src, _, dest = name.partition(":")
        shutil.copy(FIXTURES / f"{src}.ipynb", nb / f"{dest or src}.ipynb")
    return nb


def _injected(executed: Path) -> str:
    import nbformat

    cells = nbformat.read(executed, as_version=4).cells
    return "".join(c.source for c in cells if "injected-parameters" in c.metadata.get("tags", []))


def test_find_notebooks_orders_numerically_and_selects(tmp_path):
    for name in ["10_late.ipynb", "2_b.ipynb", "01_a.ipynb", "notes.ipynb", "03_c.txt"]:
        (tmp_path / name).write_text("{}")
    assert [p.name for p in find_notebooks(tmp_path)] == ["01_a.ipynb", "2_b.ipynb", "10_late.ipynb"]
    assert [p.name for p in find_notebooks(tmp_path, only=["10", "1"])] == ["01_a.ipynb", "10_late.ipynb"]
    assert [p.name for p in find_notebooks(tmp_path, only=["2_b", "02"])] == ["2_b.ipynb"]
    with pytest.raises(UnknownNameError, match="'02_b'; closest known: 2_b"):
        find_notebooks(tmp_path, only=["02_b"])
    with pytest.raises(UnknownNameError, match="07"):
        find_notebooks(tmp_path, only=["07"])
    with pytest.raises(DataError, match="does not exist"):
        find_notebooks(tmp_path / "missing")


def test_declared_parameters_reads_the_parameters_cell():
    declared = declared_parameters(FIXTURES / "01_first.ipynb")
    assert set(declared) == {"figures_dir", "scale", "quick"}


def test_runs_notebooks_in_order_with_injected_parameters(tmp_path):
    nb = _folder(tmp_path, "01_first", "02_second")
    build, figures = tmp_path / "build", tmp_path / "figs"
    summary = run_notebooks(
        nb, build, figures, parameters={"scale": 2.5, "label": "x", "quick": True}, progress=False
    )
    assert [(r["notebook"], r["status"]) for r in summary] == [
        ("01_first.ipynb", "ok"),
        ("02_second.ipynb", "ok"),
    ]
    assert all(r["wall_s"] > 0 for r in summary)
    first = json.loads((figures / "first.json").read_text())
    numerics = first.pop("numerics")
    x86_v4 = first.pop("x86_v4")
    # the kernel ran this interpreter, in the notebook folder
    assert first == {"scale": 2.5, "quick": True, "cwd": str(nb.resolve()), "python": sys.executable}
    # ... at the AVX2 level where this CPU has more (portable_numerics_env); the user's own settings kept
    want = {k: portable_numerics_env().get(k, os.environ.get(k)) for k in VARIABLES}
    assert numerics == want
    if "X86_V4" in (want["NPY_DISABLE_CPU_FEATURES"] or ""):
        assert x86_v4 is False  # NumPy in the kernel dispatches no AVX-512 loop
    assert json.loads((figures / "second.json").read_text()) == {"label": "x"}  # 02 saw 01's output
    for ext in ("pdf", "png"):
        assert (figures / f"fixture_first.{ext}").stat().st_size > 1000
    # each notebook received only what it declares, plus figures_dir (absolute)
    injected = _injected(build / "02_second.ipynb")
    assert "label = " in injected and "scale" not in injected and "quick" not in injected
    assert f"figures_dir = {str(figures.resolve())!r}" in injected.replace('"', "'")
    assert sorted(p.name for p in nb.iterdir()) == [
        "01_first.ipynb",
        "02_second.ipynb",
    ]  # nothing written there


def test_failing_notebook_is_named_with_its_cell_and_stops_the_run(tmp_path):
    nb = _folder(tmp_path, "01_first", "02_fail", "02_second:03_second")
    with pytest.raises(NotebookError) as info:
        run_notebooks(nb, tmp_path / "build", tmp_path / "figs", progress=False)
    msg = str(info.value)
    assert "02_fail.ipynb" in msg
    assert "cell 3" in msg  # index in the source notebook, not in the executed copy with its injected cell
    assert 'raise ValueError(f"boom {value + 1}")' in msg
    assert "ValueError: boom 42" in msg
    assert "--only 02" in msg
    assert [r["status"] for r in info.value.summary] == ["ok", "failed", "not run"]
    assert (tmp_path / "build" / "02_fail.ipynb").exists()  # executed copy with the traceback
    assert not (tmp_path / "build" / "03_second.ipynb").exists()
    assert not (tmp_path / "figs" / "second.json").exists()


def test_unknown_parameter_is_refused_before_any_kernel_starts(tmp_path):
    nb = _folder(tmp_path, "01_first", "02_second")
    with pytest.raises(UnknownNameError, match="'scael'.*scale"):
        run_notebooks(nb, tmp_path / "build", tmp_path / "figs", parameters={"scael": 2}, progress=False)
    assert not (tmp_path / "build").exists()


def test_cli_reproduce_only_subset_with_yaml_parameters(tmp_path, capsys):
    nb = _folder(tmp_path, "01_first", "02_second")
    params = tmp_path / "params.yaml"
    params.write_text("scale: 1.5\nlabel: from-file\n")
    argv = ["reproduce", "--notebook-dir", str(nb), "--build-dir", str(tmp_path / "b")]
    argv += ["--figures-dir", str(tmp_path / "f"), "--only", "01", "--params", str(params)]
    argv += ["-p", "scale", "3", "--quick", "--no-progress"]
    assert main(argv) == 0
    first = json.loads((tmp_path / "f" / "first.json").read_text())
    assert first["scale"] == 3 and first["quick"] is True  # -p overrides the file; YAML "3" is an int
    assert (tmp_path / "b" / "01_first.ipynb").exists()
    assert not (tmp_path / "b" / "02_second.ipynb").exists()
    out = capsys.readouterr().out
    assert "01_first.ipynb" in out and "02_second" not in out and "total" in out


def test_cli_reproduce_errors_are_one_line_exit_2(tmp_path, capsys):
    nb = _folder(tmp_path, "01_first")
    base = ["reproduce", "--notebook-dir", str(nb), "--build-dir", str(tmp_path / "b"), "--no-progress"]
    assert main(base + ["-p", "lable", "x"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("slim reproduce: error: unknown notebook parameter 'lable'") and err.count("\n") == 1
    )
    assert main(base + ["--only", "09"]) == 2
    assert "unknown notebook '09'" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n- b\n")
    assert main(base + ["--params", str(bad)]) == 2
    assert "expected a mapping" in capsys.readouterr().err


def test_collect_parameters_parses_yaml_scalars(tmp_path):
    args = argparse.Namespace(
        params=None, param=[["n", "4"], ["x", "0.5"], ["flag", "false"], ["name", "opt-1.3b"]], quick=True
    )
    assert collect_parameters(args) == {"n": 4, "x": 0.5, "flag": False, "name": "opt-1.3b", "quick": True}
    with pytest.raises(DataError, match="not a valid notebook parameter name"):
        collect_parameters(argparse.Namespace(params=None, param=[["a-b", "1"]], quick=False))


def test_missing_kernel_is_a_notebook_error_and_environment_is_restored(tmp_path, monkeypatch):
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    nb = _folder(tmp_path, "02_second")
    with pytest.raises(NotebookError, match="02_second.ipynb could not be run: NoSuchKernel"):
        run_notebooks(nb, tmp_path / "b", tmp_path / "f", progress=False, kernel_name="no-such-kernel")
    assert "JUPYTER_PATH" not in os.environ


def test_jobs_run_independent_notebooks_together_and_output_readers_after_them(tmp_path, monkeypatch):
    from slimlib.experiments.outputs import runner

    # 02_second asserts that 01's output exists: as a reader of outputs it must start after 01 and 03 end
    monkeypatch.setattr(runner, "READS_OUTPUTS", ("02_second.ipynb",))
    nb = _folder(tmp_path, "01_first", "02_second", "01_first:03_third")
    here = os.getcwd()
    summary = run_notebooks(nb, tmp_path / "build", tmp_path / "figs", parameters={"label": "y"}, progress=False,
                            jobs=2)  # fmt: skip
    assert [(r["notebook"], r["status"]) for r in summary] == [
        ("01_first.ipynb", "ok"), ("02_second.ipynb", "ok"), ("03_third.ipynb", "ok"),
    ]  # fmt: skip
    assert json.loads((tmp_path / "figs" / "second.json").read_text()) == {"label": "y"}
    assert all((tmp_path / "build" / r["notebook"]).is_file() for r in summary)
    # each kernel ran in the notebook folder, and this process's working directory (shared by the notebooks
    # running at once) never moved
    assert json.loads((tmp_path / "figs" / "first.json").read_text())["cwd"] == str(nb.resolve())
    assert os.getcwd() == here


def test_jobs_stop_at_the_first_failure_and_name_it(tmp_path, monkeypatch):
    from slimlib.experiments.outputs import runner

    monkeypatch.setattr(runner, "READS_OUTPUTS", ("03_second.ipynb",))
    nb = _folder(tmp_path, "01_first", "02_fail", "02_second:03_second")
    with pytest.raises(NotebookError, match="02_fail.ipynb failed in cell 3") as info:
        run_notebooks(nb, tmp_path / "build", tmp_path / "figs", progress=False, jobs=2)
    assert [r["status"] for r in info.value.summary] == ["ok", "failed", "not run"]
    assert not (tmp_path / "build" / "03_second.ipynb").exists()


@pytest.mark.parametrize("jobs", [0, -1, 1.5, True])
def test_jobs_must_be_a_positive_whole_number(tmp_path, jobs):
    nb = _folder(tmp_path, "01_first")
    with pytest.raises(DataError, match="jobs must be a positive whole number"):
        run_notebooks(nb, tmp_path / "build", tmp_path / "figs", progress=False, jobs=jobs)
    assert not (tmp_path / "build").exists()


def _timing_notebook(path: Path, sleep_s: float) -> None:
    """A notebook that records when it starts and ends in figures_dir/<its name>.json, sleeping `sleep_s` between."""
    import nbformat

    params = nbformat.v4.new_code_cell('figures_dir = "."')
    params.metadata["tags"] = ["parameters"]
    body = nbformat.v4.new_code_cell(
        "import json, time\nfrom pathlib import Path\nstart = time.time()\n"
        f"time.sleep({sleep_s})\n"
        f"Path(figures_dir, {path.stem!r} + '.json').write_text(json.dumps([start, time.time()]))"
    )
    nb = nbformat.v4.new_notebook(cells=[params, body])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)


def test_jobs_start_the_next_notebook_as_soon_as_one_ends(tmp_path):
    nb = tmp_path / "nb"
    nb.mkdir()
    for name, sleep_s in (("01_slow", 6.0), ("02_quick", 0.0), ("03_quick", 0.0)):
        _timing_notebook(nb / f"{name}.ipynb", sleep_s)
    figs = tmp_path / "figs"
    run_notebooks(nb, tmp_path / "build", figs, progress=False, jobs=2)
    times = {p.stem: json.loads(p.read_text()) for p in figs.glob("*.json")}
    assert sorted(times) == ["01_slow", "02_quick", "03_quick"]
    # 03 ran beside 01 (once 02 had ended), not after it
    assert times["03_quick"][0] < times["01_slow"][1]
