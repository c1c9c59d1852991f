"""The paper's five evaluation scenarios and SLIM-BCA on the CPU-engine campaign, from its medians table.

Data: ``engine-cpu-medians`` (one row per configuration: the median over its repeats that pass the physical
checks; `slimlib.data.engine_medians`). The designs are read off the grid the table holds, so one code serves the
campaign before the measurement protocol (scaled OPT family; IL 128 with OL 32-512, OL 256 with IL 128-1024) and
the protocol's grid (OPT and GQA families; IL 128 with OL 64 and 256, OL 64 with IL 128, 512 and a long prompt).
Per model family (the models whose names share the first dash-separated part, sizes from the architecture
registry), in the paper's Table II order:

1. same-curve: three pre-knee batch sizes of every (model, IL, OL) curve train one fit, the rest validate;
2. model-transfer: every curve the family's models share; the smaller models train, the largest validates;
3. output-length-transfer: per model at the shortest IL, the shorter OLs train, the longest OL validates;
4. input-length-transfer: per model at the OL with the most ILs, the shorter ILs train, the longest validates
   (`slimlib.experiments.accuracy.scenarios.engine_input_length_scenario`, also Table II's engine row);
5. combined: the smaller models at the shortest IL and the shorter OLs train; the largest model at the longest
   OL (unseen in both) validates.

With more than one family each scenario is one row per family, named ``<scenario> [<family>]``.
"""

from __future__ import annotations

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
from slimlib.model.memory import DEFAULT_BLOCK_SIZE
from slimlib.registry.architectures import get_architecture
from slimlib.registry.host_cpu import HOST_CPU_KV_SPACE_GIB
from slimlib.registry.vllm_flags import CPU_SERVER_BATCHED_TOKENS

__all__ = ["ENGINE_IL_ROW", "engine_bca_curves", "difference_notes", "engine_families", "engine_scenarios"]


def engine_families(models) -> dict[str, list[str]]:
    """Family name -> its models, smallest to largest (parameters in the architecture registry)."""
    fams: dict[str, list[str]] = {}
    for m in sorted(set(map(str, models))):
        fams.setdefault(m.split("-", 1)[0], []).append(m)
    return {f: sorted(ms, key=lambda m: (get_architecture(m).n_params, m)) for f, ms in sorted(fams.items())}


def _lens(df: pd.DataFrame, col: str) -> list[int]:
    return sorted(set(df[col].round().astype(int)))


def _at(df: pd.DataFrame, il=None, ols=None) -> pd.DataFrame:
    m = pd.Series(True, index=df.index)
    if il is not None:
        m &= df["input_len"].round() == il
    if ols is not None:
        m &= df["output_len"].round().isin(list(ols))
    return df[m]


def _curves(df: pd.DataFrame) -> set[tuple[int, int]]:
    return set(zip(df["input_len"].round().astype(int), df["output_len"].round().astype(int), strict=True))


def _family_scenarios(t: pd.DataFrame, models: list[str], tag: str) -> list[Scenario]:
    largest, smaller = models[-1], models[:-1]
    name = (lambda s: f"{s} [{tag}]") if tag else (lambda s: s)
    tr, te = same_curve_split(t)
    out = [Scenario(name("same-curve"), "every (model, IL, OL) curve: 3 pre-knee batch sizes per curve train one "
                    "global fit, the other batch sizes validate", ENGINE_TRUTH_T, ENGINE_TRUTH_L,
                    [Fold("all curves", tr, te)])]  # fmt: skip
    shared = set.intersection(*(_curves(t[t["model"] == m]) for m in models))
    key = list(zip(t["input_len"].round().astype(int), t["output_len"].round().astype(int), strict=True))
    at = t[pd.Series([k in shared for k in key], index=t.index)]
    folds = []
    if smaller and shared:
        folds = [Fold(largest, at[at["model"].isin(smaller)].reset_index(drop=True),
                      at[at["model"] == largest].reset_index(drop=True))]  # fmt: skip
    out.append(Scenario(
        name("model-transfer"), f"the {len(shared)} (IL, OL) curves all models share: fit {', '.join(smaller)}, "
        f"validate {largest}", ENGINE_TRUTH_T, ENGINE_TRUTH_L, folds,
        "" if folds else "no data: one model, or no curve shared by all models",
    ))  # fmt: skip
    base_il = _lens(t, "input_len")[0]
    base = _at(t, base_il)
    ols = _lens(base, "output_len")
    folds = []
    if len(ols) >= 2:
        for model, g in base.groupby("model", sort=True):
            a, b = _at(g, ols=ols[:-1]), _at(g, ols=ols[-1:])
            if len(a) and len(b):
                folds.append(Fold(str(model), a.reset_index(drop=True), b.reset_index(drop=True)))
    out.append(Scenario(name("output-length-transfer"), f"per model at IL={base_il}: fit OL in {ols[:-1]}, "
                        f"validate OL={ols[-1]}", ENGINE_TRUTH_T, ENGINE_TRUTH_L, folds,
                        "" if folds else f"no data: fewer than two OLs at IL={base_il}"))  # fmt: skip
    out.append(engine_input_length_scenario(t, name=name("input-length-transfer")))
    train = _at(base[base["model"].isin(smaller)], ols=ols[:-1])
    test = _at(base[base["model"] == largest], ols=ols[-1:])
    folds = [Fold(f"{largest} OL={ols[-1]}", train.sort_index().reset_index(drop=True),
                  test.reset_index(drop=True))] if len(ols) >= 2 and len(train) and len(test) else []  # fmt: skip
    out.append(Scenario(
        name("combined"), f"the smaller models at IL={base_il}, OL in {ols[:-1]} train; {largest} at "
        f"IL={base_il}, OL={ols[-1]} (unseen model and OL) validates", ENGINE_TRUTH_T, ENGINE_TRUTH_L, folds,
        "" if folds else "no data: one model, or fewer than two OLs",
    ))  # fmt: skip
    return out


