"""Where the plateau goes for the hybrid models of 2026 (an extension, not in the paper; notebook 09).

The recommended model, calibrated on one GPU's kernel-composed curves of dense and MoE models (measured vLLM kernels,
`slimlib.experiments.accuracy.composed_curves`: bf16 and fp8, one to eight GPUs, static batches, contexts up to 2.5k
tokens), predicts a static batch's decode throughput (B / decode step) and decode step against the batch at long
contexts for a hybrid or sparse-attention model beside a full-attention model of its family and size: Qwen3.5
(Gated DeltaNet) against Qwen3, Nemotron 3 Nano (Mamba-2) against Qwen3-30B-A3B, DeepSeek-V3.2 (sparse attention)
against DeepSeek-V3 on eight GPUs at fp8. Their layers are priced by the same terms (the state traffic and the
sparse decode checked against vLLM's measured kernels above); nothing of these models is measured here, and the
contexts are beyond the calibration's, so the curves are the model's extrapolation, labelled so.

Per (model, context): the most sequences the KV pool holds (vLLM's block accounting, hybrid pages included), the
knee (the first batch whose doubling adds less than `KNEE_GAIN` to the decode throughput, or the memory cap where
that comes first, or the largest batch computed where neither comes within `BATCHES`) and the share of the decode step that the context causes (``1 - step(IL = 1) / step(IL = context)``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from slimlib.experiments.accuracy.composed_curves import composed_curves_of
from slimlib.model import make_model
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture

__all__ = ["PAIRS", "CONTEXTS", "calibrate", "memory_cap", "plateau_curves", "knees", "plot_pairs"]

#: (full-attention model, its hybrid or sparse-attention counterpart of the same family and size, GPUs of one
#: server (tensor parallel), weight precision)
PAIRS = (
    ("qwen3-32b", "qwen3.5-27b", 1, ""),
    ("qwen3-30b-a3b", "qwen3.5-35b-a3b", 1, ""),
    ("qwen3-30b-a3b", "nemotron-3-nano-30b-a3b", 1, ""),
    ("deepseek-v3", "deepseek-v3.2", 8, "fp8"),
)
CONTEXTS = (1024, 8192, 32768)
OUTPUT_LEN = 128
BATCHES = tuple(2**i for i in range(11))  # 1 ... 1024
#: a doubling of the batch that adds less than this to the throughput is past the knee
KNEE_GAIN = 0.10
GPU = "h200-sxm"


def calibrate(gpu: str = GPU):
    """The recommended model fitted on `gpu`'s kernel-composed curves (dense and MoE models, bf16 and fp8, one to
    eight GPUs), and the number of rows it was fitted on."""
    rows = composed_curves_of(gpu)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # identifiability notes of a fit on noise-free composed curves
        model = make_model("slim", gpu=gpu).fit(rows.reset_index(drop=True))
    return model, len(rows)


def memory_cap(
    model_name: str, gpu: str, context: float, tensor_parallel: int = 1, quantization: str = ""
) -> int:
    """Sequences of `context` tokens the KV pool of a server of `tensor_parallel` `gpu`s holds (vLLM's default
    serving configuration at that weight precision)."""
    s = serving_config(get_architecture(model_name), gpu, tensor_parallel=tensor_parallel,
                       quantization=quantization or None)  # fmt: skip
    return int(s.max_sequences(context))


def plateau_curves(
    model, pairs=PAIRS, contexts=CONTEXTS, batches=BATCHES, output_len: int = OUTPUT_LEN, gpu: str = GPU
) -> pd.DataFrame:
    """Per model, context and batch of `batches` within the memory cap, and at the cap: the predicted decode step (ms), decode throughput (B /
    step, tok/s), Eq. 6's throughput and the decode share the context causes."""
    setups = list(dict.fromkeys((m, tp, q) for *models, tp, q in pairs for m in models))
    rows = []
    for name, tp, quant in setups:
        a = get_architecture(name)
        kind = "hybrid" if a.n_linear_layers else "sparse attention" if a.is_sparse else "full attention"
        for ctx in contexts:
            cap = memory_cap(name, gpu, ctx + output_len, tp, quant)
            for b in sorted({*(b for b in batches if b <= cap), *([cap] if 0 < cap <= max(batches) else [])}):
                rows.append({"model": name, "kind": kind, "tensor_parallel": tp, "quantization": quant,
                             "context": ctx, "batch_size": b, "memory_cap": cap})  # fmt: skip
    grid = pd.DataFrame(rows)
    # the decode step at batch B once every prompt is in: a static batch that steps whole prompts
    base = grid.assign(gpu=gpu, output_len=float(output_len), client="static", chunked_prefill=False)
    at = model.predict(base.assign(input_len=base["context"].astype(float)))
    free = model.predict(base.assign(input_len=1.0))
    out = grid.copy()
    out["throughput_tok_s"] = at["pred_throughput_tok_s"].to_numpy()
    out["decode_step_ms"] = 1e3 * at["pred_decode_s"].to_numpy() / output_len
    out["decode_tok_s"] = out["batch_size"] / (out["decode_step_ms"] / 1e3)
    out["context_share"] = 1.0 - free["pred_decode_s"].to_numpy() / at["pred_decode_s"].to_numpy()
    return out


