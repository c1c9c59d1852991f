"""The paper's five evaluation scenarios, the run-to-run noise floor and SLIM-BCA on the CPU-engine campaign.

Data: ``engine-cpu-runs`` (vLLM's CPU build serving the scaled OPT family with random weights; see
`slimlib.experiments.engine_study.campaign_grid` for the grid). The scenarios follow the paper's Table II designs:

1. same-curve: three pre-knee batch sizes of every (model, IL, OL) curve train one fit, the rest validate;
2. model-transfer: at IL = 128, OL = 256, the three smaller models train, the largest validates;
3. output-length-transfer: per model at IL = 128, OL in {32, 128, 256} train, OL = 512 validates;
4. input-length-transfer: per model at OL = 256, IL in {128, 512} train, IL = 1024 validates
   (`slimlib.experiments.accuracy.scenarios.engine_input_length_scenario`, also Table II's engine row);
5. combined: the smaller models' OL-transfer and model-transfer training rows train, the largest model at
   OL = 512 (unseen in both) validates.

The noise floor is the MAPE between the two passes of the repeated curves (repeat 1 against repeat 0), with a
bootstrap interval over configurations: a model error below it cannot be told from measurement noise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.accuracy.scenarios import (
    ENGINE_IL_ROW,
    ENGINE_TABLE,
    ENGINE_TRUTH_L,
    ENGINE_TRUTH_T,
    Fold,
    Scenario,
    cpu_kv_blocks,
    engine_eval_rows,
    engine_input_length_scenario,
    same_curve_split,
)
from slimlib.experiments.outputs import uncertainty as U
from slimlib.model.memory import DEFAULT_BLOCK_SIZE
from slimlib.registry.engine_models import ENGINE_MODELS
from slimlib.registry.host_cpu import HOST_CPU_KV_SPACE_GIB

__all__ = ["engine_scenarios", "noise_floor", "bca_curves", "LARGEST", "SMALLER"]

LARGEST = ENGINE_MODELS[-1]
SMALLER = ENGINE_MODELS[:-1]
BASE_IL = 128
OL_TRAIN = (32, 128, 256)
OL_TEST = 512
MODEL_TRANSFER_OL = 256


def _at(df: pd.DataFrame, il=None, ols=None) -> pd.DataFrame:
    m = pd.Series(True, index=df.index)
    if il is not None:
        m &= df["input_len"].round() == il
    if ols is not None:
        m &= df["output_len"].round().isin(list(ols))
    return df[m]


def engine_scenarios(runs: pd.DataFrame | None = None) -> list[Scenario]:
    """The five scenarios on the CPU-engine table (repeat 0), in the paper's order."""
    runs = load(ENGINE_TABLE) if runs is None else runs
    t = engine_eval_rows(runs)
    missing = [m for m in ENGINE_MODELS if m not in set(t["model"])]
    if missing:
        raise DataError(f"{ENGINE_TABLE}: no runs of {missing}; rerun the campaign (slim bench campaign)")
    tr, te = same_curve_split(t)
    out = [Scenario("same-curve", "every (model, IL, OL) curve: 3 pre-knee batch sizes per curve train one "
                    "global fit, the other batch sizes validate", ENGINE_TRUTH_T, ENGINE_TRUTH_L,
                    [Fold("all curves", tr, te)])]  # fmt: skip
    at = _at(t, BASE_IL, [MODEL_TRANSFER_OL])
    out.append(Scenario(
        "model-transfer", f"IL={BASE_IL}, OL={MODEL_TRANSFER_OL}: fit {', '.join(SMALLER)}, validate {LARGEST}",
        ENGINE_TRUTH_T, ENGINE_TRUTH_L,
        [Fold(LARGEST, at[at["model"].isin(SMALLER)].reset_index(drop=True),
              at[at["model"] == LARGEST].reset_index(drop=True))],
    ))  # fmt: skip
    folds = []
    for model, g in _at(t, BASE_IL).groupby("model", sort=True):
        a, b = _at(g, ols=OL_TRAIN), _at(g, ols=[OL_TEST])
        if len(a) and len(b):
            folds.append(Fold(str(model), a.reset_index(drop=True), b.reset_index(drop=True)))
    out.append(Scenario("output-length-transfer", f"per model at IL={BASE_IL}: fit OL in {list(OL_TRAIN)}, "
                        f"validate OL={OL_TEST}", ENGINE_TRUTH_T, ENGINE_TRUTH_L, folds))  # fmt: skip
    il = engine_input_length_scenario(t, name="input-length-transfer")
    out.append(il)
    small = t[t["model"].isin(SMALLER)]
    train = pd.concat(
        [_at(small, BASE_IL, [MODEL_TRANSFER_OL]), _at(small, BASE_IL, OL_TRAIN)]
    ).drop_duplicates()
    test = _at(t[t["model"] == LARGEST], BASE_IL, [OL_TEST])
    out.append(Scenario(
        "combined", f"union of the model- and output-length-transfer training sets without {LARGEST}; validate "
        f"{LARGEST} at IL={BASE_IL}, OL={OL_TEST}, unseen in both", ENGINE_TRUTH_T, ENGINE_TRUTH_L,
        [Fold(f"{LARGEST} OL={OL_TEST}", train.sort_index().reset_index(drop=True), test.reset_index(drop=True))],
    ))  # fmt: skip
    return out


