"""Where do fits on rows of several output lengths put the per-batch constant: in t_fixed or in t_step x OL?

Fits the recommended `slim` to every (model, device[, TP]) curve group of the public H100 (memgap-online) and
MI300X/MI250 (LLM-Inference-Bench) data with >= 2 output lengths and >= 8 rows, and prints t_fixed beside
t_step x OL (median OL). This is the evidence for `CalibratedModel._layer_hold`: on rows of one output length, where
the two are one constant, it is given to t_step. The CPU engine's rows are not used (its output-length fold is
scored in the extrapolation cross-validation).

Run: python scripts/hold_evidence.py   (about 1 min on 2 cores)
"""

from __future__ import annotations

import warnings

import numpy as np

from slimlib.experiments.accuracy.scenarios import llmib_table, online_table
from slimlib.model import make_model

#: seconds below which a fitted constant counts as at its zero bound
ZERO_S = 1e-6


def main() -> None:
    shares = []
    for name, table in (("memgap-online", online_table()), ("llmib", llmib_table())):
        keys = [k for k in ("model", "gpu", "tp") if k in table.columns]
        for key, g in table.groupby(keys):
            if g["output_len"].nunique() < 2 or len(g) < 8:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter(
                    "ignore"
                )  # identifiability notes of single groups; the values are the point
                p = make_model("slim", n_starts=2).fit(g).params_
            per_step = p["t_step"] * float(np.median(g["output_len"]))
            fixed = (
                p["t_fixed"] if p["t_fixed"] > ZERO_S else 0.0
            )  # a value at the zero bound, up to solver noise
            per_step = per_step if per_step > ZERO_S else 0.0
            share = fixed / (fixed + per_step) if fixed + per_step > 0 else float("nan")
            shares.append(share)
            print(f"{name:14s} {'/'.join(map(str, key)):40s} rows {len(g):3d}  t_fixed {p['t_fixed'] * 1e3:8.2f} ms  "
                  f"t_step x OL {per_step * 1e3:9.2f} ms  t_fixed share {share:.2f}")  # fmt: skip
    s = np.array(shares)
    ok = s[np.isfinite(s)]
    print(
        f"{len(s)} groups: t_fixed at 0 in {int(np.sum(ok == 0))}; largest share of t_fixed {ok.max():.2f}; "
        f"median {np.median(ok):.2f}; {int(np.sum(~np.isfinite(s)))} with both at 0"
    )


if __name__ == "__main__":
    main()
