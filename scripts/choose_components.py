"""Which component of the recommended model (`slimlib.model.extended`) to keep, decided on TRAINING rows only.

Fits the model and one alternative per component on the training table of every fold of every scenario (Table II
and the LLM-Inference-Bench transfer scenarios) and prints the training throughput MAPE (%) per scenario:

* dense decode: ``alpha OL`` (kept) against ``OL F_tok / (eta_d F_max)`` (FLOPs at a fitted efficiency) and both;
* decode attention width: the kernel-regime rule (kept) against ``D_kv`` always;
* KV capacity: ``kappa = 1`` for static batches (kept) against the continuous-batching 0.5 everywhere.

Run: python scripts/choose_components.py   (about 40 s; no validation row is read)
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from slimlib.experiments.accuracy.scenarios import build_scenarios
from slimlib.experiments.transfer_study.transfer_eval import transfer_scenarios
from slimlib.model import equations as eq
from slimlib.model import extended as ext
from slimlib.model.params import ParamSpec

ETA_D = ParamSpec("eta_d", 1e-4, 1.0, 0.1, 0.1, "-", "dense decode GEMM efficiency (FLOPs / peak)")


def dense_flops(f: dict) -> np.ndarray:
    """Per-token, per-rank GEMM FLOPs of one decode step: ``2 L (2 D^2 + 2 D D_kv + m D D_ff)``."""
    d = f["hidden_size"]
    return 2.0 * f["n_layers"] * (2.0 * d**2 + 2.0 * d * f["d_kv"] + f["n_ffn_matrices"] * d * f["ffn_size"])


class _Alt(ext.ExtendedSlimModel):
    """The kept model with one component swapped: `dense` in {alpha, flops, both}, `attn_rule`, `static`."""

    dense, attn_rule, static = "alpha", True, True

    def param_specs(self) -> tuple[ParamSpec, ...]:
        specs = [s for s in super().param_specs() if not (self.dense == "flops" and s.name == "alpha")]
        return tuple(specs + ([ETA_D] if self.dense != "alpha" else []))

    def effective_batch(self, df, feats, hw):  # type: ignore[no-untyped-def]
        return super().effective_batch(df if self.static else df.drop(columns=["static_batch"]), feats, hw)

    def _components(self, p, f, hw):  # type: ignore[no-untyped-def]
        b, il, ol = f["batch_size"], f["input_len"], f["output_len"]
        pre = eq.prefill_time(eq.prefill_flops(b, il, f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"],
                                               f["n_ffn_matrices"]), hw.peak_flops, p["eta_c"])  # fmt: skip
        width = ext.attention_width(f) if self.attn_rule else f["d_kv"]
        attn = eq.decode_kv_bytes(f["n_layers"], width, f["kv_bytes"], eq.kv_scan_tokens(il, ol))
        dense = ol * p.get("alpha", 0.0)
        flops = ol * dense_flops(f) / (p["eta_d"] * hw.peak_flops) if self.dense != "alpha" else 0.0
        per_step = ext.step_weight_bytes(f) / (p["eta_w"] * hw.mem_bw) + p["t_step"]
        dec = ol * per_step + eq.decode_time(b, dense, attn, hw.mem_bw, p["eta_m"], 0.0) + b * flops
        step_ar, pre_ar = ext.allreduce_times(f, hw)
        return (
            pre + pre_ar,
            dec + ol * step_ar,
            eq.e2e_latency(pre + pre_ar, dec + ol * step_ar, p["t_fixed"]),
        )


def variant(name: str, **kw: object) -> type[_Alt]:
    return type(name, (_Alt,), kw)


CANDIDATES = {
    "kept": variant("Kept"),
    "dense=flops": variant("Flops", dense="flops"),
    "dense=both": variant("Both", dense="both"),
    "attention=D_kv": variant("NoRule", attn_rule=False),
    "kappa=0.5 always": variant("NoStatic", static=False),
}


def main() -> int:
    warnings.simplefilter("ignore")
    rows = []
    for s in [s for s in build_scenarios() if s.available] + transfer_scenarios():
        for name, cls in CANDIDATES.items():
            ape = []
            for fold in s.folds:
                y = fold.train["throughput_tok_s"].to_numpy(dtype=float)
                pred = cls().fit(fold.train).predict(fold.train)["pred_throughput_tok_s"].to_numpy()
                ape.append(np.abs(pred / y - 1.0))
            rows.append(
                {"scenario": s.name, "candidate": name, "train_mape_pct": 100 * np.concatenate(ape).mean()}
            )
    table = pd.DataFrame(rows).pivot(index="scenario", columns="candidate", values="train_mape_pct")
    print("training throughput MAPE (%), per scenario (all folds' training rows):")
    print(table[list(CANDIDATES)].round(2).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
