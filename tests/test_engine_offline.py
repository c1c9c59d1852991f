"""The CPU engine's offline campaign (the served configurations on the engine alone): the runner spreads repeats,
re-runs a run with outside load once and refuses a second, every run passes its physical checks before it is used,
the committed folder is intact and covers the served grid, and the cross-validation scores it as its own dataset
(a stand-in engine interpreter here; the real one needs vLLM's CPU build)."""

from __future__ import annotations

import json
import shutil
import stat
import sys

import numpy as np
import pandas as pd
import pytest

from slimlib.data import load
from slimlib.data.engine_offline import (
    CACHED,
    COMMITTED,
    TABLE_FILE,
    offline_medians,
    read_engine_offline,
    run_engine_offline,
    write_engine_offline,
)
from slimlib.errors import DataError
from slimlib.experiments.accuracy.extrapolation_folds import build_axis_folds
from slimlib.experiments.accuracy.scenarios import engine_offline_rows
from slimlib.experiments.engine_study.offline import (
    order_effect,
    paired,
    prefix_cache_effect,
    served_over_offline,
    without_caching_check,
)
from slimlib.kit.offline_engine_bench import TOKEN_RANGE, prompt_ids, run_seed
from slimlib.registry.architectures import get_architecture
from slimlib.registry.engine_models import ALL_ENGINE_MODELS

QUIET = {"cpu_user": 0.5, "cpu_system": 0.0, "cpu_steal": 0.0, "cpu_idle": 0.5, "outside_cpu": 0.0,
         "outside_load": False}  # fmt: skip
BUSY = {**QUIET, "outside_cpu": 0.9, "outside_load": True}


