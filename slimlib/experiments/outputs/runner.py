"""Run the numbered notebooks through papermill (one command reproduces every figure), and keep notebooks clean.

`run_notebooks` executes `notebooks/NN_*.ipynb` in numeric order (up to `jobs` at once) in kernels of this same
Python interpreter (at the AVX2 level on x86-64 hosts, `numerics`, so figures are the same bytes on every one),
injecting parameters, writing executed copies to `build/` and figures to `figures/`. `check_clean` and
`strip_notebook` keep the notebooks committed to git free of outputs, execution counts and metadata noise.

Command line: `python -m slimlib.experiments.outputs.runner --strip notebooks/*.ipynb` (or `slim nbstrip`), `--check` to only report.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from slimlib.errors import DataError, SlimError, UnknownNameError, close_matches_message
from slimlib.experiments.outputs.captions import write_captions
from slimlib.experiments.outputs.numerics import describe, portable_numerics_env
from slimlib.io import write_text

NOTEBOOK_RE = re.compile(r"^(\d+)_[^/\\]*\.ipynb$")
PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"
#: Parameters the runner sets itself; every notebook receives them whether it declares them or not.
RUNNER_PARAMETERS = ("figures_dir",)
#: notebooks that read other notebooks' outputs from the figures folder (the paper-differences table reads the
#: evaluation tables): they start after every other selected notebook has finished (`run_notebooks`)
READS_OUTPUTS = ("12_paper_differences.ipynb",)
#: notebooks that read what another one cached (the intervals reuse the model selection's fold fits): they start
#: after the named ones have finished, where those run too
AFTER = {"14_intervals.ipynb": ("13_model_selection.ipynb",)}
#: Metadata kept by `strip_notebook`; everything else (papermill records, widget state, UI state) is dropped.
KEPT_NOTEBOOK_METADATA = ("kernelspec", "language_info", "jupytext")
KEPT_LANGUAGE_INFO = ("name",)
KEPT_CELL_METADATA = ("tags",)


class NotebookError(SlimError, RuntimeError):
    """A notebook failed (or could not start) during `run_notebooks`; `summary` holds the per-notebook records."""

    def __init__(self, message: str, summary: list[dict] | None = None):
        super().__init__(message)
        self.summary = summary or []


# ----------------------------------------------------------------------------------------------- discovery
def find_notebooks(notebook_dir: str | Path = "notebooks", only: Iterable[str] | None = None) -> list[Path]:
    """The `NN_*.ipynb` files of `notebook_dir` in numeric order, or the subset whose number is in `only`.

    `only` entries are numbers ("1", "01") or name prefixes ("01_calibration").
    """
    folder = Path(notebook_dir)
    if not folder.is_dir():
        raise DataError(
            f"notebook folder {str(folder)!r} does not exist; run from the repository root or pass it"
        )
    found = [p for p in folder.iterdir() if p.is_file() and NOTEBOOK_RE.match(p.name)]
    found.sort(key=lambda p: (int(NOTEBOOK_RE.match(p.name).group(1)), p.name))
    if not found:
        raise DataError(f"no notebooks named NN_*.ipynb in {str(folder)!r}")
    if only is None:
        return found
    selected: list[Path] = []
    for want in only:
        want = str(want).strip()
        if want.isdigit():
            hits = [p for p in found if int(NOTEBOOK_RE.match(p.name).group(1)) == int(want)]
        else:
            hits = [p for p in found if p.stem.startswith(want.removesuffix(".ipynb"))]
        if not hits:
            raise UnknownNameError(close_matches_message("notebook", want, [p.stem for p in found]))
        selected += [p for p in hits if p not in selected]
    selected.sort(key=found.index)
    return selected


def declared_parameters(path: str | Path) -> dict:
    """Names and defaults declared in the notebook's cell tagged `parameters` (papermill's inspection)."""
    pm = _papermill()
    return dict(pm.inspect_notebook(str(path)))


# ----------------------------------------------------------------------------------------------- execution
def _papermill():
    try:
        import papermill
    except ImportError as exc:  # the notebooks extra is optional
        raise SlimError(
            "running notebooks needs papermill and ipykernel: pip install 'slimlib[notebooks]'"
        ) from exc
    return papermill


@contextlib.contextmanager
def _kernel_of_this_python(kernel_name: str, env: Mapping[str, str] | None = None) -> Iterator[str]:
    """Make `kernel_name` "python3" start this very interpreter (`sys.executable`) with `env` added to its
    environment, via a temporary kernelspec.

    Other kernel names are used as installed.
    """
    if kernel_name != "python3":
        yield kernel_name
        return
    try:
        from ipykernel.kernelspec import get_kernel_dict
    except ImportError as exc:
        raise SlimError("running notebooks needs ipykernel: pip install 'slimlib[notebooks]'") from exc
    old = os.environ.get("JUPYTER_PATH")
    with tempfile.TemporaryDirectory(prefix="slim-kernel-") as tmp:
        spec_dir = Path(tmp) / "kernels" / kernel_name
        spec_dir.mkdir(parents=True)
        spec = get_kernel_dict()  # ipykernel's own spec; its argv starts with sys.executable
        spec["argv"][0] = sys.executable
        if env:
            spec["env"] = {**spec.get("env", {}), **env}
        (spec_dir / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
        os.environ["JUPYTER_PATH"] = os.pathsep.join([tmp] + ([old] if old else []))
        try:
            yield kernel_name
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH", None)
            else:
                os.environ["JUPYTER_PATH"] = old


def _kernel_manager_class():
    """The kernel manager papermill should use: with CurveZMQ-encrypted local sockets where supported, and no
    interrupt at shutdown.

    jupyter_client (8.x) sends SIGINT to a kernel before asking it to shut down, and ipykernel then logs
    "[IPKernelApp] ERROR | KeyboardInterrupt caught in kernel" to the terminal after every notebook, although the
    notebook finished. A kernel that papermill shuts down has finished its last cell, so the manager skips that
    interrupt; the shutdown request, then SIGTERM and SIGKILL after `shutdown_wait_time`, still end it."""
    from jupyter_client.manager import AsyncKernelManager

    class QuietShutdownKernelManager(AsyncKernelManager):
        async def _async_interrupt_kernel(self) -> None:
            if self.shutting_down:
                return
            await super()._async_interrupt_kernel()

    try:
        import zmq

        curve = bool(zmq.has("curve"))
    except Exception:  # pragma: no cover - pyzmq always comes with jupyter_client
        curve = False
    if not curve or "transport_encryption" not in AsyncKernelManager.class_trait_names():
        return (
            QuietShutdownKernelManager  # older jupyter_client: plain TCP on localhost, as Jupyter itself does
        )

    class EncryptedKernelManager(QuietShutdownKernelManager):
        """Provisions CurveZMQ keys for kernels whose spec declares support (ipykernel does)."""

        def __init__(self, **kwargs):
            kwargs.setdefault("transport_encryption", "auto")
            super().__init__(**kwargs)

    return EncryptedKernelManager


def _failure_message(nb_path: Path, out_path: Path, exc: Exception) -> str:
    """One-line description of a papermill failure: notebook, cell (index in the source notebook), exception."""
    from papermill.exceptions import PapermillExecutionError

    number = NOTEBOOK_RE.match(nb_path.name).group(1)
    rerun = f"fix it and rerun with `slim reproduce --only {number}`"
    if not isinstance(exc, PapermillExecutionError):
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return f"notebook {nb_path.name} could not be run: {type(exc).__name__}: {detail}; {rerun}"
    index = exc.cell_index
    with contextlib.suppress(Exception):  # map the executed copy's index back to the source notebook's
        import nbformat

        cells = nbformat.read(str(out_path), as_version=4).cells
        cells = [c for c in cells if "papermill-error-cell-tag" not in c.get("metadata", {}).get("tags", [])]
        index -= sum(INJECTED_TAG in c.get("metadata", {}).get("tags", []) for c in cells[: exc.cell_index])
    lines = [ln.strip() for ln in str(exc.source or "").splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if len(first) > 80:
        first = first[:77] + "..."
    evalue = " ".join(str(exc.evalue).split())
    return (
        f"notebook {nb_path.name} failed in cell {index} (`{first}`): {exc.ename}: {evalue}; "
        f"the traceback is in {out_path}; {rerun}"
    )


def run_notebooks(
    notebook_dir: str | Path = "notebooks",
    build_dir: str | Path = "build",
    figures_dir: str | Path = "figures",
    only: Iterable[str] | None = None,
    parameters: Mapping | None = None,
    progress: bool = True,
    kernel_name: str = "python3",
    jobs: int = 1,
) -> list[dict]:
    """Execute `notebook_dir/NN_*.ipynb` with papermill; return one record per notebook.

    Each notebook gets the entries of `parameters` that its `parameters` cell declares (so one YAML file can
    serve all notebooks) plus `figures_dir` as an absolute path; it runs with the notebook folder as working
    directory, and its executed copy is written to `build_dir/<name>.ipynb`. A parameter that no notebook in
    the folder declares is an error (likely a typo). Up to `jobs` notebooks run at once, each in its own kernel,
    started in numeric order (every notebook reads only the data and writes only its own outputs), except those of
    `READS_OUTPUTS`, which start after every other selected notebook has finished, and those of `AFTER`, which
    start after the notebooks named there have finished; `jobs` = 1 runs them one after
    another in numeric order. The first failing notebook stops the run (no further notebook starts; running ones
    finish) with a `NotebookError` naming the notebook and cell. Records, in numeric order: `notebook`, `status`
    ("ok", "failed", "not run"), `wall_s`, `output`.
    """
    from tqdm.auto import tqdm

    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise DataError(f"jobs must be a positive whole number of notebooks run at once; got {jobs!r}")
    pm = _papermill()
    all_notebooks = find_notebooks(notebook_dir)
    notebooks = find_notebooks(notebook_dir, only)
    parameters = dict(parameters or {})
    declared = {nb: declared_parameters(nb) for nb in all_notebooks}
    known = set(RUNNER_PARAMETERS).union(*declared.values())
    unknown = sorted(set(parameters) - known)
    if unknown:
        raise UnknownNameError(
            close_matches_message("notebook parameter", unknown[0], sorted(known))
            + f" (no `parameters` cell in {notebook_dir} declares it)"
        )
    build = Path(build_dir).resolve()
    build.mkdir(parents=True, exist_ok=True)
    figures = Path(figures_dir).resolve()
    figures.mkdir(parents=True, exist_ok=True)

    summary = [
        {"notebook": nb.name, "status": "not run", "wall_s": float("nan"), "output": str(build / nb.name)}
        for nb in notebooks
    ]
    manager_class = _kernel_manager_class()
    # a bar on a terminal; elsewhere (logs, CI) one plain line per notebook as it starts and ends
    lines = progress and not sys.stderr.isatty()
    lock = threading.Lock()

    def say(text: str) -> None:
        if lines:
            with lock:
                print(text, file=sys.stderr, flush=True)

    def execute(i: int, kernel: str) -> None:
        nb = notebooks[i]
        say(f"notebook {i + 1}/{len(notebooks)}: {nb.name} ...")
        injected = {k: v for k, v in parameters.items() if k in declared[nb]}
        injected["figures_dir"] = str(figures)
        out_path = build / nb.name
        t0 = time.perf_counter()
        try:
            pm.execute_notebook(
                str(nb.resolve()),
                str(out_path),
                parameters=injected,
                kernel_name=kernel,
                progress_bar=False,
                log_output=False,
                kernel_manager_class=manager_class,
                # the kernel starts in the notebook folder (nbclient's resources path); papermill's own `cwd`
                # would change this process's working directory, which notebooks running at once share
                resources={"metadata": {"path": str(nb.parent.resolve())}},
            )
        except Exception as exc:  # papermill errors, dead kernels, missing kernelspecs alike
            summary[i].update(status="failed", wall_s=time.perf_counter() - t0)
            raise NotebookError(_failure_message(nb, out_path, exc), summary) from exc
        summary[i].update(status="ok", wall_s=time.perf_counter() - t0)
        say(f"notebook {i + 1}/{len(notebooks)}: {nb.name} ok in {summary[i]['wall_s']:.1f} s")

    first = [i for i, nb in enumerate(notebooks) if nb.name not in READS_OUTPUTS]
    last = [i for i, nb in enumerate(notebooks) if nb.name in READS_OUTPUTS]
    t_start = time.perf_counter()
    env = portable_numerics_env()
    if progress and kernel_name == "python3":
        print(describe(env), file=sys.stderr, flush=True)
    with _kernel_of_this_python(kernel_name, env) as kernel:
        bar = tqdm(
            total=len(notebooks), desc="notebooks", unit="nb", disable=not progress or lines, file=sys.stderr
        )
        names = [nb.name for nb in notebooks]
        after = {
            i: {names.index(n) for n in AFTER.get(name, ()) if n in names} for i, name in enumerate(names)
        }
        try:
            for wave in (first, last):
                _run_wave(wave, jobs, lambda i: execute(i, kernel), bar, after)
        finally:
            bar.close()
    write_captions(
        figures
    )  # CAPTIONS.md for every output now in the folder, after all notebooks wrote theirs
    total = time.perf_counter() - t_start
    if progress:
        print(
            f"ran {len(notebooks)} notebook(s) in {total:.1f} s; executed copies in {build}", file=sys.stderr
        )
    return summary


def _run_wave(
    indices: list[int],
    jobs: int,
    execute: Callable[[int], None],
    bar: Any,
    after: Mapping[int, set[int]] | None = None,
) -> None:
    """Run ``execute(i)`` for `indices`, at most `jobs` at once, started in order, each once every index `after`
    names for it has finished; after the first failure no further one starts, the running ones finish, and the
    failure is raised."""
    after = after or {}
    if jobs == 1:
        for i in indices:
            execute(i)
            bar.update(1)
        return
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    pending = list(indices)
    running: dict[Any, int] = {}
    finished: set[int] = set()
    failure: BaseException | None = None
    with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="notebook") as pool:
        while pending or running:
            while len(running) < jobs and failure is None:
                ready = [i for i in pending if after.get(i, set()) <= finished]
                if not ready:
                    break
                pending.remove(ready[0])
                running[pool.submit(execute, ready[0])] = ready[0]
            if not running:
                break
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for fut in done:
                finished.add(running.pop(fut))
                exc = fut.exception()
                if exc is not None and failure is None:
                    failure = exc
                elif exc is None:
                    bar.update(1)
            if failure is not None:
                pending.clear()
    if failure is not None:
        raise failure


# ----------------------------------------------------------------------------------------------- hygiene
def _tags(cell: Mapping) -> list:
    return list(cell.get("metadata", {}).get("tags", []) or [])


def _with_line_sources(nb: dict) -> dict:
    """A copy of `nb` whose cell sources are lists of lines, the layout Jupyter writes."""
    nb = copy.deepcopy(nb)
    for cell in nb.get("cells", []):
        if isinstance(cell.get("source"), str):
            cell["source"] = cell["source"].splitlines(keepends=True)
    return nb


def strip_notebook_dict(nb: dict) -> dict:
    """A copy of notebook JSON `nb` without outputs, execution counts, papermill cells and metadata noise.

    Cell sources become lists of lines, as Jupyter writes them.
    """
    nb = _with_line_sources(nb)
    cells = []
    for cell in nb.get("cells", []):
        tags = _tags(cell)
        if INJECTED_TAG in tags or "papermill-error-cell-tag" in tags:
            continue  # cells papermill added to an executed copy
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        meta = {k: v for k, v in cell.get("metadata", {}).items() if k in KEPT_CELL_METADATA and v}
        cell["metadata"] = meta
        cells.append(cell)
    nb["cells"] = cells
    meta = {k: v for k, v in nb.get("metadata", {}).items() if k in KEPT_NOTEBOOK_METADATA}
    if isinstance(meta.get("language_info"), dict):
        meta["language_info"] = {k: v for k, v in meta["language_info"].items() if k in KEPT_LANGUAGE_INFO}
    nb["metadata"] = meta
    return nb


def _dumps(nb: dict) -> str:
    """Notebook JSON as Jupyter writes it (1-space indent, sorted keys), with a final newline."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _load(path: Path) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            nb = json.load(fh)
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a readable notebook JSON file ({exc})") from exc
    if not isinstance(nb, dict):
        raise DataError(f"{path}: not a notebook (top-level JSON is not an object)")
    return nb


