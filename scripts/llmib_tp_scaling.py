"""How well tensor parallelism divides the per-sequence work on LLM-Inference-Bench's AMD runs.

Prints, per GPU, model and TP degree, the per-GPU rate at which a batch adds work (median over the lengths of
``2 P (IL + OL) / (dE2E/dB x TP)``, TFLOP/s; `slimlib.experiments.accuracy.tp_scaling`) and its ratio to the
smallest TP degree measured: what a model fitted at TP 1 cannot see. Then each curve's split of that time into a part
no TP degree divides and a 1/TP part (`tp_split`), set beside vLLM's measured host work per sequence and step that
the recommended model charges (`slimlib.model.terms.HOST_SEQUENCE_OVERHEAD`). Then the same loss on the kernels
alone: the share of TP 1's per-GPU efficiency one layer's linear layers keep at each TP degree in Vidur's A100/H100
timings.

Run: python scripts/llmib_tp_scaling.py [--min-batch 16]   (a second)
"""

from __future__ import annotations

import argparse

from slimlib.data import load
from slimlib.experiments.accuracy.scenarios import llmib_table
from slimlib.experiments.accuracy.tp_scaling import (
    MIN_BATCH,
    kernel_tp_efficiency,
    per_sequence_rates,
    tp_efficiency,
    tp_split,
)
from slimlib.model.terms.recommended import HOST_SEQUENCE_S


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--min-batch", type=int, default=MIN_BATCH, help=f"smallest batch of a slope (default {MIN_BATCH})"
    )
    args = ap.parse_args()
    rates = per_sequence_rates(llmib_table(), args.min_batch)
    print(f"{len(rates)} curves with a slope (batch >= {args.min_batch})\n")
    print(tp_efficiency(rates).round(2).to_string(index=False))
    split = tp_split(rates)
    print(
        "\nPer curve, the time one more sequence costs per decode step split into a + b / TP (ms; a: no TP degree "
        "divides it)\n"
    )
    print(split.round(3).to_string(index=False))
    short = split[split["input_len"] <= 256]
    print(
        f"\nAt IL = OL <= 256: a = {short['fixed_ms_per_step'].median():.3f} ms per sequence and step (median of "
        f"{len(short)} curves, range {short['fixed_ms_per_step'].min():.3f} to {short['fixed_ms_per_step'].max():.3f}); "
        f"vLLM's measured host work (Vidur, A100 host): {1e3 * HOST_SEQUENCE_S:.4f} ms"
    )
    k = kernel_tp_efficiency(load("vidur-mlp"))
    table = k.pivot_table(
        index=["gpu", "model", "num_tokens"], columns="tensor_parallel", values="efficiency_vs_tp1"
    )
    print("\nVidur, one layer's linear layers: t(TP 1) / (TP x t(TP)) by TP degree (columns)\n")
    print(table.round(2).to_string())


if __name__ == "__main__":
    main()
