"""The engine campaign's grid: two model families on the CPU engine, every configuration in R interleaved repeats.

Models (`slimlib.registry.engine_models`): the OPT family ``opt-1.3b-s8``, ``opt-6.7b-s8``, ``opt-13b-s8``
(``opt-2.7b-s8`` stays in the registry but is left out to fit the time budget) and the Qwen3-style GQA family
``qwen3s-h512``, ``qwen3s-h768``, ``qwen3s-h1024``.

Curves (IL, OL) per model, each over `BATCHES` = 1, 2, 4, ..., 64: (128, 64), (128, 256), (512, 64); and a
long-prompt curve over B <= 16 (`LONG_BATCH_MAX`): (1024, 64) for the OPT family (window 2048), (2048, 64) for the
GQA family (window 4096). They give output-length transfer (OL 64 -> 256 at IL 128), input-length transfer (IL 128 and
512 -> the long prompt at OL 64), and model transfer within each family.

Every configuration is planned `repeats` times (R, default 3; files ``..._r{r}.json``, r = 0..R-1, column
``repeat``); the runner measures all configurations of repeat r before repeat r + 1 (`slimlib.kit.vllm_runner`),
each as k waves of B requests. The ``num_prompts`` of the plan is one wave (B); the runner sets ``k B``.

`estimate_s` is the `--dry-run` time estimate: per run ``max(min_run_s, min_waves w) + RUN_OVERHEAD_S`` (plus one
probe wave in repeat 0), plus `SERVER_START_S` per (repeat, model). The wave time w is the mean E2E latency of a
linear fit ``e2e = a + b OL + c B OL + d B IL`` per model to a runs table (the committed ``engine-cpu-runs``, one
wave per run); a model without runs there uses the fit of the table's largest model times the ratio of parameter
counts to the power the table's models show (slope of log mean E2E on log parameters): a guess for the GQA family,
which has no earlier runs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.advisor.plan import make_plan
from slimlib.registry.architectures import get_architecture
from slimlib.registry.engine_models import ENGINE_MODELS, GQA_ENGINE_MODELS

__all__ = [
    "BATCHES",
    "CURVES",
    "LONG_CURVE",
    "LONG_BATCH_MAX",
    "CAMPAIGN_MODELS",
    "DEVICE",
    "campaign_plan",
    "merged_plan",
    "estimate_s",
    "wave_sources",
    "SERVER_START_S",
    "RUN_OVERHEAD_S",
]

DEVICE = "cpu"
BATCHES = (1, 2, 4, 8, 16, 32, 64)
#: (IL, OL) curves over every batch size, in the order they are measured within a model
CURVES = ((128, 64), (128, 256), (512, 64))
#: the long-prompt curve of each family (IL, OL), over B <= LONG_BATCH_MAX
LONG_CURVE = {"opt": (1024, 64), "qwen3": (2048, 64)}
LONG_BATCH_MAX = 16
#: the campaign's models, in measuring order within a repeat (opt-2.7b-s8 left out: time budget)
CAMPAIGN_MODELS = tuple(m for m in ENGINE_MODELS if m != "opt-2.7b-s8") + GQA_ENGINE_MODELS
#: seconds to start a server and warm it up (measured on the 2-core host: 129 s for qwen3s-h512 under load)
SERVER_START_S = 120.0
#: seconds per run outside the benchmark itself (client set-up, tokenizing the prompts)
RUN_OVERHEAD_S = 1.0


def campaign_plan(models=CAMPAIGN_MODELS, curves=CURVES, batches=BATCHES, repeats: int = 3,
                  long_curve: bool = True, device: str = DEVICE) -> pd.DataFrame:  # fmt: skip
    """The campaign as one plan table (columns of `make_plan` plus ``repeat``), repeat-major: every configuration
    of repeat 0 (model by model), then of repeat 1, ...; files carry ``_r{r}``. `device`: the registry's host
    CPU the runs are labelled with."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    parts = []
    for model in models:
        family = get_architecture(model).family
        todo = [(c, tuple(batches)) for c in curves]
        if long_curve and family in LONG_CURVE:
            todo.append((LONG_CURVE[family], tuple(b for b in batches if b <= LONG_BATCH_MAX)))
        for (il, ol), bs in todo:
            if not bs:
                continue
            p = make_plan(model, device, [il], [ol], batch_sizes=bs, rounds=1, min_prompts=1, min_runs=1)
            parts.append(p)
    one = pd.concat(parts, ignore_index=True)
    reps = []
    for r in range(repeats):
        p = one.copy()
        p["repeat"] = r
        p["file"] = p["file"].str.replace(".json", f"_r{r}.json", regex=False)
        reps.append(p)
    return pd.concat(reps, ignore_index=True)


