"""LLM-Inference-Bench parser: the real results file (row and exclusion counts) and hand-made malformed files."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.data import load
from slimlib.data.llmib import RAW_COLUMNS, RESULTS, build_llmib_tables, mi250_evidence, parse_results
from slimlib.errors import DataError

LLMIB = RAW / "llm-inference-bench"
needs_mirror = needs(LLMIB, "LLM-Inference-Bench mirror")


@needs_mirror
def test_real_file_counts():
    runs, exc = parse_results(LLMIB / RESULTS)
    raw = pd.read_csv(LLMIB / RESULTS)
    assert len(runs) + len(exc) == len(raw) == 2646
    assert len(runs) == 1583
    assert exc["reason"].value_counts().to_dict() == {
        "llama_cpp_per_sequence": 1016, "duplicate_repeat": 34, "above_larger_batch": 13,
    }  # fmt: skip
    # the runs slower than a larger batch of their configuration: a sweep's first batch (B = 1), 22-126% slower
    slow = exc[exc["reason"] == "above_larger_batch"]
    assert (slow["batch_size"] == 1).all()
    excess = slow["detail"].str.extract(r"latency \+([0-9.]+)%")[0].astype(float)
    assert excess.between(22, 126).all(), excess.tolist()
    assert set(runs["source_line"]).isdisjoint(exc["source_line"])
    amd = runs[runs["gpu_in_registry"]]
    assert amd.groupby("gpu").size().to_dict() == {"mi250-gcd": 359, "mi300x": 707}
    # MI250 rows: tensor parallel over dies = 2 x cards
    mi250 = amd[amd["gpu"] == "mi250-gcd"]
    assert (mi250["tensor_parallel"] == 2 * mi250["n_hardware"]).all()
    assert sorted(mi250["tensor_parallel"].unique()) == [2, 4, 8]
    assert set(amd["model"]) == {
        "llama-2-7b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "mistral-7b", "mixtral-8x7b", "qwen2-7b",
        "qwen2-72b",
    }  # fmt: skip
    # Throughput is B (IL + OL) / Latency on every kept row
    calc = runs["batch_size"] * (runs["input_len"] + runs["output_len"]) / runs["e2e_s"]
    assert ((runs["throughput_tok_s"] / calc - 1).abs() < 1e-9).all()


@needs_mirror
def test_committed_tables_match_a_rebuild():
    tables, files = build_llmib_tables(LLMIB)
    assert [f.name for f in files][0] == "All_results.csv"
    committed = load("llmib-runs")
    assert len(committed) == len(tables["llmib-runs"])
    assert list(committed["source_line"]) == list(tables["llmib-runs"]["source_line"])
    assert len(load("llmib-exclusions")) == len(tables["llmib-exclusions"])


def test_mi250_is_a_card_of_two_dies():
    ev = mi250_evidence()
    assert not ev["fits_dies"].any() and ev["fits_cards"].all()


def _write(tmp_path: Path, rows: list[list]) -> Path:
    p = tmp_path / "All_results.csv"
    pd.DataFrame(rows, columns=list(RAW_COLUMNS)).to_csv(p, index=False)
    return p


def test_exclusion_reasons_on_a_hand_made_file(tmp_path):
    m7, hw = "meta-llama/Llama-2-7b-hf", "AMD MI300X GPU"
    rows = [
        [hw, 1, "vLLM", m7, 128, 16, 2.0, 16 * 256 / 2.0],  # kept
        [hw, 1, "vLLM", m7, 128, 16, 2.1, 16 * 256 / 2.1],  # repeat of the first
        [hw, 1, "llama.cpp", m7, 128, 16, 2.0, 256 / 2.0],  # per-sequence throughput
        [hw, 1, "vLLM", m7, 4096, 1, 100.0, 8192 / 100.0],  # 8192 tokens > 4096 context
        [hw, 1, "vLLM", m7, 256, 1, 4.0, 999.0],  # throughput inconsistent with latency
        [hw, 1, "vLLM", m7, 256, 16, 0.1, 16 * 512 / 0.1],  # faster than reading the weights 256 times
        [hw, 1, "vLLM", m7, 128, 1, 2.3, 256 / 2.3],  # 15% slower than the batch of 16 above: excluded
        [hw, 1, "vLLM", m7, 128, 4, 2.15, 4 * 256 / 2.15],  # 7.5% slower: within the tolerance, kept
    ]
    runs, exc = parse_results(_write(tmp_path, rows))
    assert sorted(runs["source_line"]) == [2, 9]
    assert int(runs.loc[runs["source_line"] == 2, "n_repeats"].iloc[0]) == 2
    assert list(exc["reason"]) == [
        "duplicate_repeat", "llama_cpp_per_sequence", "exceeds_context", "throughput_mismatch", "below_roofline",
        "above_larger_batch",
    ]  # fmt: skip
    assert exc["detail"].iloc[-1] == "latency +15.0% vs batch 16 of the same configuration"
    assert "repeat of line 2" in exc["detail"].iloc[0] and "+5.00%" in exc["detail"].iloc[0]


def test_bad_files_raise_data_errors(tmp_path):
    with pytest.raises(DataError, match="not found"):
        parse_results(tmp_path / "missing.csv")
    p = tmp_path / "x.csv"
    p.write_text("Hardware,Latency\nAMD MI300X GPU,1\n")
    with pytest.raises(DataError, match="missing column"):
        parse_results(p)
    bad = _write(tmp_path, [["AMD MI300X GPU", 1, "vLLM", "Qwen/Qwen2-7B", "abc", 1, 1.0, 1.0]])
    with pytest.raises(DataError, match="line 2: field 'input_len'"):
        parse_results(bad)
    bad = _write(tmp_path, [["Cerebras", 1, "vLLM", "Qwen/Qwen2-7B", 128, 1, 1.0, 1.0]])
    with pytest.raises(DataError, match="unknown Hardware"):
        parse_results(bad)
