"""The evaluation: the MAPE table is computed from the data (not stored), the CLI writes it, the notebook runs."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

from slimlib.cli.main import main
from slimlib.experiments.accuracy.evaluation import (
    TABLE_COLUMNS,
    evaluate,
    fitted_parameters,
    run_evaluation,
    scenario_wide_table,
)
from slimlib.experiments.accuracy.scenarios import Fold, Scenario
from slimlib.model import PaperModel

ROOT = Path(__file__).resolve().parents[1]


def _scenario(noise: float) -> list[Scenario]:
    truth = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(), noise=noise, seed=3)
    df["mean_ttft_ms"] = 1000 * truth.predict(df)["pred_prefill_s"]
    df["mean_itl_ms"] = 1000 * truth.predict(df)["pred_decode_s"] / (df["output_len"] - 1)
    train = df[df["output_len"] == 64].reset_index(drop=True)
    test = df[df["output_len"] == 256].reset_index(drop=True)
    return [Scenario("syn", "synthetic", "t", "l", [Fold("all", train, test)]),
            Scenario("empty", "no data", "t", "l", [], reason="no data: test")]  # fmt: skip


def test_table_is_computed_from_the_data():
    clean = evaluate(_scenario(0.0), methods=["paper", "imai-ood-lr", "llmvisor-agg"], n_starts=2)
    assert list(clean.columns) == list(TABLE_COLUMNS)
    slim = clean[(clean["scenario"] == "syn") & (clean["method"] == "paper")].set_index("metric")["mape_pct"]
    assert slim["throughput"] < 1e-3 and slim["latency"] < 1e-3  # SLIM recovers its own ground truth
    noisy = evaluate(_scenario(0.05), methods=["paper"], n_starts=2)
    assert (
        noisy.loc[(noisy["scenario"] == "syn") & (noisy["metric"] == "throughput"), "mape_pct"].item() > 1.0
    )
    empty = clean[clean["scenario"] == "empty"]
    assert empty["mape_pct"].isna().all() and (empty["n_train"] == 0).all()
    assert clean.attrs["notes"]["empty"] == "no data: test"
    wide = scenario_wide_table(clean)
    assert list(wide.columns[:3]) == ["scenario", "n_train", "n_test"] and "SLIM (paper)" in wide.columns


def test_missing_baseline_inputs_give_a_note_not_a_crash():
    scen = _scenario(0.0)
    for f in scen[0].folds:
        del f.train["mean_ttft_ms"]
    res = run_evaluation(scen, methods=["llmvisor-agg", "paper"], n_starts=1)
    table = res.table()
    row = table[(table["method"] == "llmvisor-agg") & (table["scenario"] == "syn")]
    assert row["mape_pct"].isna().all()
    assert "mean_ttft_ms" in res.notes[("syn", "llmvisor-agg")]
    params = fitted_parameters(res, "paper")
    assert set(params["parameter"]) == set(TRUE_PARAMS)


def test_real_evaluation_extended_beats_faithful_slim_on_the_transfers():
    table = evaluate(methods=["paper", "slim"], only=["output-length-transfer", "combined"], n_starts=2)
    thr = table[table["metric"] == "throughput"].pivot(index="scenario", columns="method", values="mape_pct")
    assert np.isfinite(thr.to_numpy()).all()
    assert (thr["slim"] < thr["paper"]).all()


def test_cli_writes_the_long_table(tmp_path, capsys):
    out = tmp_path / "mape.csv"
    assert (
        main(["evaluate", "--scenario", "combined", "--method", "paper", "--starts", "1", "--out", str(out)])
        == 0
    )
    df = pd.read_csv(out)
    assert list(df.columns) == list(TABLE_COLUMNS) and len(df) == 2
    assert "throughput MAPE" in capsys.readouterr().out
    assert main(["evaluate", "--scenario", "combind"]) == 2


@pytest.mark.skipif(
    not (ROOT / "notebooks" / "06_slim_evaluation.ipynb").is_file(), reason="notebook 06 absent"
)
def test_notebook_06_runs_in_quick_mode(tmp_path):
    pytest.importorskip("papermill")
    from reproduced import notebook_outputs

    figures = notebook_outputs(tmp_path)("06")
    for name in ("table02_mape.csv", "table02_mape.md", "table02_mape.tex", "eval_parity.png",
                 "eval_parity.pdf", "eval_curves.png", "eval_slim_params.csv"):  # fmt: skip
        assert (figures / name).is_file() and (figures / name).stat().st_size > 0, name
    # every MAPE cell of Table II has an interval, and every non-physical prediction is counted in its cell
    long = pd.read_csv(figures / "table02_mape.csv")
    ok = long["mape_pct"].notna()
    assert ok.any() and long.loc[ok, ["ci_lo_pct", "ci_hi_pct"]].notna().all().all()
    assert (long.loc[ok, "ci_lo_pct"] <= long.loc[ok, "mape_pct"] + 1e-9).all()
    assert "n_nonphysical" in long.columns and long.loc[ok, "n_nonphysical"].notna().all()
    for metric in ("throughput", "latency"):
        shown = (figures / f"table02_mape_{metric}.md").read_text()
        rows = [ln for ln in shown.splitlines() if ln.startswith("| ") and "Scenario" not in ln]
        for row in rows:
            for cell in row.strip("|").split("|")[2:]:
                cell = cell.strip().strip("*")
                assert cell.startswith("n/a") or re.match(r"^-?\d+\.\d \[-?\d+\.\d, -?\d+\.\d\]", cell), cell
        assert "context transfer IL = OL (LLM-Inference-Bench, MI300X/MI250)" in shown


def test_warnings_are_collected_per_scenario_and_method_not_silenced():
    # one output length in training: alpha and gamma scale alike, so SLIM's fit warns (identifiability); the
    # evaluation records the warning with its scenario, method and fold and counts it in the table
    import warnings as w

    from slimlib.experiments.accuracy.evaluation import WARNING_COLUMNS, run_evaluation

    truth = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    one = synthesize(truth, grid(models=("opt-1.3b",), input_len=(128,), output_len=(64,),
                                 batch=(1, 2, 4, 8, 16, 32, 64, 128)))  # fmt: skip
    scen = [Scenario("syn", "one curve", "t", "l", [Fold("all", one, one)])]
    with w.catch_warnings():
        w.simplefilter("error")  # nothing may escape to the caller either: it is all in the result
        result = run_evaluation(scen, methods=["paper"], n_starts=2)
    assert list(result.warnings.columns) == list(WARNING_COLUMNS)
    ident = result.warnings[result.warnings["category"] == "IdentifiabilityWarning"]
    assert len(ident) and (ident["scenario"] == "syn").all() and (ident["method"] == "paper").all()
    table = result.table()
    assert table.loc[table["scenario"] == "syn", "n_warnings"].eq(len(result.warnings)).all()


def test_numbering_the_notes_keeps_the_bold_cells():
    """A cell marked bold (significantly lowest) stays bold through the note numbering, in Markdown and LaTeX."""
    from slimlib.experiments.accuracy.evaluation import number_notes
    from slimlib.experiments.outputs import table_format as T

    display = pd.DataFrame(
        {"Scenario": ["a", "b"], "SLIM": [T.Bold("3.1 [2.0, 4.2]"), "n/a (note 1)"]}, dtype=object
    )
    notes, shown = number_notes(["first", "n/a (note 1): no data"], display)
    assert notes == ["(1) first", "(2) n/a (note 2): no data"]
    assert isinstance(shown["SLIM"].iloc[0], T.Bold) and shown["SLIM"].iloc[1] == "n/a (note 2)"
    assert "**3.1 [2.0, 4.2]**" in T.markdown(*T.format_table(shown))
