"""Issues 20 and 29: SIGINT and SIGTERM at any moment of a `slim` run (while it imports, reads, predicts or writes a large
output) leave the previous output intact, no temporary file behind, and one line on standard error."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS

from slimlib.io import OWNER_MARKER
from slimlib.model import PaperModel

#: run as the `slim` program (the import-time handler is installed for that name only)
LAUNCH = "import sys; sys.argv[0] = 'slim'; from slimlib.cli.main import main; sys.exit(main())"
ROWS = 300_000
TRIALS = 8
#: the interpreter's own start (before `slimlib.cli` installs its handler) on a loaded 2-core machine, seconds
STARTUP_S = 0.5


def _inputs(tmp: Path) -> tuple[Path, Path]:
    params = tmp / "params.json"
    params.write_text(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json())
    rng = np.random.default_rng(0)
    grid = tmp / "grid.csv"
    pd.DataFrame(
        {
            "model": rng.choice(["opt-125m", "opt-1.3b"], ROWS),
            "batch_size": rng.integers(1, 64, ROWS),
            "input_len": rng.integers(16, 512, ROWS),
            "output_len": rng.integers(16, 512, ROWS),
        }
    ).to_csv(grid, index=False)
    return params, grid


def test_signals_at_random_moments_keep_the_previous_output(tmp_path):
    params, grid = _inputs(tmp_path)
    out = tmp_path / "pred.csv"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")]),
    }
    argv = [sys.executable, "-c", LAUNCH, "predict", str(params), str(grid), "--out", str(out)]
    t0 = time.perf_counter()
    first = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    full_s = time.perf_counter() - t0
    assert first.returncode == 0, first.stderr
    reference = out.read_text()
    assert len(reference.splitlines()) == ROWS + 1
    rng = random.Random(20)  # seeded moments and signals
    outcomes = []
    for trial in range(TRIALS):
        previous = f"previous output {trial}\n"
        out.write_text(previous)
        sig = rng.choice([signal.SIGINT, signal.SIGTERM])
        delay = rng.uniform(0.0, full_s * 1.1)
        proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=300)
        leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp"))
        assert not leftovers, f"trial {trial} ({sig.name} at {delay:.2f} s): left {leftovers}"
        if proc.returncode == -sig or (proc.returncode == 1 and "KeyboardInterrupt" in err):
            # the signal came while the interpreter itself was starting, before slimlib's first line ran (only
            # possible in the first moments): the default action ended it, and nothing had been opened
            assert delay < STARTUP_S, (
                f"trial {trial}: {sig.name} at {delay:.2f} s ended slim by default: {err}"
            )
            assert out.read_text() == previous
            outcomes.append("before start")
            continue
        assert "Traceback" not in err, f"trial {trial} ({sig.name} at {delay:.2f} s): {err}"
        if proc.returncode == 0:  # the signal came after the output was complete
            assert out.read_text() == reference
            outcomes.append("finished")
            continue
        assert proc.returncode == 128 + sig, (trial, sig.name, delay, proc.returncode, err)
        lines = [ln for ln in err.splitlines() if ln.strip()]
        assert len(lines) == 1 and "interrupted" in lines[0], err
        # the previous output, or (the signal came after the atomic rename, before exit) the complete new one
        got = out.read_text()
        if got == previous:
            outcomes.append("interrupted")
        else:
            assert got == reference, f"trial {trial}: the output is neither the previous nor the new one"
            outcomes.append("interrupted after commit")
    assert outcomes.count("interrupted") >= TRIALS // 2, outcomes  # most signals hit a running command
    (tmp_path / "outcomes.json").write_text(json.dumps(outcomes))


# -- an interrupt cannot be swallowed ----------------------------------------------------------------------


class _SignalInFinalizer:
    """Sends `signum` to this process from its finalizer: the handler's exception is raised inside ``__del__``,
    where Python swallows it (as it did inside numpy's NpzFile.__del__ in a real fit)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum

    def __del__(self) -> None:
        signal.raise_signal(self.signum)


def _fit_inputs(tmp: Path) -> tuple[Path, Path, str]:
    from synthetic import grid, synthesize

    runs = tmp / "runs.csv"
    synthesize(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb"), grid(batch=(1, 4, 16))).to_csv(
        runs, index=False
    )
    out = tmp / "params.json"
    previous = "previous parameters\n"
    out.write_text(previous)
    return runs, out, previous


def test_an_interrupt_swallowed_by_a_finalizer_still_stops_the_fit(tmp_path, monkeypatch, capsys):
    import slimlib.cli.cmd_fit as cmd_fit
    from slimlib.cli.main import main

    runs, out, previous = _fit_inputs(tmp_path)
    aggregate = cmd_fit.aggregate_repeats

    def aggregate_then_swallow(df):
        _SignalInFinalizer(signal.SIGINT)  # dropped at once: its __del__ runs here
        return aggregate(df)

    monkeypatch.setattr(cmd_fit, "aggregate_repeats", aggregate_then_swallow)
    rc = main(["fit", str(runs), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 130, err
    assert err.splitlines() == [
        "slim fit: interrupted (SIGINT); outputs not finished keep their previous content"
    ]
    assert out.read_text() == previous
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_interrupt_cython_prints_and_swallows_still_stops_the_fit(tmp_path, monkeypatch, capsys):
    """A Cython function that cannot raise (scipy's Sobol initialisation, found by the sweep below) prints the
    exception through sys.excepthook, then drops it: no traceback, and the fit still stops."""
    import slimlib.cli.cmd_fit as cmd_fit
    from slimlib.cli.main import main

    runs, out, previous = _fit_inputs(tmp_path)
    aggregate = cmd_fit.aggregate_repeats

    def aggregate_as_cython_would(df):
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt as exc:  # what __Pyx_WriteUnraisable does: print, then carry on
            sys.excepthook(type(exc), exc, exc.__traceback__)
        return aggregate(df)

    monkeypatch.setattr(cmd_fit, "aggregate_repeats", aggregate_as_cython_would)
    rc = main(["fit", str(runs), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 130 and err.splitlines() == [
        "slim fit: interrupted (SIGINT); outputs not finished keep their previous content"
    ], err
    assert out.read_text() == previous


def test_an_import_cut_short_by_a_signal_is_an_interrupt(tmp_path, monkeypatch, capsys):
    """A signal inside an import can surface as another error (RuntimeError from __set_name__): still one line."""
    import slimlib.cli.cmd_fit as cmd_fit
    from slimlib.cli.main import main

    runs, out, previous = _fit_inputs(tmp_path)

    def preload(*modules: str) -> None:
        try:
            signal.raise_signal(signal.SIGTERM)
        except KeyboardInterrupt as exc:
            raise RuntimeError("Error calling __set_name__ on 'cached_property' instance") from exc

    monkeypatch.setattr(cmd_fit, "preload", preload)
    rc = main(["fit", str(runs), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 143 and len(err.splitlines()) == 1 and "interrupted (SIGTERM)" in err, err
    assert out.read_text() == previous


# -- the random-moment sweep over fit, predict, plan and ingest --------------------------------------------

#: trials per command (seeded moments and signals)
SWEEP_TRIALS = int(os.environ.get("SLIM_INTERRUPT_TRIALS", "8"))
SWEEP_SEED = int(os.environ.get("SLIM_INTERRUPT_SEED", "29"))
#: reruns of a trial whose command finished before its signal
RETRIES = 2
PREDICT_ROWS = 40_000


def _sweep_inputs(tmp: Path) -> dict[str, tuple[list[str], str]]:
    """Per command: its argv with ``{out}`` for the output, and the output kind (file or folder)."""
    from synthetic import grid, synthesize

    runs = tmp / "runs.csv"
    synthesize(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb"), grid(batch=(1, 4, 16))).to_csv(
        runs, index=False
    )
    params, big_grid = _inputs_of(tmp, PREDICT_ROWS)
    results = tmp / "results"
    shutil.copytree(Path(__file__).parent / "fixtures" / "ingest" / "runs", results)
    return {
        "fit": (["fit", str(runs), "--out", "{out}", "--quiet", "--starts", "3"], "file"),
        "predict": (["predict", str(params), str(big_grid), "--out", "{out}"], "file"),
        "plan": (
            [
                "plan",
                "--model",
                "llama-2-7b",
                "--gpu",
                "h100-sxm-80gb",
                "--scheduler",
                "slurm",
                "--out",
                "{out}",
            ],
            "folder",
        ),  # fmt: skip
        "ingest": (["data", "ingest", str(results), "--gpu", "h100-sxm-80gb", "--out", "{out}"], "file"),
    }


def _inputs_of(tmp: Path, rows: int) -> tuple[Path, Path]:
    params = tmp / "params-in.json"
    params.write_text(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json())
    rng = np.random.default_rng(0)
    path = tmp / "grid-in.csv"
    pd.DataFrame({"model": rng.choice(["opt-125m", "opt-1.3b"], rows), "batch_size": rng.integers(1, 64, rows),
                  "input_len": rng.integers(16, 512, rows), "output_len": rng.integers(16, 512, rows)}).to_csv(
        path, index=False)  # fmt: skip
    return params, path


def _state(path: Path) -> dict[str, bytes]:
    """The files of an output (a file, or a folder's files by relative name); absent: empty."""
    if path.is_file():
        return {"": path.read_bytes()}
    if path.is_dir():
        return {str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}
    return {}


def _previous(path: Path, kind: str, reference: Path) -> None:
    """An earlier output at `path`: a file of other text, or a plan folder of other content."""
    if kind == "file":
        path.write_text(f"previous output of {path.name}\n")
        return
    shutil.copytree(reference, path)
    for p in path.rglob("*"):
        if p.is_file() and p.name != OWNER_MARKER:  # the folder stays the command's own
            p.write_text(f"previous {p.name}\n")


def _run_trial(
    argv: list[str], env: dict, sig: signal.Signals, delay: float
) -> tuple[int, str, float | None]:
    """Exit status and standard error of `argv` sent `sig` after `delay` s, and its run time when it ended first."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        proc.wait(timeout=delay)
        ended_first: float | None = time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        ended_first = None
        proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err, ended_first


def test_signals_at_random_moments_into_fit_predict_plan_and_ingest(tmp_path):
    """SIGINT/SIGTERM at seeded random moments of each command: it exits 128 + the signal with one line (after
    the progress lines it had printed) and its output as it was (or, when the signal came after the output was committed, the complete new one), or it
    finished (exit 0, complete output); never a traceback, never a temporary file left."""
    t_start = time.perf_counter()
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    commands = _sweep_inputs(tmp_path)
    rng = random.Random(SWEEP_SEED)
    references: dict[str, tuple[dict[str, bytes], float]] = {}
    progress: dict[str, list[str]] = {}
    trials = []
    for name, (template, kind) in commands.items():
        ref = tmp_path / f"ref-{name}"
        argv = [sys.executable, "-c", LAUNCH, *[w.replace("{out}", str(ref)) for w in template]]
        durations = []
        for _ in range(2):  # the first run also warms the caches: the moments span the faster, warm one
            t0 = time.perf_counter()
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
            durations.append(time.perf_counter() - t0)
            assert done.returncode == 0, (name, done.stderr)
        references[name] = (_state(ref), min(durations))
        progress[name] = done.stderr.replace(
            str(ref), "{out}"
        ).splitlines()  # what the command says as it works
        for i in range(SWEEP_TRIALS):
            out = tmp_path / f"{name}-{i}"
            _previous(out, kind, ref)
            argv_i = [sys.executable, "-c", LAUNCH, *[w.replace("{out}", str(out)) for w in template]]
            sig = rng.choice([signal.SIGINT, signal.SIGTERM])
            trials.append([name, out, _state(out), argv_i, sig, rng.random()])
    rng.shuffle(trials)
    # one at a time, each at a seeded fraction of its command's run time: the warm reference's, or a faster
    # uninterrupted trial's (the machine's load changes), so the moments span whole runs. A trial whose work
    # finished before its signal (the process had ended, or was exiting and ignored it) is judged, its previous
    # output put back, and run again at the same fraction of the shorter time (at most RETRIES times), so a slow
    # reference or a long interpreter exit does not leave most signals to land after the work.
    window = {name: ref[1] for name, ref in references.items()}
    outcomes: dict[str, list[str]] = {name: [] for name in commands}
    n_runs = 0
    for name, out, before, argv_i, sig, fraction in trials:
        for attempt in range(1 + RETRIES):
            if attempt:
                _restore(out, before)
            delay = fraction * window[name]
            rc, err, ended_first = _run_trial(argv_i, env, sig, delay)
            n_runs += 1
            outcome = _judge(f"{name} {sig.name} at {delay:.2f} s", rc, err, sig, delay, out, before,
                             references[name][0], progress[name])  # fmt: skip
            outcomes[name].append(outcome)
            if outcome != "finished":
                break
            # its work ended before the signal: by `ended_first`, or (signal ignored while exiting) by `delay`
            window[name] = min(window[name], delay if ended_first is None else ended_first)
    leftovers = [str(p) for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert not leftovers, leftovers
    for name, got in outcomes.items():  # most signals hit a running command
        assert sum(o.startswith("interrupted") for o in got) >= SWEEP_TRIALS // 2, (name, got)
    elapsed = time.perf_counter() - t_start
    (tmp_path / "sweep.json").write_text(json.dumps({"outcomes": outcomes, "elapsed_s": elapsed}))
    print(f"interrupt sweep: {len(trials)} trials, {n_runs} runs in {elapsed:.1f} s: {outcomes}")


def _judge(where: str, rc: int, err: str, sig: signal.Signals, delay: float, out: Path,
           before: dict[str, bytes], reference: dict[str, bytes], progress: list[str]) -> str:  # fmt: skip
    """The outcome of one trial, after asserting it is one of the allowed ones."""
    if rc == -sig or "KeyboardInterrupt" in err:
        # before slimlib's first line ran: SIGTERM's default action, or Python's own SIGINT handler, whose
        # KeyboardInterrupt the interpreter may even drop (inside an import-lock callback) and run on
        assert delay < STARTUP_S and _state(out) in (before, reference), (where, rc, err)
        return "before start"
    assert "Traceback" not in err and "Exception ignored" not in err, (where, err)
    if rc == 0:
        assert _state(out) == reference, f"{where}: finished with an incomplete output"
        return "finished"
    assert rc == 128 + sig, (where, rc, err)
    lines = err.replace(str(out), "{out}").splitlines()
    # one line says so; before it, only what the uninterrupted command had said by then (ingest's report)
    assert "interrupted" in lines[-1] and lines[:-1] == progress[: len(lines) - 1], (where, err)
    state = _state(out)
    assert state in (before, reference), f"{where}: the output is neither the previous nor the new one"
    return "interrupted" if state == before else "interrupted after commit"


def _restore(path: Path, state: dict[str, bytes]) -> None:
    """Put an output back as `state` (from `_state`): a file, or a folder's files by relative name."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    for rel, data in state.items():
        target = path / rel if rel else path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def test_a_plan_interrupted_while_written_leaves_the_old_plan_whole(tmp_path, monkeypatch, capsys):
    """SIGTERM after two of the new plan's files are written: the old plan folder is as it was, no temporary
    folder is left (the deterministic counterpart of the sweep's plan trials)."""
    import slimlib.advisor.plan as plan_module
    from slimlib.cli.main import main

    out = tmp_path / "plan"
    assert main(["plan", "--model", "opt-1.3b", "--gpu", "h100-sxm-80gb", "--out", str(out)]) == 0
    before = _state(out)
    write_text = plan_module.write_text
    written = []

    def write_then_signal(path, text, **kw):
        written.append(write_text(path, text, **kw))
        if len(written) == 2:
            signal.raise_signal(signal.SIGTERM)
        return written[-1]

    monkeypatch.setattr(plan_module, "write_text", write_then_signal)
    argv = [
        "plan",
        "--model",
        "llama-2-7b",
        "--gpu",
        "h100-sxm-80gb",
        "--scheduler",
        "slurm",
        "--out",
        str(out),
    ]
    capsys.readouterr()
    assert main(argv) == 143
    assert len(written) == 2 and capsys.readouterr().err.count("\n") == 1
    assert _state(out) == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_signal_during_a_commit_is_recorded_and_raised_after_it():
    """A signal whose Python handler runs while `slimlib.io` commits an output (another thread received it, so the
    commit's signal mask did not hold it back) is recorded, not raised: the commit finishes whole, and the next
    check raises it. After a command ends, nothing recorded is left to stop later work in the same process."""
    from slimlib import errors
    from slimlib.cli.main import _raise_interrupted

    previous = errors.set_deferring(True)
    try:
        _raise_interrupted(signal.SIGTERM, None)  # no exception inside the commit
        assert errors.interrupt_received() == signal.SIGTERM
    finally:
        errors.set_deferring(previous)
    with pytest.raises(errors.Interrupted):
        errors.check_interrupted()
    errors.clear_interrupt()
    with pytest.raises(errors.Interrupted):  # outside a commit the handler raises at once
        _raise_interrupted(signal.SIGINT, None)
    errors.clear_interrupt()


def test_no_recorded_signal_outlives_the_command(tmp_path, monkeypatch, capsys):
    """`main` returns 143 for a SIGTERM in a plan write, then a library write in the same process commits."""
    import slimlib.advisor.plan as plan_module
    from slimlib.cli.main import main
    from slimlib.io import write_text

    def signal_on_write(path, text, **kw):
        signal.raise_signal(signal.SIGTERM)

    monkeypatch.setattr(plan_module, "write_text", signal_on_write)
    argv = ["plan", "--model", "opt-1.3b", "--gpu", "h100-sxm-80gb", "--out", str(tmp_path / "plan")]
    assert main(argv) == 143
    capsys.readouterr()
    assert write_text(tmp_path / "later.txt", "ok\n").read_text() == "ok\n"


def test_the_interrupted_program_exits_without_finalizing(tmp_path):
    """As the `slim` program, an interrupted command prints its one line and exits 128 + the signal at once: the
    interpreter's finalization (here an exit handler that would print) does not run, so nothing it could do, such as
    aborting after an extension's import was cut short, can change the exit status. Completed, it finalizes."""
    program = (
        "import atexit, signal, sys; sys.argv[0] = 'slim'; cut = sys.argv.pop() == 'signal'\n"
        "atexit.register(lambda: print('finalized', file=sys.stderr))\n"
        "import slimlib.advisor.plan as plan\n"
        "write_text = plan.write_text\n"
        "def write_then_signal(path, text, **kw):\n"
        "    if cut:\n"
        "        signal.raise_signal(signal.SIGTERM)\n"
        "    return write_text(path, text, **kw)\n"
        "plan.write_text = write_then_signal\n"
        "from slimlib.cli.main import main\n"
        "sys.exit(main())\n"
    )  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    base = [sys.executable, "-c", program, "plan", "--model", "opt-1.3b", "--gpu", "h100-sxm-80gb", "--out"]
    cut = subprocess.run(
        [*base, str(tmp_path / "a"), "signal"], env=env, capture_output=True, text=True, timeout=120
    )
    assert cut.returncode == 143, cut.stderr
    assert cut.stderr.splitlines() == [
        "slim plan: interrupted (SIGTERM); outputs not finished keep their previous content"
    ], cut.stderr
    done = subprocess.run(
        [*base, str(tmp_path / "b"), "done"], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stderr.splitlines()[-1] == "finalized", done.stderr


def test_a_frontier_interrupted_while_written_leaves_the_old_set_whole(tmp_path, monkeypatch, capsys):
    """An interrupt after the frontier's files are written to their temporary files: the old CSV, PDF and PNG are as
    they were, no temporary file is left (the three are one output set)."""
    import slimlib.io as io_module
    from slimlib.cli.main import main

    params = tmp_path / "params.json"
    params.write_text(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json())
    front = tmp_path / "front.csv"
    old = {front: b"old csv\n", front.with_suffix(".pdf"): b"old pdf", front.with_suffix(".png"): b"old png"}
    for path, data in old.items():
        path.write_bytes(data)
    real = io_module.check_interrupted
    calls = []

    def interrupted_before_the_renames() -> None:
        calls.append(1)
        if (
            len(calls) == 4
        ):  # the set's three files are written (a CSV written on its own was already committed)
            raise KeyboardInterrupt
        real()

    monkeypatch.setattr(io_module, "check_interrupted", interrupted_before_the_renames)
    rc = main(["advise", str(params), "--model", "opt-1.3b", "--input-len", "128", "--output-len", "128",
               "--gpus", "1", "--batch-sizes", "1", "8", "64", "--frontier", str(front)])  # fmt: skip
    assert rc == 130 and "interrupted" in capsys.readouterr().err
    assert len(calls) == 4 and {p: p.read_bytes() for p in old} == old
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