def knees(curves: pd.DataFrame) -> pd.DataFrame:
    """Per model and context: the memory cap, the knee batch and why (``doubling gains < 10%``, ``memory``, or
    ``largest batch computed`` where the memory cap lies beyond `BATCHES`),
    and the decode throughput, decode step and context share there."""
    rows = []
    for (name, ctx), g in curves.groupby(["model", "context"], sort=False):
        g = g.sort_values("batch_size").reset_index(drop=True)
        t, b = g["decode_tok_s"].to_numpy(), g["batch_size"].to_numpy(float)
        gains = (t[1:] / t[:-1]) ** (1.0 / np.log2(b[1:] / b[:-1])) - 1.0  # per doubling
        flat = np.flatnonzero(gains < KNEE_GAIN)
        if len(flat):
            i, why = int(flat[0]), f"doubling gains < {KNEE_GAIN:.0%}"
        else:  # still rising where the curve ends: at the memory cap, or at the largest batch computed
            i = len(g) - 1
            why = "memory" if g["batch_size"].iloc[i] >= g["memory_cap"].iloc[i] else "largest batch computed"
        r = g.iloc[i]
        rows.append({"model": name, "kind": r["kind"], "tensor_parallel": int(r["tensor_parallel"]),
                     "quantization": r["quantization"], "context": ctx, "memory_cap": int(r["memory_cap"]),
                     "knee_batch": int(r["batch_size"]), "knee_reason": why,
                     "decode_tok_s": float(r["decode_tok_s"]), "decode_step_ms": float(r["decode_step_ms"]),
                     "context_share": float(r["context_share"]), "max_decode_tok_s": float(t.max())})  # fmt: skip
    return pd.DataFrame(rows)


def plot_pairs(axes, curves: pd.DataFrame, knee: pd.DataFrame, pairs=PAIRS, colors=None) -> None:
    """One panel per pair (row) and context (column): decode throughput against the batch, the knee marked (a
    star), each curve ending at its model's memory cap."""
    for r, (*pair, tp, quant) in enumerate(pairs):
        for c, ctx in enumerate(sorted(curves["context"].unique())):
            ax = axes[r][c]
            for j, name in enumerate(pair):
                g = curves[(curves["model"] == name) & (curves["context"] == ctx)]
                color = None if colors is None else colors[j]
                server = f" (TP{tp} {quant or 'bf16'})" if tp > 1 or quant else ""
                ax.plot(
                    g["batch_size"], g["decode_tok_s"], marker="o", ms=2.5, color=color, label=name + server
                )
                k = knee[(knee["model"] == name) & (knee["context"] == ctx)].iloc[0]
                ax.plot([k["knee_batch"]], [k["decode_tok_s"]], marker="*", ms=8, color=color, ls="none")
            ax.set_xscale("log", base=2)
            if r == 0:
                ax.set_title(f"{_k(ctx)}-token context", fontsize=7)
            if r == len(pairs) - 1:
                ax.set_xlabel("batch size B")
            if c == 0:
                ax.set_ylabel("decode tok/s (B / step)")
                ax.legend(fontsize=6, loc="upper left", frameon=False)


def _k(ctx: float) -> str:
    return f"{ctx / 1024:g}k" if ctx >= 1024 and math.isclose(ctx % 1024, 0) else f"{ctx:g}"