def noise_floor(
    runs: pd.DataFrame | None = None, n_boot: int = 10_000, seed: int = 20_240_613
) -> pd.DataFrame:
    """MAPE (%) between repeat >= 1 and repeat 0 of the same configuration, per metric, with a bootstrap 95%
    interval over configurations. Columns: metric, n_pairs, mape_pct, ci_lo_pct, ci_hi_pct, max_ape_pct."""
    runs = load(ENGINE_TABLE) if runs is None else runs
    keys = ["model", "batch_size", "input_len", "output_len"]
    base = runs[runs["repeat"].astype(int) == 0]
    rep = runs[runs["repeat"].astype(int) >= 1]
    pairs = rep.merge(base, on=keys, suffixes=("", "_0"), validate="many_to_one")
    if pairs.empty:
        raise DataError(
            f"{ENGINE_TABLE}: no repeated configuration; the noise floor needs repeats (--repeats)"
        )
    rows = []
    for metric, col in (("throughput", "throughput_tok_s"), ("latency", "e2e_s")):
        errs = U.ape(pairs[col + "_0"].to_numpy(float), pairs[col].to_numpy(float))
        m, lo, hi = U.bootstrap_mean_ci(errs, n_boot=n_boot, seed=seed, label=f"noise floor {metric}")
        rows.append({"metric": metric, "n_pairs": int(len(pairs)), "mape_pct": m, "ci_lo_pct": lo, "ci_hi_pct": hi,
                     "max_ape_pct": float(np.max(errs))})  # fmt: skip
    return pd.DataFrame(rows)


def bca_curves(runs: pd.DataFrame | None = None, il: int = BASE_IL) -> pd.DataFrame:
    """The IL = `il` curves (model x OL) in the layout of `slimlib.experiments.bca.advisor_eval.measured_curves`:
    ``measured_e2e_s`` = mean request E2E, ``efficiency`` = T(B) / (B T(1)), KV pool = the campaign's KV space,
    no preemption (every batch of the grid fits that pool, checked by the runner)."""
    runs = load(ENGINE_TABLE) if runs is None else runs
    df = runs[(runs["repeat"].astype(int) == 0) & (runs["input_len"].astype(int) == il)].copy()
    df = df.sort_values(["model", "output_len", "batch_size"], kind="mergesort").reset_index(drop=True)
    for c in ("batch_size", "input_len", "output_len"):
        df[c] = df[c].astype(int)
    df["measured_e2e_s"] = df["e2e_s"].astype(float)
    first = df.groupby(["model", "output_len"], sort=True)[["batch_size", "throughput_tok_s"]].transform(
        "first"
    )
    df["t1_from_batch"] = first["batch_size"].astype(int)
    df["efficiency"] = df["throughput_tok_s"] / (
        df["batch_size"] * first["throughput_tok_s"] / first["batch_size"]
    )
    df["kv_default_gb"] = float(HOST_CPU_KV_SPACE_GIB)
    df["block_size"] = DEFAULT_BLOCK_SIZE
    df["preempted"] = False
    # the engine's KV pool in blocks and its chunked prefill (vLLM V1), as the evaluation's rows have them
    # (`slimlib.experiments.accuracy.scenarios.engine_eval_rows`), so the advisor's grid is capped as predict is
    df["gpu_blocks"] = cpu_kv_blocks(df["model"])
    df["chunked_prefill"] = True
    return df


__all__ += ["ENGINE_IL_ROW"]