def _fake_engine(tmp_path, e2e=0.5, tokens_short=0, rc=0, caching=False):
    """An interpreter stand-in: prints a version for ``-c``, else one JSON row per run of the spec it is given."""
    script = tmp_path / "fake-python"
    script.write_text(
        f"#!{sys.executable}\nimport json, sys\nif sys.argv[1] == '-c':\n    print('0.0-test'); sys.exit(0)\n"
        "spec = json.load(open(sys.argv[-1]))\n"
        "for b, il, ol in spec['runs']:\n"
        "    print(json.dumps({'model': spec['model'], 'batch_size': b, 'input_len': il, 'output_len': ol,\n"
        f"        'repeat': spec['repeat'], 'e2e_s': {e2e} * b, 'process_cpu_s': 1.0, 'completed': b,\n"
        f"        'output_tokens': b * ol - {tokens_short}, 'prompt_tokens': b * il, 'threads': 1,\n"
        f"        'prefix_caching': {caching}}}))\n"
        f"print('a log line', file=sys.stderr)\nsys.exit({rc})\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def _models_dir(tmp_path, *models):
    for m in models:
        (tmp_path / "models" / m).mkdir(parents=True)
        (tmp_path / "models" / m / "config.json").write_text("{}", encoding="utf-8")
    return tmp_path / "models"


LENS = {"a": 512, "b": 512}
GRID = pd.DataFrame({"model": ["a", "a", "b"], "batch_size": [1, 4, 2], "input_len": [128, 128, 64],
                     "output_len": [16, 16, 8]})  # fmt: skip


def test_the_runner_spreads_repeats_and_writes_a_checked_table(tmp_path, monkeypatch):
    import slimlib.data.engine_offline as mod

    monkeypatch.setattr(mod, "load_split", lambda *a, **k: QUIET)
    said: list[str] = []
    table, manifest = run_engine_offline(_fake_engine(tmp_path), _models_dir(tmp_path, "a", "b"), GRID, 2, max_model_len=LENS,
                                         say=said.append)  # fmt: skip
    assert len(table) == 6 and sorted(table["repeat"].unique()) == [0, 1]
    # repeat-major: every model's repeat 0 before any repeat 1, and repeat 1 runs in reverse order
    order = [(s.split()[0], s.split()[1], s.split()[2]) for s in said]
    assert order == [("r0", "a", "B=1"), ("r0", "a", "B=4"), ("r0", "b", "B=2"),
                     ("r1", "a", "B=4"), ("r1", "a", "B=1"), ("r1", "b", "B=2")]  # fmt: skip
    assert np.allclose(table["throughput_tok_s"], table["batch_size"] * (table["input_len"] + table["output_len"])
                       / table["e2e_s"])  # fmt: skip
    assert manifest["engine_version"] == "0.0-test" and manifest["repeats"] == 2 and manifest["reruns"] == []
    assert manifest["engine_env"]["OMP_NUM_THREADS"] == "1"  # the served worker's one thread
    back = read_engine_offline(write_engine_offline(tmp_path / "out", table, manifest))
    assert (back["checks_failed"] == "").all()
    med = offline_medians(back)
    assert len(med) == 3 and (med["n_repeats"] == 2).all() and med["static_batch"].all()


def test_a_run_with_outside_load_is_rerun_once_then_refused(tmp_path, monkeypatch):
    import slimlib.data.engine_offline as mod

    calls = iter([BUSY, QUIET, QUIET, QUIET])
    monkeypatch.setattr(mod, "load_split", lambda *a, **k: next(calls))
    table, manifest = run_engine_offline(_fake_engine(tmp_path), _models_dir(tmp_path, "a", "b"), GRID, 1, max_model_len=LENS,
                                         say=lambda s: None)  # fmt: skip
    assert manifest["reruns"] == ["a B=1 IL=128 OL=16 r0"] and len(table) == 3
    assert not table["outside_load"].any()
    monkeypatch.setattr(mod, "load_split", lambda *a, **k: BUSY)
    with pytest.raises(DataError, match=r"outside load during a B=1 IL=128 OL=16 repeat 0 and its re-run"):
        run_engine_offline(
            _fake_engine(tmp_path), tmp_path / "models", GRID, 1, max_model_len=LENS, say=lambda s: None
        )


def test_a_failing_engine_and_a_missing_model_folder_are_one_line(tmp_path):
    with pytest.raises(
        DataError, match=r"fake-python: the offline engine run of a failed \(exit 3\): a log line"
    ):
        run_engine_offline(
            _fake_engine(tmp_path, rc=3),
            _models_dir(tmp_path, "a", "b"),
            GRID,
            1,
            max_model_len=LENS,
            say=lambda s: None,
        )
    with pytest.raises(DataError, match=r"nowhere/a: no config.json; write it with `slim bench model a"):
        run_engine_offline(
            _fake_engine(tmp_path), tmp_path / "nowhere", GRID, 1, max_model_len=LENS, say=lambda s: None
        )


def test_a_run_that_fails_its_physics_is_kept_but_not_used(tmp_path, monkeypatch):
    import slimlib.data.engine_offline as mod

    monkeypatch.setattr(mod, "load_split", lambda *a, **k: QUIET)
    table, manifest = run_engine_offline(_fake_engine(tmp_path, tokens_short=1), _models_dir(tmp_path, "a", "b"),
                                         GRID, 1, max_model_len=LENS, say=lambda s: None)  # fmt: skip
    back = read_engine_offline(write_engine_offline(tmp_path / "out", table, manifest))
    assert len(back) == 3 and (back["checks_failed"] == "output_tokens").all()
    assert offline_medians(back).empty


def test_a_run_with_prefix_caching_on_is_kept_but_not_used(tmp_path, monkeypatch):
    # with caching on, a prompt an earlier run prefilled skips its prefill: the run timed part of its work
    import slimlib.data.engine_offline as mod

    monkeypatch.setattr(mod, "load_split", lambda *a, **k: QUIET)
    table, manifest = run_engine_offline(_fake_engine(tmp_path, caching=True), _models_dir(tmp_path, "a", "b"),
                                         GRID, 1, max_model_len=LENS, say=lambda s: None)  # fmt: skip
    assert manifest["flags"]["enable_prefix_caching"] is False
    back = read_engine_offline(write_engine_offline(tmp_path / "out", table, manifest))
    assert (back["checks_failed"] == "prefix_caching").all() and offline_medians(back).empty


def test_a_campaign_that_did_not_record_prefix_caching_takes_it_from_its_manifest_or_is_refused(
    tmp_path, monkeypatch
):
    import slimlib.data.engine_offline as mod

    monkeypatch.setattr(mod, "load_split", lambda *a, **k: QUIET)
    table, manifest = run_engine_offline(_fake_engine(tmp_path), _models_dir(tmp_path, "a", "b"), GRID, 1,
                                         max_model_len=LENS, say=lambda s: None)  # fmt: skip
    old = table.drop(columns="prefix_caching")
    flags = {k: v for k, v in manifest["flags"].items() if k != "enable_prefix_caching"}
    folder = write_engine_offline(tmp_path / "old", old, {**manifest, "flags": flags})
    with pytest.raises(
        DataError, match=r"old/runs.csv: no prefix_caching column and manifest.json has no flags"
    ):
        read_engine_offline(folder)
    folder = write_engine_offline(
        tmp_path / "old", old, {**manifest, "flags": {**flags, "enable_prefix_caching": True}}
    )
    back = read_engine_offline(folder)
    assert (back["checks_failed"] == "prefix_caching").all() and offline_medians(back).empty


def test_a_changed_table_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "offline"
    shutil.copytree(COMMITTED, folder)
    path = folder / TABLE_FILE
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"runs.csv: sha256 differs from manifest.json"):
        read_engine_offline(folder)
    with pytest.raises(DataError, match=r"nothing/runs.csv: missing; run `slim bench offline --out "):
        read_engine_offline(tmp_path / "nothing")


