"""One name per model: CSVs hold registry names, headers, legends and prose one label per registry name
(`slimlib.model.method_label`: `paper` -> "SLIM (paper)", `slim` -> "SLIM-extended"), and every comparison header
names its reference. Headers, legend labels, notes and captions are checked against an allow-list: any word naming a
model (SLIM in any case, the baselines, the peers) must begin one of the display labels (the registry's, the
cross-validation candidates' `candidate_label`, the peers' `PEER_LABELS`), so "Slim-v3", "Faithful SLIM" or a bare
"SLIM" fail. The notebooks' sources are scanned for the other spellings of a method."""

from __future__ import annotations

import csv
import json
import re

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from shared_paths import REPO

from slimlib.experiments.accuracy.evaluation_figures import eval_parity
from slimlib.experiments.accuracy.extrapolation_outputs import candidate_label, recommendation_note
from slimlib.experiments.outputs import table_format as T
from slimlib.experiments.outputs.captions import CAPTIONS, caption_facts, fill_facts
from slimlib.experiments.outputs.plotting import new_figure
from slimlib.experiments.transfer_study.peer_comparison import PEER_LABELS, plot_peers
from slimlib.model import METHODS, method_label

FIGURES = REPO / "figures"
LABELS = {m.label for m in METHODS.values()}
#: every display label a model may have: the registry's, a challenger's and the peers'
DISPLAY_LABELS = {*LABELS, candidate_label("slim+tp-comm"), *PEER_LABELS.values()}
#: words that begin like a model's name but name something else: the advisor (and its faithful variant), the
#: paper's text file, AIConfigurator's wheel
NOT_MODELS = {"SLIM-BCA", "faithful SLIM-BCA", "SLIM-paper.txt", "aiconfigurator-core"}
_ALLOWED = sorted(DISPLAY_LABELS | NOT_MODELS, key=len, reverse=True)  # longest first
#: a word naming a model, in any case; not in `code`, a path or a longer word (slimlib)
MODEL_WORD = re.compile(
    r"(?i)(?<![\w`/.-])(?:faithful\s+)?(?:slim|llmvisor|imai|genz|aiconfigurator)(?![a-z])"
)
#: what a long table's cells and CSVs hold: registry names (method, candidate and peer names)
REGISTRY_NAMES = {*METHODS, "slim+tp-comm", *PEER_LABELS}
#: spellings that name a method other than by its label (the paper's model and its ablations above all)
OTHER_SPELLINGS = [
    (re.compile(r"(?i)faithful SLIM(?!-BCA)"), "'faithful SLIM': write SLIM (paper)"),
    (re.compile(r"(?i)(?<![`\w-])slim-v\d"), "a term-set candidate: write its label (candidate_label)"),
    (re.compile(r"SLIM \((?:faithful|paper form)\)"), "write SLIM (paper)"),
    (re.compile(r"\bSLIM no-"), "an ablation: write SLIM (paper) no-..."),
    (
        re.compile(r"\bDiff(?:erence)? vs SLIM(?! \(paper\)|-extended|-roofline|-BCA)"),
        "name the reference by label",
    ),
    (re.compile(r"\bDiff vs "), "write 'Difference vs <label>'"),
    (re.compile(r"^SLIM$"), "a bare 'SLIM' cell: which model? write its label"),
]


def spelling_problems(text: str, where: str) -> list[str]:
    """Every other spelling of a method in `text` (table cells are checked one by one)."""
    problems = []
    for line in text.splitlines():
        pieces = [c.strip() for c in line.strip("|").split("|")] if line.startswith("|") else [line]
        for piece in pieces:
            for pattern, why in OTHER_SPELLINGS:
                m = pattern.search(piece)
                if m:
                    problems.append(f"{where}: {m.group(0)!r} in {piece[:80]!r} ({why})")
    return problems


