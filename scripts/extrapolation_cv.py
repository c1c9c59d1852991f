"""Selection by extrapolation: print the per-axis error table of the candidate models and write it as CSV/Markdown.

Every candidate (default: every calibrated method of `slimlib.model.methods.METHODS`) is fitted on one region of the
data and validated on another along each axis a user extrapolates on (batch, input/output length, context, model
size, device, tensor parallelism; `slimlib.experiments.accuracy.extrapolation`); the recommended model is the one
with the best worst-axis throughput MAPE. Also prints the nested coverage of the 90% prediction intervals. Fold
fits are cached (`--cache`, default: the one notebooks 13 and 14 use), so a rerun refits only what changed.

Run: python scripts/extrapolation_cv.py [--candidates slim,paper] [--starts 2] [--jobs 2] [--out DIR]
"""

from __future__ import annotations

import argparse
import time
import warnings

import pandas as pd

from slimlib.experiments.accuracy.extrapolation import CV_STARTS, run_extrapolation_cv, wide_table
from slimlib.experiments.accuracy.extrapolation_outputs import (
    coverage_display,
    write_coverage_outputs,
    write_selection_outputs,
)
from slimlib.experiments.accuracy.fit_cache import cache_folder
from slimlib.experiments.outputs.numerics import rerun_at_portable_level
from slimlib.model import method_label


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--candidates", help="comma-separated registered method names (default: every calibrated method)"
    )
    ap.add_argument(
        "--starts", type=int, default=CV_STARTS, help=f"Sobol starts per fit (default {CV_STARTS})"
    )
    ap.add_argument(
        "--boot", type=int, default=10_000, help="bootstrap resamples per interval (default 10000)"
    )
    ap.add_argument(
        "--jobs", type=int, default=0, help="worker processes (default: the CPUs this process may use)"
    )
    ap.add_argument("--cache", default="", help="fit cache folder (default: $SLIM_CACHE_DIR or build/cache)")
    ap.add_argument("--out", default="extrapolation-cv", help="folder for extrap_cv.* and extrap_coverage.*")
    args = ap.parse_args()
    rerun_at_portable_level()  # the AVX2-level kernels of slim reproduce: the same numbers as figures/extrap_cv.*
    candidates = args.candidates.split(",") if args.candidates else None
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:  # counted below, never silenced
        warnings.simplefilter("always")
        result = run_extrapolation_cv(
            candidates, n_starts=args.starts, jobs=args.jobs or None, cache_dir=cache_folder(args.cache)
        )
    table, (_, reason) = write_selection_outputs(result, args.out, n_boot=args.boot)
    coverage = write_coverage_outputs(result, args.out)
    labels = {m: method_label(m) for m in result.methods}
    with pd.option_context("display.width", 250, "display.max_columns", None, "display.max_colwidth", 40):
        print(wide_table(table, labels).to_string(index=False))
        print("\n90% interval coverage (throughput, nested), median width high/low:")
        print(coverage_display(coverage).to_string(index=False))
    print(f"\nrecommended: {reason}")
    print(f"failed folds: {len(result.failures)}; warnings recorded by the fits: {len(result.warnings)} "
          f"(+{len(caught)} outside them)")  # fmt: skip
    print(
        f"{len(result.methods)} candidates, {sum(len(a.folds) for a in result.axes)} folds each, "
        f"{args.starts} Sobol starts per fit: fits {result.seconds:.0f} s, total {time.perf_counter() - t0:.0f} s"
    )
    print(f"wrote {args.out}/extrap_cv.{{csv,md,tex}} and {args.out}/extrap_coverage.{{csv,md,tex}}")


if __name__ == "__main__":
    main()
