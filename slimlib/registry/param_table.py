"""The parameter-count table of a folder of published ``*_config.json`` files, against the sizes their names or
model cards state.

A name states a size as ``8B``, ``120b``, ``235B-A22B`` (total and active) or ``17B-16E`` (Llama 4: active, with 16
experts); `STATED` holds the model cards' own figures where a name's number is nominal or absent, with the source.
Active counts here include the token embedding, except where a card's convention leaves it out (`STATED` says so).
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pandas as pd

from slimlib.errors import DataError
from slimlib.registry.architectures import architecture_from_config

__all__ = ["STATED", "NOMINAL", "stated_size", "parameter_table"]

#: model (file name without ``_config.json``, org prefix dropped) -> (total, active or None, active excludes the
#: input embedding, source)
STATED: dict[str, tuple[float, float | None, bool, str]] = {
    "gpt-oss-120b": (
        116.83e9,
        5.13e9,
        True,
        "OpenAI gpt-oss model card, Table 1 (active: no input embedding)",
    ),
    "gpt-oss-20b": (20.91e9, 3.61e9, True, "OpenAI gpt-oss model card, Table 1 (active: no input embedding)"),
    "Qwen3-30B-A3B": (30.5e9, 3.3e9, False, "Qwen3-30B-A3B model card: 30.5B in total, 3.3B activated"),
    "Qwen3-30B-A3B-FP8": (30.5e9, 3.3e9, False, "Qwen3-30B-A3B model card: 30.5B in total, 3.3B activated"),
    # the Qwen3-VL names count the vision tower, which SLIM does not read: its language model is compared with
    # the Qwen3 text model of the same shapes
    "Qwen3-VL-30B-A3B-Instruct": (30.5e9, 3.3e9, False, "language model = Qwen3-30B-A3B's shapes; its card"),
    "Qwen3-VL-2B-Instruct": (
        1.7e9,
        None,
        False,
        "language model = Qwen3-1.7B's shapes; Qwen3-1.7B card: 1.7B",
    ),
    "Mixtral-8x7B-v0.1": (
        46.7e9,
        12.9e9,
        False,
        "Mistral AI, 'Mixtral of experts' (2023): 46.7B total, 12.9B/token",
    ),
    "Mixtral-8x22B-v0.1": (
        141e9,
        39e9,
        False,
        "Mistral AI, 'Cheaper, Better, Faster, Stronger' (2024): 39B of 141B",
    ),
    "Llama-4-Scout-17B-16E-Instruct": (109e9, 17e9, False, "Meta Llama 4 model card: 17B active, 109B total"),
    "Llama-4-Maverick-17B-128E-Instruct": (
        400e9,
        17e9,
        False,
        "Meta Llama 4 model card: 17B active, 400B total",
    ),
    "DeepSeek-V3": (671e9, 37e9, False, "DeepSeek-V3 model card: 671B total, 37B activated per token"),
    "DeepSeek-R1": (671e9, 37e9, False, "DeepSeek-R1 model card: 671B total, 37B activated"),
    "DeepSeek-V3.1-NVFP4": (671e9, 37e9, False, "DeepSeek-V3.1 model card: 671B total, 37B activated"),
    "Kimi-K2-Instruct": (1e12, 32e9, False, "Kimi K2 model card: 1 trillion total, 32 billion activated"),
    "Kimi-K2.5": (1e12, 32e9, False, "Kimi K2.5 model card: 1T total, 32B activated"),
    "MiniMax-M2.5": (230e9, None, False, "MiniMax-M2 model card: 230B total (M2.5 has M2's shapes)"),
    "DeepSeek-V3.2": (
        671e9,
        None,
        False,
        "DeepSeek-V3.2 model card: 685B with the 14B multi-token-prediction module "
        "(DeepSeek-V3's split: 671B + 14B)",
    ),  # fmt: skip
    "DeepSeek-V4-Flash": (
        284e9,
        13e9,
        True,
        "DeepSeek-V4 model card: 284B total, 13B activated (active: no input embedding)",
    ),
    "DeepSeek-V4-Pro": (
        1.6e12,
        49e9,
        True,
        "DeepSeek-V4 model card: 1.6T total, 49B activated (active: no input embedding)",
    ),
    # MiniMax's card: ~428B total, ~23B activated (vision tower and the MTP module counted in the total; the active
    # ~23B agrees with the language model's count without the input embedding and the LM head, 23.5B, which the
    # active check here cannot express: only the total is compared)
    **{
        m: (
            428e9,
            None,
            False,
            "MiniMax-M3 model card (huggingface.co/MiniMaxAI/MiniMax-M3): ~428B total, ~23B "
            "activated" + ("; NVIDIA's NVFP4 checkpoint has M3's shapes" if "NVFP4" in m else ""),
        )
        for m in ("MiniMax-M3", "MiniMax-M3-NVFP4")
    },  # fmt: skip
    "GLM-5": (
        744e9,
        40e9,
        True,
        "GLM-5 technical report (arXiv:2602.15763), Table 1: 744B total, 40B activated "
        "(active: no input embedding)",
    ),  # fmt: skip
    **{
        m: (
            744e9,
            40e9,
            True,
            "GLM-5's shapes (5.2 and 5.3: 57 of its 78 indexers shared); GLM-5 technical report, "
            "Table 1: 744B total, 40B activated (active: no input embedding)",
        )
        for m in ("GLM-5.1", "GLM-5.2", "GLM-5.3")
    },  # fmt: skip
    # the Qwen3.5 / Qwen3.6 cards count the vision encoder in the total, which SLIM does not read (0.4-0.6B)
    "Qwen3.5-35B-A3B": (
        35e9,
        3e9,
        True,
        "Qwen3.5-35B-A3B model card: 35B in total, 3B activated (active: no input embedding)",
    ),  # fmt: skip
    "Qwen3.6-35B-A3B": (
        35e9,
        3e9,
        True,
        "Qwen3.6-35B-A3B model card: 35B in total, 3B activated (active: no input embedding)",
    ),  # fmt: skip
    # NVIDIA counts Nemotron 3's active parameters without the input embedding (Nano: 3.2B, 3.6B with it)
    **{
        m: (
            31.6e9,
            3.2e9,
            True,
            "Nemotron 3 Nano model card: 31.6B total, 3.2B active (3.6B with embeddings)"
            + ("; Lightning has Nano's shapes" if "Lightning" in m else ""),
        )
        for m in ("NVIDIA-Nemotron-3-Nano-30B-A3B", "NVIDIA-Nemotron-3.5-Lightning-30B-A3B")
    },  # fmt: skip
    # the Gemma 4 card counts the language model (its vision encoder is about 0.55B beside it)
    **{
        m: (25.2e9, 3.8e9, False, "Gemma 4 model card: 26B A4B has 25.2B parameters in total, 3.8B active")
        for m in ("gemma-4-26B-A4B", "Gemma-4-26B-A4B")
    },  # fmt: skip
    "MiMo-V2-Flash": (
        309e9,
        None,
        False,
        "Xiaomi MiMo-V2-Flash model card: 309B total (its 15B active does not say whether the embedding counts: "
        "15.4B with it, 14.8B without)",
    ),  # fmt: skip
    "NVIDIA-Nemotron-3-Super-120B-A12B": (
        120e9,
        12e9,
        True,
        "the name: 120B total, 12B active (active: no input embedding, as the Nano card counts it)",
    ),  # fmt: skip
    "NVIDIA-Nemotron-3-Ultra-550B-A55B": (
        550e9,
        55e9,
        True,
        "the name: 550B total, 55B active (active: no input embedding, as the Nano card counts it)",
    ),  # fmt: skip
}

#: models whose name's size is nominal and off by more than 3%, with no stated size we can cite: read, not checked
NOMINAL: dict[str, str] = {
    "MiMo-7B-Base": "the name's 7B is nominal (7.62B counted without the MTP layer); no card figure cited here",
}

_SIZE = r"(\d+(?:\.\d+)?)[bB]"


def stated_size(model: str) -> tuple[float | None, float | None, bool, str]:
    """(total, active, active excludes the input embedding, source) that `STATED` or the name states; Nones
    where neither states one (``8x7B`` states no total)."""
    if model in STATED:
        return STATED[model]
    if model in NOMINAL:
        return None, None, False, NOMINAL[model]
    base = re.sub(r"-(NVFP4|FP8.*|BF16|Instruct|Thinking|Base|IT)$", "", model)
    if base in STATED:
        return STATED[base]
    total = active = None
    parts = model.split("-")
    for i, part in enumerate(parts):
        if m := re.fullmatch(_SIZE, part):
            if i + 1 < len(parts) and re.fullmatch(r"\d+E", parts[i + 1]):
                active = float(m.group(1)) * 1e9  # Llama 4: 17B active, 16 experts
            else:
                total = float(m.group(1)) * 1e9
        elif m := re.fullmatch(r"A" + _SIZE, part):
            active = float(m.group(1)) * 1e9
    return total, active, False, "the name" if total or active else ""


def parameter_table(folder: str | Path) -> pd.DataFrame:
    """One row per ``*_config.json`` in `folder` (not the ``*_hf_quant_config.json``): model, model_type, read or
    refused (with the one-line reason), total and active parameters, the stated sizes and the errors in percent."""
    rows = []
    for f in sorted(Path(folder).glob("*_config.json")):
        if f.name.endswith("_hf_quant_config.json"):
            continue
        model = f.name.removesuffix("_config.json").split("--")[-1]
        total, active, no_embed, source = stated_size(model)
        row: dict[str, object] = {"model": model, "model_type": _model_type(f)}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                a = architecture_from_config(f)
        except DataError as exc:
            row.update(status="refused", reason=str(exc).split(": ", 1)[-1])
        else:
            got_active = a.active_params - (a.vocab_size * a.hidden_size if no_embed else 0)
            row.update(status="read", reason="", total_b=a.n_params / 1e9, active_b=a.active_params / 1e9)
            row.update(quantization=a.quantization)
            if total:
                row.update(stated_total_b=total / 1e9, total_err_pct=100 * (a.n_params / total - 1))
            if active:
                row.update(stated_active_b=active / 1e9, active_err_pct=100 * (got_active / active - 1))
            row["stated_by"] = source
        rows.append(row)
    return pd.DataFrame(rows)


def _model_type(f: Path) -> str:
    data = json.loads(f.read_text(encoding="utf-8"))
    text = data.get("text_config") if isinstance(data.get("text_config"), dict) else {}
    return str(data.get("model_type") or text.get("model_type") or "")