def unlabelled_models(text: str, where: str) -> list[str]:
    """Every model `text` names by anything but a display label (the allow-list): each word of `MODEL_WORD` must
    begin one of `_ALLOWED`, case and all, and end where that label ends."""
    found = []
    for m in MODEL_WORD.finditer(text):
        rest = text[m.start() :]
        if not any(
            rest.startswith(a) and not re.match(r"[\w-]", rest[len(a) : len(a) + 1]) for a in _ALLOWED
        ):
            found.append(f"{where}: {rest[:50]!r} is not a display label")
    return found


def markdown_problems(text: str, where: str) -> list[str]:
    """`unlabelled_models` of a generated Markdown table: its header rows, its notes and every cell but those that
    are a registry name (long tables hold them, as CSVs do)."""
    kept = []
    for line in text.splitlines():
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            kept.append(" | ".join(c for c in cells if c not in REGISTRY_NAMES))
        else:
            kept.append(line)
    return unlabelled_models("\n".join(kept), where)


def output_problems(folder) -> list[str]:
    """Every other spelling of a model in the outputs in `folder`: Markdown tables (deny-list and allow-list), CSV
    headers (both), CSV method columns (registry names only) and CAPTIONS.md (allow-list)."""
    found = []
    for p in sorted(folder.glob("*.md")):
        text = p.read_text(encoding="utf-8")
        found += (
            unlabelled_models(text, p.name) if p.name == "CAPTIONS.md" else markdown_problems(text, p.name)
        )
        found += spelling_problems(text, p.name)
    for p in sorted(folder.glob("*.csv")):
        with p.open(encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
        found += spelling_problems("\n".join(rows[0]), p.name + " header")
        found += unlabelled_models(" | ".join(rows[0]), p.name + " header")
        if "method" in rows[0]:
            i = rows[0].index("method")
            found += [f"{p.name}: method {r[i]!r} is a label; CSVs hold registry names"
                      for r in rows[1:] if r[i] in LABELS or r[i] == "SLIM"]  # fmt: skip
    return found


def _notebook_text(path) -> str:
    return "\n".join("".join(c["source"]) for c in json.loads(path.read_text(encoding="utf-8"))["cells"])


def test_each_registry_name_has_one_label_and_the_paper_model_is_not_plain_slim():
    labels = [m.label for m in METHODS.values()]
    assert len(set(labels)) == len(labels)
    assert method_label("paper") == "SLIM (paper)" and method_label("slim") == "SLIM-extended"
    assert all(
        lab.startswith("SLIM (paper) ") for n, lab in ((n, method_label(n)) for n in METHODS) if "no-" in n
    )
    assert "SLIM" not in labels


def test_comparison_headers_name_their_reference():
    assert T.difference_header("paper") == "Difference vs SLIM (paper) (MAPE points)"
    assert T.human_header("diff_vs_slim_pct") == "Difference vs SLIM-extended (MAPE points)"


def test_the_scan_finds_other_spellings():
    text = "| Method | Diff vs SLIM (%) |\n| SLIM | 1 |\nagainst faithful SLIM; SLIM no-kv-scan; faithful SLIM-BCA"
    found = spelling_problems(text, "x")
    matched = sorted(f.split(": ", 1)[1].split("' in ")[0].strip("'") for f in found)
    assert matched == sorted(
        ["Diff vs SLIM", "Diff vs ", "SLIM", "faithful SLIM", "SLIM no-"]
    )  # not SLIM-BCA


@pytest.mark.parametrize(
    "text",
    [
        "| Axis | SLIM-extended | Slim-v3 |",  # a candidate by its capitalised registry name
        "| Axis | Slim-v3+step-roofline |",
        "Faithful SLIM throughput MAPE per scenario",
        "| Scenario | SLIM | LLMVisor-Agg |",  # a bare SLIM header
        "SLIM (calibrated on at most 3 points per curve) against peer estimators",
        "the kernel data against SLIM's fitted eta_m",
        "the recommended model (from the earlier SLIM-longctx)",
        "Note: Recommended by the worst-axis error: slim: best worst-axis throughput MAPE",
        "not drawn where <= 0: llmvisor-agg, imai-ood-lr",
        "genz",  # a legend entry by the tool's registry name
        "aiconfigurator",
    ],
)
def test_the_allow_list_refuses_every_other_spelling(text):
    assert markdown_problems(text, "x"), text


def test_the_allow_list_passes_the_display_labels_and_what_is_not_a_model():
    text = (
        "| Method | SLIM-extended | SLIM (paper) | SLIM (paper) no-kv-scan | SLIM-extended + tp comm | "
        "LLMVisor-Agg | IMAI OOD-LR | GenZ | AIConfigurator |\n"
        "| paper | slim | genz |\n"  # registry names as whole cells of a long table
        "Note: faithful SLIM-BCA against SLIM-BCA; `slim fit`, slimlib, SLIM-paper.txt, aiconfigurator-core 0.12."
    )
    assert markdown_problems(text, "x") == []
    assert candidate_label("slim+tp-comm") == "SLIM-extended + tp comm"
    assert candidate_label("paper") == "SLIM (paper)"


def test_captions_name_models_by_their_display_labels():
    facts = caption_facts()
    found = []
    for stem, c in CAPTIONS.items():
        found += unlabelled_models(f"{fill_facts(c.text, facts)}\n{fill_facts(c.source, facts)}", stem)
    assert found == []


def test_extrapolation_notes_name_candidates_by_label():
    rows = [
        {"axis": axis, "dataset": "d", "method": m, "n_failed_folds": 0, "mape_pct": v}
        for m, values in {
            "slim": [5.0, 9.0],
            "paper": [7.0, 70.9],
            "slim+tp-comm": [4.0, 44.3],
        }.items()
        for axis, v in zip(("batch", "tp"), values, strict=True)
    ]
    note = recommendation_note(pd.DataFrame(rows), "slim")
    assert (
        note.startswith("Recommended by the worst-axis error: SLIM-extended, ")
        and "SLIM (paper): 70.9%" in note
    )
    assert "SLIM-extended + tp comm: 44.3% (tp / d)" in note
    assert markdown_problems(note, "note") == [] and not re.search(r"(?<![\w(])paper\b", note)


def test_legends_use_the_display_labels():
    peers = pd.DataFrame(
        [{"dataset": "d", "method": m, "throughput_mape_pct": 10.0, "ci_lo_pct": 9.0, "ci_hi_pct": 11.0,
          "n_common": 5} for m in ("slim", "roofline", "genz", "llm-analysis", "aiconfigurator")]
    )  # fmt: skip
    fig, ax = new_figure()
    plot_peers(peers, ax)
    shown = [t.get_text() for t in ax.get_legend().get_texts()]
    assert shown == ["SLIM-extended", "Roofline", "GenZ", "llm-analysis", "AIConfigurator"]
    pred = pd.DataFrame(
        {"method": ["paper", "slim", "llmvisor-agg"], "scenario": "s", "throughput_tok_s": 100.0,
         "pred_throughput_tok_s": [90.0, 110.0, -1.0]}
    )  # fmt: skip
    fig = eval_parity(pred)
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [t.split(" (")[0] if "<= 0" in t else t for t in titles] == [
        "SLIM (paper)",
        "SLIM-extended",
        "LLMVisor-Agg",
    ]
    assert all(unlabelled_models(t, "legend") == [] for t in titles)
    plt.close("all")


@pytest.mark.parametrize("path", sorted((REPO / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebook_sources_spell_methods_by_label(path):
    assert spelling_problems(_notebook_text(path), path.name) == []


def test_captions_registry_spells_methods_by_label():
    found = [p for s, c in CAPTIONS.items() for p in spelling_problems(f"{c.text}\n{c.source}", s)]
    assert found == []


def test_generated_outputs_spell_methods_by_label_and_csvs_hold_registry_names():
    """Needs outputs regenerated by this slimlib (`slim reproduce`)."""
    assert output_problems(FIGURES) == []
