"""Every caption's GPUs and sources match its table (figures/): a caption names exactly the GPUs of its table,
Table II's captions name the data of every row, and the roofline outputs built on analytic bytes are proxies."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.experiments.outputs.captions import CAPTIONS, caption_text, fill_facts

FIGURES = Path(__file__).resolve().parents[1] / "figures"
GPU_WORD = re.compile(r"\b(H100|H200|B200|A100|MI300X|MI355X|MI250|CPU)\b")  # CPU: the host CPU engine


def _gpus_of_table(stem: str) -> set[str] | None:
    path = FIGURES / f"{stem}.csv"
    if not path.is_file():
        return None
    df = pd.read_csv(path)
    if "gpu" not in df.columns:
        return None
    found = set()
    for value in df["gpu"].astype(str):
        if value == "all":  # a row pooling the table's GPUs
            continue
        m = GPU_WORD.search(value.upper().replace("_", " ").replace("-", " "))
        assert m, f"{stem}.csv: GPU {value!r} is not one of {GPU_WORD.pattern}"
        found.add(m.group(1))
    return found


def _with_gpu_tables() -> list[str]:
    return [s for s in CAPTIONS if _gpus_of_table(s) is not None]


def test_some_captioned_tables_have_a_gpu_column():
    assert len(_with_gpu_tables()) >= 5


@pytest.mark.parametrize("stem", _with_gpu_tables())
def test_caption_names_exactly_the_gpus_of_its_table(stem):
    c = CAPTIONS[stem]
    named = set(GPU_WORD.findall(c.text + " " + c.source))
    assert named == _gpus_of_table(stem), stem


def test_table2_captions_name_every_row_source():
    for stem in ("table02_mape", "table02_mape_throughput", "table02_mape_latency"):
        src = CAPTIONS[stem].source
        assert "memgap-online.csv" in src and "memgap-offline.csv" in src and "llmib-runs.csv" in src, stem
    assert "context transfer IL = OL (LLM-Inference-Bench, MI300X/MI250)" in CAPTIONS["table02_mape"].text


def test_derived_kernel_quantities_are_proxies_with_the_built_in_intensity():
    for stem in ("fig06_attention_roofline_aic", "table01_attention_roofline_aic"):
        status = CAPTIONS[stem].status
        assert status.startswith("proxy") and "constant" in status and "counters" in status, stem
    # the crossover compares measured kernel times only: no analytic counts, so not that proxy
    assert "measured" in CAPTIONS["fig05_crossover_aic"].status
    assert "analytic" not in CAPTIONS["fig05_crossover_aic"].text


def test_characterization_captions_say_what_ran():
    assert "ShareGPT" in CAPTIONS["fig01_plateau"].text + CAPTIONS["fig01_plateau"].source
    for stem in ("fig01_plateau", "fig03_prefill_decode"):
        text = caption_text(stem)
        assert "3 of the 4 offline sweeps" in text and "Nsight Systems" in text, text
        assert "IL = 161, OL = 338" in text
    text = caption_text("fig02_saturation")  # the advisor runs' prompt lengths differ by tokenizer
    assert "IL = 250 tokens for llama-2-13b, llama-2-7b; 242 tokens for opt-1.3b, opt-2.7b" in text


def test_numbers_in_the_characterization_captions_are_computed_not_typed():
    for stem in ("fig01_plateau", "fig02_saturation", "fig03_prefill_decode"):
        raw = CAPTIONS[stem].text
        assert not re.search(r"\b(IL|OL) = \d", raw) and "<<" in raw, stem  # a placeholder, filled from data/
    with pytest.raises(DataError, match="<<nope>>"):
        fill_facts("x <<nope>> y", {})
    assert fill_facts("a <<x>> b", {"x": "IL = 1"}) == "a IL = 1 b"
    knee = CAPTIONS["transfer_mi300x_knee"].text
    assert "SLIM-extended" in knee and "B = 1" in knee and "flagged" in knee