def test_prompts_are_deterministic_distinct_and_inside_every_vocabulary():
    a, b = prompt_ids(0, 64, 0), prompt_ids(1, 64, 0)
    assert a == prompt_ids(0, 64, 0) and a != b and a != prompt_ids(0, 64, 1) and len(a) == 64
    # every run of a campaign (warm-up 0, then 1..n; repeats 0..2) prompts its own tokens: no run shares a prefix
    seeds = {run_seed(r, k) for r in range(3) for k in range(200)}
    assert len(seeds) == 600
    firsts = {tuple(prompt_ids(i, 8, s)) for s in seeds for i in range(4)}
    assert len(firsts) == 2400
    smallest_vocab = min(get_architecture(m).vocab_size for m in ALL_ENGINE_MODELS)
    assert min(a + b) >= TOKEN_RANGE[0] and max(a + b) < TOKEN_RANGE[1] <= smallest_vocab


def test_the_committed_campaign_passes_its_checks_and_covers_the_served_grid():
    runs = read_engine_offline()
    manifest = json.loads((COMMITTED / "manifest.json").read_text(encoding="utf-8"))
    assert (runs["checks_failed"] == "").all() and not runs["outside_load"].any()
    assert set(runs["threads"]) == {1}  # the engine on the one thread its served worker has
    assert set(runs["repeat"]) == set(range(manifest["repeats"])) and manifest["repeats"] >= 3
    keys = ["model", "batch_size", "input_len", "output_len"]
    served = load("engine-cpu-medians")[keys].drop_duplicates()
    got = runs[keys].drop_duplicates()
    assert len(got.merge(served)) == len(served) == len(got)
    rows = engine_offline_rows()
    assert rows is not None and len(rows) == len(served) and rows["static_batch"].all()
    assert manifest["flags"]["enable_prefix_caching"] is False and not runs["prefix_caching"].any()
    # short prompts: the engine alone takes the served engine's time within the sessions' drift (the front end on the
    # other core costs it little); long prompts: the served campaign (prefix caching on, prompts repeated across a
    # server's runs) skipped about half its prefill, so from B = 4 on it is much faster than the engine alone
    pairs = paired(load("engine-cpu-medians"), rows)
    assert len(pairs) == len(served)
    assert 0.95 < pairs.loc[pairs["input_len"] == 128, "ratio"].median() < 1.1
    longest = pairs[(pairs["input_len"] == pairs.groupby("model")["input_len"].transform("max"))
                    & (pairs["batch_size"] >= 4)]["ratio"]  # fmt: skip
    assert len(longest) == 15 and longest.max() < 0.9 and longest.median() < 0.65


def test_the_cached_campaign_fails_only_its_prefix_caching_check_and_timed_about_half_the_long_prefills():
    cached = read_engine_offline(CACHED)
    assert len(cached) == 345 and (cached["checks_failed"] == "prefix_caching").all()
    assert offline_medians(cached).empty  # nothing fits on it
    effect = prefix_cache_effect(cached, read_engine_offline())
    bcols = [c for c in effect.columns if c.startswith("B=")]
    longest = effect[effect["input_len"] == effect.groupby("model")["input_len"].transform("max")]
    ratios = longest[bcols[2:]].to_numpy().ravel()  # B >= 4: most of a forward run's prompts were cached
    ratios = ratios[np.isfinite(ratios)]
    assert len(ratios) == 15 and ratios.max() < 0.95 and np.median(ratios) < 0.65


@pytest.mark.usefixtures("composed")  # the run's composed table, which build_axis_folds reads
def test_the_cross_validation_scores_the_offline_campaign_on_the_engines_axes():
    axes = {(a.axis, a.dataset) for a in build_axis_folds()}
    for axis in ("batch", "batch-knee", "input", "output", "model"):
        assert (axis, "engine-cpu-offline") in axes


