"""The "Differences from the paper" table (slimlib.experiments.outputs.paper_differences): every verdict and number
computed from the outputs' CSVs, a missing output listed as not testable, the README showing the generated file."""

from __future__ import annotations

import re
import shutil

import pandas as pd
import pytest
from shared_paths import REPO, SHARED, needs

from slimlib.errors import DataError
from slimlib.experiments.outputs import captions
from slimlib.experiments.outputs import paper_differences as D

FIGURES = REPO / "figures"


def _row(table: pd.DataFrame, item: str, words: str) -> pd.Series:
    sel = table[(table["item"] == item) & table["claim"].str.contains(words, regex=False)]
    assert len(sel) == 1, (item, words)
    return sel.iloc[0]


@pytest.fixture
def figures(tmp_path):
    """A copy of the committed outputs' CSVs (the tests edit them)."""
    out = tmp_path / "figures"
    out.mkdir()
    for p in FIGURES.glob("*.csv"):
        shutil.copy(p, out / p.name)
    return out


def test_every_claim_gets_a_verdict_and_names_its_outputs(figures):
    table = D.paper_differences(figures)
    assert len(table) == len(D.CLAIMS)
    assert set(table["verdict"]) <= set(D.VERDICTS)
    assert table["finding"].str.len().min() > 20
    assert _row(table, "Table II", "MAPE")["verdict"] == "not testable"  # the paper's text prints no MAPE


@needs(SHARED / "paper", "the paper's text")
def test_no_number_is_quoted_as_the_papers_unless_the_paper_prints_it(figures):
    paper = (SHARED / "paper" / "SLIM-paper.txt").read_text(encoding="utf-8")
    for claim in D.CLAIMS:
        for number in re.findall(r"\d+\.\d+|\d{2,}", claim.claim):
            assert number in paper, (claim.item, number)


def test_verdicts_follow_the_data(figures):
    knees = pd.read_csv(figures / "fig01_plateau_summary.csv")
    knees.assign(kv_full_batch=knees["knee_batch"] * 2).to_csv(
        figures / "fig01_plateau_summary.csv", index=False
    )
    table = D.paper_differences(figures)
    assert _row(table, "Fig. 1", "well before")["verdict"] == "agree"
    knees.assign(kv_full_batch=knees["knee_batch"]).to_csv(figures / "fig01_plateau_summary.csv", index=False)
    table = D.paper_differences(figures)
    assert _row(table, "Fig. 1", "well before")["verdict"] == "disagree"
    # analytic FLOPs over measured time are not the paper's counter readings: values given, not judged
    tflops = _row(table, "Table I / Fig. 6", "6 TFLOP/s")
    assert (
        tflops["verdict"] == "not comparable"
        and "TFLOP/s" in tflops["finding"]
        and "counter" in tflops["rule"]
    )
    assert _row(table, "Fig. 4", "Tensor Core")["verdict"] == "not comparable"


def test_the_plateau_holds_the_batch_sizes_above_the_knee(figures):
    k = pd.read_csv(figures / "fig02_knees.csv")
    k.assign(knee_batch=64.0).to_csv(figures / "fig02_knees.csv", index=False)
    row = _row(D.paper_differences(figures), "Fig. 2", "greater than 64")
    assert row["verdict"] == "agree" and "knee is at B >= 64" in row["finding"]  # the plateau starts above 64
    k.assign(knee_batch=32.0).to_csv(figures / "fig02_knees.csv", index=False)
    assert _row(D.paper_differences(figures), "Fig. 2", "greater than 64")["verdict"] == "disagree"


def test_the_attention_verdict_counts_the_measured_vllm_kernels_only(figures):
    aic = pd.read_csv(figures / "fig05_decode_breakdown_aic.csv")
    vidur = pd.read_csv(figures / "fig05_decode_breakdown.csv")
    vidur.assign(attention_share=0.0).to_csv(figures / "fig05_decode_breakdown.csv", index=False)
    aic.assign(attention_share=aic["ffn_gemm_share"] + 0.01).to_csv(figures / "fig05_decode_breakdown_aic.csv",
                                                                    index=False)  # fmt: skip
    row = _row(D.paper_differences(figures), "Fig. 5", "attention")
    assert row["verdict"] == "agree" and "not counted" in row["finding"]
    aic.assign(attention_share=0.0).to_csv(figures / "fig05_decode_breakdown_aic.csv", index=False)
    assert _row(D.paper_differences(figures), "Fig. 5", "attention")["verdict"] == "disagree"