def engine_scenarios(medians: pd.DataFrame | None = None) -> list[Scenario]:
    """The five scenarios (module docstring) on the CPU-engine medians, per model family in name order."""
    t = engine_eval_rows(load(ENGINE_TABLE) if medians is None else medians)
    if t.empty:
        raise DataError(f"{ENGINE_TABLE}: no configuration; rerun the campaign (slim bench campaign)")
    fams = engine_families(t["model"])
    out: list[Scenario] = []
    for fam, models in fams.items():
        out += _family_scenarios(t[t["model"].isin(models)], models, fam if len(fams) > 1 else "")
    return out


def difference_notes(long: pd.DataFrame, labels: dict[str, str], reference: str = "paper") -> list[str]:
    """One note per (scenario, metric) of an interval table (`slimlib.experiments.outputs.uncertainty.mape_intervals`
    columns): which methods' MAPE differs from `reference`'s with a paired 95% interval excluding zero (resolved,
    with the sign) and which are within noise (interval containing zero)."""
    notes = []
    for (scen, metric), g in long.groupby(["scenario", "metric"], sort=False):
        g = g[(g["method"] != reference) & g["diff_lo_pct"].notna() & g["diff_hi_pct"].notna()]
        if g.empty:
            continue
        better = [labels.get(m, m) for m, hi in zip(g["method"], g["diff_hi_pct"], strict=True) if hi < 0]
        worse = [labels.get(m, m) for m, lo in zip(g["method"], g["diff_lo_pct"], strict=True) if lo > 0]
        tied = [labels.get(m, m) for m, lo, hi in zip(g["method"], g["diff_lo_pct"], g["diff_hi_pct"], strict=True)
                if lo <= 0 <= hi]  # fmt: skip
        ref = labels.get(reference, reference)
        parts = [f"resolved better than {ref}: {', '.join(better)}" if better else "",
                 f"resolved worse: {', '.join(worse)}" if worse else "",
                 f"within noise of {ref} (interval contains 0): {', '.join(tied)}" if tied else ""]  # fmt: skip
        notes.append(f"{scen}, {metric}: " + "; ".join(p for p in parts if p) + ".")
    return notes


def engine_bca_curves(medians: pd.DataFrame | None = None, il: int | None = None) -> pd.DataFrame:
    """The curves (model x OL) at input length `il` (default: the shortest in the table) in the layout of
    `slimlib.experiments.bca.advisor_eval.measured_curves`, from the medians (never single repeats):
    ``measured_e2e_s`` = mean request E2E, ``efficiency`` = T(B) / (B T(1)), KV pool = the campaign's KV space,
    no preemption (every batch of the grid fits that pool, checked by the runner)."""
    med = load(ENGINE_TABLE) if medians is None else medians
    if "repeat" in med.columns:
        raise DataError(
            f"got a runs table (it has 'repeat'); SLIM-BCA is scored on the medians ({ENGINE_TABLE})"
        )
    il = int(med["input_len"].min()) if il is None else il
    df = med[med["input_len"].astype(int) == il].copy()
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
    df["kv_default_gib"] = float(HOST_CPU_KV_SPACE_GIB)
    df["block_size"] = DEFAULT_BLOCK_SIZE
    df["preempted"] = False
    # the engine's KV pool in blocks and its chunked prefill (vLLM V1), as the evaluation's rows have them
    # (`slimlib.experiments.accuracy.scenarios.engine_eval_rows`), so the advisor's grid is capped as predict is
    df["gpu_blocks"] = cpu_kv_blocks(df["model"])
    df["chunked_prefill"] = True
    df["max_num_batched_tokens"] = float(CPU_SERVER_BATCHED_TOKENS)
    return df