def test_the_served_over_offline_table_pairs_identical_configurations():
    keys = {
        "model": ["a", "a", "a"],
        "batch_size": [1, 1, 2],
        "input_len": [8, 16, 8],
        "output_len": [4, 4, 4],
    }
    served = pd.DataFrame({**keys, "e2e_s": [2.0, 3.0, 5.0]})
    offline = pd.DataFrame({**keys, "e2e_s": [1.0, 3.0, 4.0]}).iloc[[2, 0, 1]]  # another order
    table = served_over_offline(
        served, offline.iloc[:2], n_boot=200, seed=1
    )  # B = 1, IL = 16 has no offline run
    assert table[["batch_size", "n_configs"]].values.tolist() == [[1, 1], [2, 1]]
    assert table["ratio_mean"].tolist() == pytest.approx([2.0, 1.25])
    full = served_over_offline(served, offline, n_boot=200, seed=1)
    row = full[full["batch_size"] == 1].iloc[0]
    assert row["n_configs"] == 2 and row["ratio_mean"] == pytest.approx(1.5)
    assert row["ratio_lo"] <= 1.5 <= row["ratio_hi"] and (row["ratio_min"], row["ratio_max"]) == (1.0, 2.0)


def test_an_empty_grid_and_a_model_without_its_window_are_refused(tmp_path):
    with pytest.raises(DataError, match=r"no configuration to run: the grid is empty"):
        run_engine_offline(_fake_engine(tmp_path), tmp_path, GRID.iloc[:0], 1, max_model_len=LENS)
    with pytest.raises(DataError, match=r"max_model_len: no value for model\(s\) \['b'\]"):
        run_engine_offline(_fake_engine(tmp_path), tmp_path, GRID, 1, max_model_len={"a": 512})


def test_the_order_effect_is_the_reversed_repeats_over_the_forward_ones():
    """Reversed (odd) repeats over the median of the forward (even) ones, per configuration; a run failing a check
    is left out, and a configuration missing in one order is NaN."""
    rows = [("m", 1, 128, 64, r, e2e, "") for r, e2e in ((0, 2.0), (1, 1.0), (2, 4.0))]
    rows += [
        ("m", 2, 128, 64, 0, 3.0, ""),
        ("m", 2, 128, 64, 1, 9.0, "physics"),
        ("m", 2, 128, 64, 3, 6.0, ""),
    ]
    rows += [("m", 4, 128, 64, 0, 5.0, "")]
    runs = pd.DataFrame(rows, columns=["model", "batch_size", "input_len", "output_len", "repeat", "e2e_s",
                                       "checks_failed"])  # fmt: skip
    got = order_effect(runs)
    assert list(got.columns) == ["model", "input_len", "output_len", "B=1", "B=2", "B=4"]
    assert got.loc[0, "B=1"] == pytest.approx(1.0 / 3.0)  # 1.0 over the forward median of 2.0 and 4.0
    assert got.loc[0, "B=2"] == pytest.approx(2.0)  # the failing reversed run is left out: 6.0 / 3.0
    assert np.isnan(got.loc[0, "B=4"])


def test_the_prefix_cache_effect_is_the_cached_campaign_over_the_clean_one():
    """Cached-campaign median E2E (runs failing only the prefix_caching check) over the clean campaign's median
    (runs failing nothing); any other failure is left out, a configuration one campaign lacks is NaN."""
    cols = ["model", "batch_size", "input_len", "output_len", "repeat", "e2e_s", "checks_failed"]
    cached = pd.DataFrame([("m", 1, 128, 64, 0, 1.0, "prefix_caching"), ("m", 1, 128, 64, 1, 3.0, "prefix_caching"),
                           ("m", 2, 128, 64, 0, 2.0, "prefix_caching;time"), ("m", 2, 128, 64, 1, 4.0, "prefix_caching"),
                           ("m", 4, 128, 64, 0, 5.0, "prefix_caching")], columns=cols)  # fmt: skip
    clean = pd.DataFrame([("m", 1, 128, 64, 0, 4.0, ""), ("m", 2, 128, 64, 0, 8.0, ""),
                          ("m", 2, 128, 64, 1, 1.0, "prefix_caching")], columns=cols)  # fmt: skip
    got = prefix_cache_effect(cached, clean)
    assert list(got.columns) == ["model", "input_len", "output_len", "B=1", "B=2", "B=4"]
    assert got.loc[0, "B=1"] == pytest.approx(0.5)  # median 2.0 over 4.0
    assert got.loc[0, "B=2"] == pytest.approx(0.5)  # 4.0 over 8.0: the cached run failing time and the clean
    assert np.isnan(got.loc[0, "B=4"])  # run failing prefix_caching are left out; B=4 has no clean run
    # only the caching check is set aside, whatever its place in checks_failed; the others still count
    cleared = without_caching_check(cached.assign(checks_failed=["prefix_caching", "time;prefix_caching",
                                                                 "prefix_caching;time", "", "completed"]))  # fmt: skip
    assert list(cleared["checks_failed"]) == ["", "time", "time", "", "completed"]