def test_eq13_and_the_counter_figures(figures):
    rec = pd.read_csv(figures / "bca_recommendations.csv")
    fine = rec.assign(slo_violation=False, efficiency_below_epsilon=False)
    fine.to_csv(figures / "bca_recommendations.csv", index=False)
    assert _row(D.paper_differences(figures), "Eq. 13 (SLIM-BCA)", "B_cap")["verdict"] == "agree"
    fine.assign(slo_violation=True).to_csv(figures / "bca_recommendations.csv", index=False)
    assert _row(D.paper_differences(figures), "Eq. 13 (SLIM-BCA)", "B_cap")["verdict"] == "disagree"
    table = D.paper_differences(figures)
    if not (figures / "fig07_fig08_kit_attention_memory.csv").is_file():
        assert _row(table, "Fig. 7", "L1/TEX")["verdict"] == "not testable"
    mem = pd.DataFrame({"active_context": [1024, 8192], "l1_hit_pct": [0.5, 0.2], "l2_hit_pct": [6.0, 3.0],
                        "long_scoreboard_pct": [30.0, 55.0], "occupancy_pct": [12.0, 12.0]})  # fmt: skip
    mem.to_csv(figures / "fig07_fig08_kit_attention_memory.csv", index=False)
    table = D.paper_differences(figures)
    assert (
        _row(table, "Fig. 7", "L1/TEX")["verdict"] == "agree"
        and _row(table, "Fig. 8", "stalls")["verdict"] == "agree"
    )
    mem.assign(l2_hit_pct=9.0, occupancy_pct=25.0).to_csv(
        figures / "fig07_fig08_kit_attention_memory.csv", index=False
    )
    table = D.paper_differences(figures)
    assert (
        _row(table, "Fig. 7", "L1/TEX")["verdict"] == "disagree"
        and _row(table, "Fig. 8", "stalls")["verdict"] == "disagree"
    )


def test_every_claim_states_its_rule():
    assert all(len(c.rule) > 20 for c in D.CLAIMS)


def test_ablation_verdict_counts_significant_losses(figures):
    t = pd.read_csv(figures / "table02_mape.csv")
    abl = (t["method"] == "no-kv-scan") & (t["metric"] == "throughput")
    t.loc[abl, "p_wilcoxon"], t.loc[abl, "diff_vs_ref_pct"] = 0.001, 5.0
    t.to_csv(figures / "table02_mape.csv", index=False)
    row = _row(D.paper_differences(figures), "Eq. 11 (ablation)", "KV")
    n = int(abl.sum())
    assert (
        row["verdict"] == "agree"
        and f"significantly (Wilcoxon p < 0.05) in {n} of {n} scenarios" in row["finding"]
    )
    t.loc[abl, "p_wilcoxon"] = 0.2
    t.to_csv(figures / "table02_mape.csv", index=False)
    row = _row(D.paper_differences(figures), "Eq. 11 (ablation)", "KV")
    assert row["verdict"] == "disagree" and f"in 0 of {n} scenarios" in row["finding"]


def test_a_missing_output_is_not_testable_and_named_and_a_broken_one_refused(figures):
    (figures / "fig02_knees.csv").unlink()
    row = _row(D.paper_differences(figures), "Fig. 2", "greater than 64")
    assert (
        row["verdict"] == "not testable"
        and "fig02_knees" in row["finding"]
        and "02_active_context" in row["finding"]
    )
    pd.DataFrame({"x": [1]}).to_csv(figures / "fig01_plateau_summary.csv", index=False)
    with pytest.raises(DataError, match="fig01_plateau_summary.*01_plateau"):
        D.paper_differences(figures)


def test_writer_and_readme_sync(figures, tmp_path):
    csv_path, md_path, tex_path = D.write_paper_differences(figures)
    assert pd.read_csv(csv_path).columns.tolist() == [
        "item",
        "claim",
        "where",
        "finding",
        "verdict",
        "rule",
        "outputs",
    ]
    assert md_path.read_text().startswith("| Paper item | Paper's claim (section) |")
    readme, doc = tmp_path / "README.md", tmp_path / "paper.md"
    start, end = D.README_MARKERS
    i_start, i_end = captions.README_MARKERS
    readme.write_text(f"a\n{i_start}\nold\n{i_end}\nrest\n", encoding="utf-8")
    doc.write_text(f"intro\n{start}\nold\n{end}\nrest\n", encoding="utf-8")
    assert D.sync_readme(readme, figures) is True and D.sync_paper_doc(doc, figures) is True
    items = captions.readme_table(figures)
    assert readme.read_text() == f"a\n{i_start}\n{items}{i_end}\nrest\n"
    assert doc.read_text() == f"intro\n{start}\n{md_path.read_text()}{end}\nrest\n"
    assert D.sync_readme(readme, figures) is False and D.sync_paper_doc(doc, figures) is False
    readme.write_text("no markers\n")
    with pytest.raises(DataError, match="needs one <!-- paper_items:start --> line"):
        D.sync_readme(readme, figures)


def test_the_paper_doc_shows_the_generated_differences_table():
    doc = (REPO / "docs" / "paper.md").read_text(encoding="utf-8")
    start, end = D.README_MARKERS
    assert doc.count(start) == 1 and doc.count(end) == 1, "docs/paper.md lacks the paper_differences markers"
    generated = FIGURES / f"{D.OUTPUT_NAME}.md"
    if not generated.is_file():
        pytest.skip("figures/paper_differences.md not generated yet (notebook 12 writes it)")
    block = doc.split(start, 1)[1].split(end, 1)[0]
    assert block == "\n" + generated.read_text(encoding="utf-8"), (
        "docs/paper.md's differences table differs from figures/paper_differences.md: run "
        "`python -m slimlib.experiments.outputs.paper_differences`"
    )