def merged_plan(old: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """`old` (a campaign folder's plan) with the rows of `new` it lacks (by file), repeat-major again: a later
    ``--models`` or ``--repeats`` adds to a campaign folder instead of dropping what it holds."""
    add = new[~new["file"].isin(set(old["file"]))]
    both = pd.concat([old, add], ignore_index=True)
    return both.sort_values("repeat", kind="stable").reset_index(drop=True)


def _wave_fits(runs: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per model, least-squares coefficients of ``e2e_s ~ [1, OL, B OL, B IL]`` (first repeat only)."""
    fits = {}
    r0 = runs[runs["repeat"] == 0] if "repeat" in runs.columns else runs
    for model, g in r0.groupby("model"):
        x = _features(g["batch_size"], g["input_len"], g["output_len"])
        fits[str(model)] = np.linalg.lstsq(x, g["e2e_s"].to_numpy(float), rcond=None)[0]
    return fits


def _features(b, il, ol) -> np.ndarray:
    b, il, ol = (np.asarray(v, float) for v in (b, il, ol))
    return np.column_stack([np.ones_like(b), ol, b * ol, b * il])


def _wave_models(plan: pd.DataFrame, runs: pd.DataFrame) -> dict[str, tuple[np.ndarray, float, str]]:
    """Per planned model: (fit coefficients, scale factor, where its wave times come from)."""
    fits = _wave_fits(runs)
    if not fits:
        raise ValueError("no runs to estimate wave times from")
    largest = max(fits, key=lambda m: get_architecture(m).n_params)
    slope = _size_exponent(runs)
    out = {}
    for m in plan["model"].unique():
        if m in fits:
            out[str(m)] = (fits[m], 1.0, "fit to its runs")
        else:
            k = (get_architecture(m).n_params / get_architecture(largest).n_params) ** slope
            out[str(m)] = (
                fits[largest],
                k,
                f"{largest}'s fit x {k:.2f} (parameter ratio ^ {slope:.2f}; no runs)",
            )
    return out


def _size_exponent(runs: pd.DataFrame) -> float:
    """Slope of log(mean E2E) on log(parameters) over the table's models, on the configurations all of them ran
    (first repeat); 1 with fewer than two models."""
    r0 = runs[runs["repeat"] == 0] if "repeat" in runs.columns else runs
    keys = ["batch_size", "input_len", "output_len"]
    n_models = r0.groupby(keys)["model"].nunique()
    common = n_models[n_models == r0["model"].nunique()].index
    sub = r0.set_index(keys).loc[common].reset_index()
    means = sub.groupby("model")["e2e_s"].mean()
    if len(means) < 2:
        return 1.0
    x = np.log([get_architecture(m).n_params for m in means.index])
    return float(np.polyfit(x, np.log(means.to_numpy(float)), 1)[0])


def wave_sources(plan: pd.DataFrame, runs: pd.DataFrame) -> dict[str, str]:
    """Where `estimate_s` takes each model's wave times from."""
    return {m: v[2] for m, v in _wave_models(plan, runs).items()}


def estimate_s(plan: pd.DataFrame, runs: pd.DataFrame, min_run_s: float, min_waves: int) -> dict[str, float]:
    """Estimated seconds of `plan` under the protocol (module docstring): ``runs`` (measuring, probes included),
    ``servers`` (starts) and ``total``."""
    models = _wave_models(plan, runs)
    total_runs = 0.0
    for m, g in plan.groupby("model"):
        coef, k, _ = models[str(m)]
        wave = np.maximum(_features(g["batch_size"], g["input_len"], g["output_len"]) @ coef * k, 0.05)
        run = np.maximum(min_run_s, min_waves * wave) + RUN_OVERHEAD_S
        probe = np.where(g["repeat"].to_numpy() == 0, wave, 0.0) if min_run_s > 0 else 0.0
        total_runs += float(np.sum(run + probe))
    servers = SERVER_START_S * plan.groupby(["repeat", "model"]).ngroups
    return {"runs": total_runs, "servers": servers, "total": total_runs + servers}
