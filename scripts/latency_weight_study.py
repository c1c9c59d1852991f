"""The served latencies' weight in `slim`'s fit, studied by extrapolation (a study: its result is data, not a rerun).

For each weight of the measured mean TTFT and TPOT against a throughput (`slimlib.model.slim.LATENCY_WEIGHT`; 0:
the fit reads throughput only), the extrapolation cross-validation of `slim` on the measured datasets (the
kernel-composed ones carry no latency and do not move), and per (weight, axis, dataset) the throughput, TTFT and
TPOT MAPE with their bootstrap 95% intervals. Writes one CSV.

Run: python scripts/latency_weight_study.py --out data/studies/latency-weight-2026-12-06/latency_weight.csv
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import pandas as pd

import slimlib.model.slim as slim_module
from slimlib.experiments.accuracy.extrapolation import (
    extrapolation_table,
    latency_table,
    run_extrapolation_cv,
)
from slimlib.experiments.accuracy.extrapolation_folds import build_axis_folds
from slimlib.io import write_csv

WEIGHTS = (0.0, 0.25, 1.0)
MEASURED = ("memgap-online", "memgap-offline", "engine-cpu", "engine-cpu-offline", "engine-cpu-amx")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="CSV to write")
    ap.add_argument("--n-boot", type=int, default=2000, help="bootstrap resamples per interval")
    args = ap.parse_args()
    axes = [a for a in build_axis_folds() if a.dataset in MEASURED]
    parts = []
    for w in WEIGHTS:
        slim_module.LATENCY_WEIGHT = w  # the forked workers inherit it
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cv = run_extrapolation_cv(["slim"], axes=axes)
        thr = extrapolation_table(cv, n_boot=args.n_boot).assign(quantity="throughput")
        lat = latency_table(cv, n_boot=args.n_boot)
        cols = ["axis", "dataset", "quantity", "n_test", "mape_pct", "mape_lo_pct", "mape_hi_pct", "bias_pct"]
        both = pd.concat([thr[cols], lat[lat["quantity"].isin(["ttft", "tpot"])][cols]], ignore_index=True)
        parts.append(both.assign(latency_weight=w))
        print(f"weight {w:g}: {len(cv.failures)} failed folds", flush=True)
    out = pd.concat(parts, ignore_index=True)
    write_csv(out[["latency_weight", *out.columns[:-1]]].round(3), args.out)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
