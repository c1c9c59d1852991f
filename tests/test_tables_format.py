"""Paper-ready table text (slimlib.experiments.outputs.table_format, save_table): fixed decimals, percents, units in human
headers, "n/a (reason)", no scientific notation; Table II in the paper's shape; CSV keeps machine names."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.experiments.outputs import table_format as T
from slimlib.experiments.outputs.plotting import save_table


def test_human_headers_with_units():
    assert T.human_header("throughput_tok_s") == "Throughput (tok/s)"
    assert T.human_header("kv_saved_gib") == "KV saved (GiB)"
    assert T.human_header("decode_step_ms") == "Decode step (ms)"
    assert T.human_header("knee_share_of_max") == "Knee share of max (%)"
    assert T.human_header("sm_clock_mean_mhz") == "SM clock mean (MHz)"
    assert T.human_header("mape_pct") == "MAPE (%)"
    assert T.human_header("Already (human)") == "Already (human)"


def test_values_use_fixed_decimals_and_never_scientific_notation():
    assert T.format_value(14490.123, 0) == "14490"
    assert T.format_value(1.449e4, 1) == "14490.0"
    assert T.format_value(0.00012345, 4) == "0.0001"
    assert T.format_value(0.25, 1, percent=True) == "25.0"
    assert T.format_value(np.nan, 2, na="n/a (no knee)") == "n/a (no knee)"
    assert T.format_value(True) == "yes"
    assert T.format_value(-0.00001, 2) == "0.00"
    assert (
        T.format_sig(1.87e-6) == "0.00000187" and T.format_sig(45.83) == "45.8" and T.format_sig(1e-12) == "0"
    )
    for x in (1e-9, 3.2e-7, 1.5e8, 123456789.0):
        for dec in (0, 2, 4):
            assert "e" not in T.format_value(x, dec).lower()


def test_column_decimals_are_fixed_per_column():
    df = pd.DataFrame({"throughput_tok_s": [12.5, 14490.7, 2000.0], "bw_util": [0.031, 0.5, 0.779]})
    text, numeric = T.format_table(df)
    assert list(text.columns) == ["Throughput (tok/s)", "BW util (%)"]
    assert numeric == [True, True]
    tput = list(text["Throughput (tok/s)"])
    assert tput == ["12", "14491", "2000"]  # one decimal count for the whole column
    assert list(text["BW util (%)"]) == ["3.1", "50.0", "77.9"]  # fraction shown as percent
    custom, _ = T.format_table(df, {"bw_util": T.Col(header="DRAM BW (% of peak)", decimals=0, percent=True)})
    assert list(custom["DRAM BW (% of peak)"]) == ["3", "50", "78"]
    with pytest.raises(DataError, match="not in the table"):
        T.format_table(df, {"nope": T.Col()})


def test_gaps_say_why():
    df = pd.DataFrame({"model": ["a", "b"], "kv_full_batch": [96.0, np.nan]})
    text, _ = T.format_table(df, {"kv_full_batch": T.Col(na="n/a (KV cache never full)")})
    assert list(text.iloc[:, 1]) == ["96", "n/a (KV cache never full)"]
    text, _ = T.format_table(pd.DataFrame({"x_s": [np.nan, 1.5]}))
    assert text.iloc[0, 0] == "n/a (no data)"


def _long():
    rows = []
    for scen, vals in (("same-curve", (12.9, 4.4, 56.9)), ("combined", (8.0, 1.1, 199.3)), ("no-data", None)):
        for m, i in (("SLIM", 0), ("SLIM-extended", 1), ("LLMVisor-Agg", 2)):
            v = np.nan if vals is None else vals[i]
            rows.append({"scenario": scen, "method": m, "metric": "throughput", "n_train": 10, "n_test": 9,
                         "mape_pct": v, "ci_lo_pct": v - 1, "ci_hi_pct": v + 1,
                         "p_wilcoxon": np.nan if m == "SLIM" else 0.0004 if i == 1 else 0.03})  # fmt: skip
    return pd.DataFrame(rows)


def test_table2_in_the_paper_shape_bold_best_with_intervals_and_p_values():
    shown = T.paper_table2(
        _long(), "throughput", reference="SLIM", na_reasons={"no-data": "no data"},
        method_labels={"SLIM": "SLIM (faithful)"},
    )  # fmt: skip
    assert list(shown.columns) == [
        "Scenario",
        "Train / test rows",
        "SLIM (faithful)",
        "SLIM-extended",
        "LLMVisor-Agg",
    ]
    assert list(shown["Scenario"]) == ["same-curve", "combined", "no-data"]
    row = shown.iloc[0]
    assert row["SLIM (faithful)"] == "12.9 [11.9, 13.9]"
    assert row["SLIM-extended"] == "4.4 [3.4, 5.4], p<0.001" and isinstance(row["SLIM-extended"], T.Bold)
    assert row["LLMVisor-Agg"] == "56.9 [55.9, 57.9], p=0.030" and not isinstance(row["LLMVisor-Agg"], T.Bold)
    assert shown.iloc[2]["SLIM-extended"] == "n/a (no data)"
    md = T.markdown(*T.format_table(shown))
    assert "**4.4 [3.4, 5.4], p<0.001**" in md and "**1.1 [0.1, 2.1], p<0.001**" in md
    tex = T.latex(*T.format_table(shown), notes=["x > 100%"])
    assert r"\textbf{4.4 [3.4, 5.4], p$<$0.001}" in tex and r"Note: x $>$ 100\%" in tex  # math-mode < and >


def test_table2_bolds_only_a_significantly_lowest_cell_and_marks_cells_not_held_out():
    long = _long()
    same = (long["scenario"] == "same-curve") & (long["method"] == "SLIM-extended")
    long.loc[same, "ci_hi_pct"] = 12.0  # overlaps SLIM's [11.9, 13.9]: lowest, but not significantly
    comb = (long["scenario"] == "combined") & (long["method"] == "SLIM-extended")
    long.loc[comb, "p_wilcoxon"] = 0.13  # intervals apart, but the paired test does not reject
    shown = T.paper_table2(
        long, "throughput", reference="SLIM", truths={"same-curve": "measured", "combined": "measured"}
    )
    assert not any(isinstance(c, T.Bold) for c in shown.iloc[:2].to_numpy().ravel())
    assert "Ground truth of same-curve, combined: measured." in shown.attrs["notes"]
    shown = T.paper_table2(
        _long(), "throughput", reference="SLIM", not_held_out={"combined / SLIM-extended": "tuned on it"}
    )
    assert isinstance(shown.iloc[0]["SLIM-extended"], T.Bold)  # significant and held out
    cell = shown.iloc[1]["SLIM-extended"]
    assert cell.endswith(" †") and not isinstance(cell, T.Bold)
    assert not isinstance(shown.iloc[1]["SLIM"], T.Bold)  # the second-lowest is never promoted to bold
    assert any(
        n.startswith("† combined / SLIM-extended: not held out (tuned on it)") for n in shown.attrs["notes"]
    )


def test_high_mape_note():
    assert T.high_mape_note({"a": 50.0, "b": np.nan}) is None
    note = T.high_mape_note({"model-transfer / IMAI": 8810.1, "ok": 12.0})
    assert "8810%" in note and "ok" not in note


def test_save_table_csv_keeps_machine_names_md_tex_are_paper_ready(tmp_path):
    df = pd.DataFrame({"model": ["opt-1.3b"], "throughput_tok_s": [14490.12345], "decode_share": [0.9473]})
    paths = save_table(df, "t", tmp_path, notes=["a note"])
    csv, md, tex = (p.read_text() for p in paths)
    assert csv.splitlines()[0] == "model,throughput_tok_s,decode_share"
    pd.testing.assert_frame_equal(pd.read_csv(paths[0]), df)  # full precision
    assert md.splitlines()[0] == "| Model | Throughput (tok/s) | Decode share (%) |"
    assert "| opt-1.3b | 14490 | 94.7 |" in md and "Note: a note" in md
    assert r"Throughput (tok/s) & Decode share (\%)" in tex and "e+" not in tex
    first = [p.read_bytes() for p in paths]
    save_table(df, "t", tmp_path, notes=["a note"])
    assert [p.read_bytes() for p in paths] == first


def test_parameter_display_units_and_bounds():
    params = pd.DataFrame({"method": ["SLIM", "SLIM"], "scenario": ["s", "s"], "fold": ["f", "f"],
                           "parameter": ["gamma", "eta_c"], "unit": ["s/token", "-"], "estimate": [1.67e-7, 1.0],
                           "stderr": [5.7e-8, 1.28], "ci_lo": [5.5e-8, np.nan], "ci_hi": [2.8e-7, np.nan],
                           "at_bound": [False, True]})  # fmt: skip
    out = T.parameter_display(params)
    assert out.loc[0, "Unit"] == "µs/token" and out.loc[0, "Estimate"] == "0.167"
    assert out.loc[0, "95% CI"] == "[0.055, 0.280]"  # fixed decimals, not significant figures
    assert out.loc[1, "Std. error"] == "n/a (at bound)" and out.loc[1, "95% CI"] == "n/a (at bound)"
    gamma = T.parameter_display(params.assign(unit=["s/(layer (D/1024)^2 token)", "-"]))  # the unit of Eq. 10
    assert gamma.loc[0, "Unit"] == "ns/(layer (D/1024)^2 token)" and gamma.loc[0, "Estimate"] == "167.000"


def test_p_values_never_print_as_zero_and_headers_carry_units_in_words():
    df = pd.DataFrame({"p_wilcoxon": [0.0000123, 0.0412, np.nan], "time_us": [1.5, 2.25, 3.0],
                       "weight_gib": [12.6, 3.0, 1.0], "gpu": ["h100_sxm", "H100-SXM", "b200_sxm"]})  # fmt: skip
    text, _ = T.format_table(df, {"p_wilcoxon": T.Col(header="p (Wilcoxon)", decimals=3)})
    assert list(text.columns) == ["p (Wilcoxon)", "Kernel time (µs)", "Weight (GiB)", "GPU"]
    assert list(text["p (Wilcoxon)"]) == ["<0.001", "0.041", "n/a (no data)"]
    assert list(text["GPU"]) == ["h100-sxm-80gb", "h100-sxm-80gb", "b200-sxm-180gb"]  # one spelling per GPU
    assert T.human_header("kv_needed_gib") == "KV needed (GiB)" and T.human_header("step_us") == "Step (µs)"


def test_long_na_reasons_go_to_a_note_and_nonphysical_cells_are_marked_never_best():
    rows = []
    for m, v, bad in (("SLIM", 20.0, 0), ("IMAI OOD-LR", 5.0, 3), ("LLMVisor-Agg", np.nan, 0)):
        rows.append({"scenario": "context-transfer", "method": m, "metric": "latency", "n_train": 10,
                     "n_test": 9, "mape_pct": v, "ci_lo_pct": v - 1, "ci_hi_pct": v + 1,
                     "p_wilcoxon": 0.5, "n_nonphysical": bad})  # fmt: skip
    long = pd.DataFrame(rows)
    reason = "not fitted: LLMVisor-Agg needs TTFT and ITL, which this benchmark does not report at all"
    shown = T.paper_table2(
        long, "latency", reference="SLIM", na_reasons={"context-transfer / LLMVisor-Agg": reason}
    )
    row = shown.iloc[0]
    assert row["Scenario"] == "context transfer IL = OL (LLM-Inference-Bench, MI300X/MI250)"
    assert row["LLMVisor-Agg"] == "n/a (note 1)" and shown.attrs["notes"][0] == f"n/a (note 1): {reason}"
    assert row["IMAI OOD-LR"].endswith("(3 <= 0)") and not isinstance(row["IMAI OOD-LR"], T.Bold)
    assert isinstance(row["SLIM (faithful)" if "SLIM (faithful)" in row else "SLIM"], T.Bold)
    assert "3 of 9" in shown.attrs["notes"][1] and "counted as failures" in shown.attrs["notes"][1]


def test_parameter_display_flags_unstable_fits_and_keeps_intervals_inside_bounds():
    params = pd.DataFrame({"method": ["SLIM"] * 2, "scenario": ["s"] * 2, "fold": ["f"] * 2,
                           "parameter": ["alpha", "B0"], "unit": ["-", "-"], "estimate": [0.05, 38.2],
                           "stderr": [0.04, 5.0], "ci_lo": [-0.028, 28.4], "ci_hi": [0.128, 48.0],
                           "at_bound": [False, False], "unstable": [True, False], "lower": [0.0, 0.0],
                           "upper": [1.0, 1e4]})  # fmt: skip
    out = T.parameter_display(params)
    assert list(out["Unstable"]) == ["yes", "no"]
    assert out.loc[0, "95% CI"] == "[0.000, 0.128]"  # not below alpha's physical bound 0
    assert out.loc[1, "95% CI"] == "[28.400, 48.000]" and out.loc[1, "Estimate"] == "38.200"
    assert "Unstable" not in T.parameter_display(params.drop(columns=["unstable"])).columns