def strip_notebook(path: str | Path) -> bool:
    """Strip `path` in place (see `strip_notebook_dict`); return True if the file changed."""
    path = Path(path)
    text = path.read_text(encoding="utf-8")
    nb = _load(path)
    if not isinstance(nb, dict) or nb.get("nbformat") != 4 or not isinstance(nb.get("cells"), list):
        raise DataError(f"{path}: not a Jupyter notebook (nbformat 4 with a list of cells); left as it is")
    new = _dumps(strip_notebook_dict(nb))
    if new == text:
        return False
    write_text(path, new)
    return True


def check_clean(path: str | Path) -> list[str]:
    """Problems that keep notebook `path` from being committed; an empty list means it is clean.

    Clean: valid nbformat 4; the first cell is markdown; no code cell has outputs or an execution count;
    exactly one cell is tagged `parameters` and it is the first code cell; no papermill cells or metadata
    noise (i.e. `strip_notebook` would not change it).
    """
    path = Path(path)
    try:
        nb = _load(path)
    except DataError as exc:
        return [str(exc)]
    problems: list[str] = []
    if nb.get("nbformat") != 4:
        return [f"{path.name}: nbformat is {nb.get('nbformat')!r}, expected 4; re-save it with Jupyter 4+"]
    try:
        import nbformat

        nbformat.validate(nbformat.from_dict(copy.deepcopy(nb)))
    except ImportError:  # pragma: no cover - nbformat comes with papermill/jupyter
        pass
    except Exception as exc:
        msg = " ".join(str(exc).split())[:200]
        problems.append(f"{path.name}: invalid nbformat 4 ({msg})")
    cells = nb.get("cells", [])
    if not cells or cells[0].get("cell_type") != "markdown":
        problems.append(
            f"{path.name}: the first cell must be a markdown cell (title and what the notebook reproduces)"
        )
    code = [(i, c) for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    for i, c in code:
        if c.get("outputs"):
            problems.append(f"{path.name}: cell {i} has outputs; run `slim nbstrip {path}`")
        if c.get("execution_count") is not None:
            problems.append(f"{path.name}: cell {i} has an execution count; run `slim nbstrip {path}`")
    tagged = [i for i, c in enumerate(cells) if PARAMETERS_TAG in _tags(c)]
    if len(tagged) != 1:
        problems.append(
            f"{path.name}: {len(tagged)} cells are tagged 'parameters' (cells {tagged}); exactly one is needed"
        )
    elif not code or tagged[0] != code[0][0]:
        problems.append(
            f"{path.name}: the cell tagged 'parameters' (cell {tagged[0]}) must be the first code cell"
        )
    if not problems and strip_notebook_dict(nb) != _with_line_sources(nb):
        problems.append(f"{path.name}: papermill cells or metadata noise; run `slim nbstrip {path}`")
    return problems


def main(argv: list[str] | None = None) -> int:
    """`python -m slimlib.experiments.outputs.runner --strip NB...` strips notebooks; `--check NB...` lists problems (exit 1)."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m slimlib.experiments.outputs.runner", description=main.__doc__
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--strip", action="store_true", help="strip outputs and metadata noise in place")
    mode.add_argument("--check", action="store_true", help="report notebooks that are not clean")
    parser.add_argument("paths", nargs="+", type=Path)
    args = parser.parse_args(argv)
    return strip_or_check(args.paths, check=args.check)


def strip_or_check(paths: Iterable[Path], check: bool = False, out=None) -> int:
    """Strip (or with `check`, only report on) each notebook; return 1 if any check failed, else 0."""
    out = out or sys.stdout
    bad = 0
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise DataError(f"notebook {str(path)!r} does not exist")
        if check:
            problems = check_clean(path)
            bad += bool(problems)
            for p in problems:
                print(p, file=out)
        else:
            changed = strip_notebook(path)
            print(f"{'stripped' if changed else 'clean   '} {path}", file=out)
            bad_left = check_clean(path)
            for p in bad_left:  # structure problems stripping cannot fix
                print(p, file=out)
            bad += bool(bad_left)
    return 1 if bad else 0


if __name__ == "__main__":  # pragma: no cover
    try:
        sys.exit(main())
    except SlimError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
