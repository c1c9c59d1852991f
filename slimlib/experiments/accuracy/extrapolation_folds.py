"""The folds of the extrapolation cross-validation: one per (axis, dataset, group), each fitting one region of the
data and validating another along the axis a user extrapolates on.

Axes (`AXES`) and the datasets that support them (every split is defined by configuration columns, or for
``batch-knee`` by each curve's own measured throughput profile; never by a method's errors):

* ``batch``: per model, fit every curve's B <= 4, validate its B >= 8 (memgap online and offline, CPU engine;
  LLM-Inference-Bench has no B in 2..4); memgap offline pools its models into one fit (`POOLED`).
* ``batch-knee``: per model (and device), fit the pre-knee run of every curve (`linear_regime` from B = 1: each
  doubling gains at least `LINEAR_GAIN`), validate the curve's larger batch sizes (all four datasets).
* ``input``: per model, fit the smaller input lengths, validate the largest (CPU engine: IL 128, 512 -> 1024 at
  every OL; the only dataset with an input-length sweep at fixed OL).
* ``output``: per model, fit the smaller output lengths, validate the largest (memgap online: OL 130-390 -> 520;
  CPU engine: OL 32-256 -> 512 at every IL).
* ``context``: IL = OL, per device, fit L <= 256, validate L >= 512 (LLM-Inference-Bench, Table II's
  context-transfer folds).
* ``model``: leave the largest model (registry parameter count) out, fit the others (memgap online and offline,
  CPU engine, LLM-Inference-Bench per device).
* ``device``: fit one AMD device's rows, transfer the parameter file (`slimlib.model.gpu_transfer`), validate the
  other device, both directions (LLM-Inference-Bench: the only dataset with two devices).
* ``tp``: per device, fit the one-device TP degree, validate the larger degrees (LLM-Inference-Bench).

The CPU engine's offline campaign (``engine-cpu-offline``: the served campaign's configurations on the engine
alone, no API server or benchmark client sharing the 2-core host) and the AMX host's served campaign
(``engine-cpu-amx``: another CPU, a closed loop of B clients, prefix caching off; its TTFT and TPOT are scored) take
the CPU engine's folds of every axis.

The kernel-composed curves (``aic-composed``: measured vLLM kernel latencies summed per engine step plus the
measured host work, A100/H100/H200/B200 at TP 1-8, `slimlib.experiments.accuracy.composed_curves`; not end-to-end
measurements) take, at TP 1, per GPU and model, the batch, batch-knee, input (IL 128-512 -> 2048 at OL 128) and
output (OL 128 -> 512) folds; per GPU the model fold (the largest model that fits it); the device folds: each model
fitted on the H100, its parameter file transferred to each other GPU; and, per GPU and model, the tp fold: fit the
smallest TP degree (1, or 2 where the weights do not fit one GPU), validate TP 2-8.

The mixtures of experts' kernel-composed curves (``aic-composed-moe``: Mixtral-8x7B and Qwen3-30B-A3B, their
experts the measured fused-MoE kernel) take the same batch, batch-knee, input, output and tp folds; per GPU and
mixture of experts the model fold fits the GPU's dense TP-1 curves and validates the mixture of experts (dense ->
MoE); the device folds fit the H200 (Mixtral's weights leave no KV pool on one H100) and transfer to every other GPU
with the model's TP-1 curves. The dense models' FP8-weight curves (``aic-composed-fp8``:
H100, H200, B200) take the dense curves' folds, their NVFP4-weight curves (``aic-composed-fp4``: B200) those of one
GPU (no device fold).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from slimlib.data import available
from slimlib.errors import DataError
from slimlib.experiments.accuracy.composed_curves import (
    COMPOSED,
    COMPOSED_FP4,
    COMPOSED_FP8,
    COMPOSED_MOE,
    DEVICE_SOURCE,
    MOE_DEVICE_SOURCE,
    composed_dataset,
    composed_table,
)
from slimlib.experiments.accuracy.scenarios import (
    AMX_TABLE,
    DEVICE_LABEL,
    DEVICES,
    ENGINE_TABLE,
    Fold,
    context_scenario,
    device_rows,
    engine_eval_rows,
    engine_offline_rows,
    llmib_table,
    offline_table,
    online_table,
)
from slimlib.experiments.characterization.knees import LINEAR_GAIN, linear_regime
from slimlib.experiments.transfer_study.transfer_eval import gpu_transfer_scenario, tp_scenario
from slimlib.registry.architectures import get_architecture

#: the axes, in table order
AXES = ("batch", "batch-knee", "input", "output", "context", "model", "device", "tp")
#: dataset name -> what it is (the table's "dataset" column)
DATASETS = {
    "memgap-online": "vLLM 0.5.2, H100, online advisor sweep (data/memgap-online.csv)",
    "memgap-offline": "vLLM 0.5.2, H100, offline batches (data/memgap-offline.csv)",
    "engine-cpu": "vLLM CPU engine campaign, medians over passing repeats (data/engine-cpu-medians.csv)",
    "engine-cpu-amx": "vLLM CPU engine on an Intel Xeon with AMX, a closed loop of B clients, prefix caching off, "
    "medians over passing repeats with served TTFT and TPOT (data/engine-cpu-amx-medians.csv)",
    "engine-cpu-offline": "the same configurations on the engine alone, offline LLM.generate, no server or client "
    "(data/engine-cpu-offline)",
    "llmib": "LLM-Inference-Bench, vLLM 0.6.1, MI300X/MI250 (data/llmib-runs.csv)",
    COMPOSED: "kernel-composed curves, not end-to-end: vLLM kernel latencies measured by NVIDIA AIConfigurator "
    "(data/aic-*.csv) summed per engine step plus the measured host work per sequence, A100/H100/H200/B200, TP 1-8 (one node)",
    COMPOSED_MOE: "the same for two mixtures of experts, Mixtral-8x7B and Qwen3-30B-A3B, their routed experts "
    "the measured fused-MoE kernel (data/aic-moe.csv, power-law routing)",
    COMPOSED_FP8: "the same for the dense models with FP8 weights (vLLM --quantization fp8: per-tensor scaled FP8 "
    "GEMMs), H100/H200/B200",
    COMPOSED_FP4: "the same with NVFP4 weights (vLLM --quantization modelopt_fp4: FlashInfer's NVFP4 GEMMs), B200",
}
#: the CPU-engine datasets, which take the batch, batch-knee, input, output and model folds
ENGINES = ("engine-cpu", "engine-cpu-offline", "engine-cpu-amx")
#: batch axis: largest fitted and smallest validated batch size
BATCH_FIT_MAX = 4
BATCH_TEST_MIN = 8
#: datasets whose batch folds pool every model into one fit (memgap offline: 3 rows per model at B <= 4, fewer
#: than the paper model's free parameters)
POOLED = ("memgap-offline",)


@dataclass(frozen=True)
class AxisFolds:
    """The folds of one axis on one dataset; `transfer` folds move the fitted parameters to the test rows' GPU."""

    axis: str
    dataset: str
    design: str
    folds: list[Fold] = field(default_factory=list)
    transfer: bool = False

    @property
    def n_test(self) -> int:
        return int(sum(len(f.test) for f in self.folds))


def _fold(label: str, train: pd.DataFrame, test: pd.DataFrame) -> Fold | None:
    return (
        Fold(label, train.reset_index(drop=True), test.reset_index(drop=True))
        if len(train) and len(test)
        else None
    )


def _per_model(table: pd.DataFrame, split: Callable[[pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]],
               prefix: str = "") -> list[Fold]:  # fmt: skip
    folds = []
    for model, g in table.groupby("model", sort=True):
        f = _fold(f"{prefix}{model}", *split(g))
        if f is not None:
            folds.append(f)
    return folds


def batch_split(g: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """B <= `BATCH_FIT_MAX` of every curve to fit, B >= `BATCH_TEST_MIN` to validate."""
    b = g["batch_size"]
    return g[b <= BATCH_FIT_MAX], g[b >= BATCH_TEST_MIN]


def knee_split(g: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per curve: its pre-knee run from B = 1 (`linear_regime`) to fit, the larger batch sizes to validate."""
    train, test = [], []
    for _, c in g.groupby("curve", sort=True):
        run = linear_regime(c["batch_size"].to_numpy(), c["throughput_tok_s"].to_numpy(), 1.0, LINEAR_GAIN)
        if len(run) == 0:
            continue
        top = float(c["batch_size"].to_numpy()[run].max())
        train.append(c.iloc[run])
        test.append(c[c["batch_size"] > top])
    if not train:
        return g.iloc[:0], g.iloc[:0]
    return pd.concat(train), pd.concat(test)


def largest_split(g: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The largest model (registry parameter count) to validate, the others to fit."""
    sizes = {m: get_architecture(m).n_params for m in set(g["model"])}
    largest = max(sizes, key=lambda m: (sizes[m], m))
    return g[g["model"] != largest], g[g["model"] == largest]


def _largest_len(col: str) -> Callable[[pd.DataFrame], tuple[pd.DataFrame, pd.DataFrame]]:
    def split(g: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
        top = g[col].max()
        return g[g[col] < top], g[g[col] == top]

    return split


def _one(label: str, train: pd.DataFrame, test: pd.DataFrame) -> list[Fold]:
    f = _fold(label, train, test)
    return [] if f is None else [f]


def _device_groups(t: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    return [(DEVICE_LABEL[gpu], device_rows(t, gpu)) for gpu in DEVICES]


def build_axis_folds(
    online: pd.DataFrame | None = None,
    offline: pd.DataFrame | None = None,
    engine: pd.DataFrame | None = None,
    llmib: pd.DataFrame | None = None,
    engine_offline: pd.DataFrame | None = None,
    composed: pd.DataFrame | None = None,
    engine_amx: pd.DataFrame | None = None,
    datasets: Collection[str] | None = None,
    cache_dir: str | Path | None = None,
) -> list[AxisFolds]:
    """Every (axis, dataset) of the protocol with its folds, in `AXES` order; tables default to the committed data
    (the CPU engine only where ``engine-cpu-medians`` exists, its offline campaign where ``data/engine-cpu-offline``
    does; `engine_offline` in `engine_offline_rows`' layout; `composed` in `composed_table`'s, its mixtures of
    experts' rows the dataset ``aic-composed-moe``, its FP8 and FP4 dense rows ``aic-composed-fp8`` and
    ``aic-composed-fp4``). A table given as an empty frame is skipped; `datasets` (default all) names the datasets
    whose folds are built, and only their tables are read; the composed table is cached in `cache_dir` where given
    (`composed_table`)."""
    unknown = sorted(set(datasets or ()) - set(DATASETS))
    if unknown:
        raise DataError(f"datasets {unknown}: unknown; the folds' datasets are {list(DATASETS)}")

    def wanted(*names: str) -> bool:
        return datasets is None or any(n in datasets for n in names)

    empty = pd.DataFrame()
    on = (online_table() if wanted("memgap-online") else empty) if online is None else online
    off = (offline_table() if wanted("memgap-offline") else empty) if offline is None else offline
    eng = (
        (engine_eval_rows() if available(ENGINE_TABLE) and wanted("engine-cpu") else None)
        if engine is None
        else engine
    )
    amx = (
        (engine_eval_rows(table=AMX_TABLE) if available(AMX_TABLE) and wanted("engine-cpu-amx") else None)
        if engine_amx is None
        else engine_amx
    )
    lib = (llmib_table() if wanted("llmib") else empty) if llmib is None else llmib
    eoff = (
        (engine_offline_rows() if wanted("engine-cpu-offline") else empty)
        if engine_offline is None
        else engine_offline
    )
    if composed is None:
        composed = (
            composed_table(cache_dir)[0]
            if wanted(COMPOSED, COMPOSED_MOE, COMPOSED_FP8, COMPOSED_FP4)
            else empty
        )
    comp_all = composed
    dataset = composed_dataset(comp_all)
    comp, comp_moe, comp_fp8, comp_fp4 = (
        comp_all[dataset == name] for name in (COMPOSED, COMPOSED_MOE, COMPOSED_FP8, COMPOSED_FP4)
    )
    tables = {
        "memgap-online": on,
        "memgap-offline": off,
        "engine-cpu": eng,
        "engine-cpu-offline": eoff,
        "engine-cpu-amx": amx,
        "llmib": lib,
        COMPOSED: comp,
        COMPOSED_MOE: comp_moe,
        COMPOSED_FP8: comp_fp8,
        COMPOSED_FP4: comp_fp4,
    }
    tables = {k: v for k, v in tables.items() if v is not None and len(v) and wanted(k)}
    out: list[AxisFolds] = []

    def add(axis: str, dataset: str, design: str, folds: list[Fold], transfer: bool = False) -> None:
        if dataset in tables and folds:
            out.append(AxisFolds(axis, dataset, design, folds, transfer))

    batch_design = f"per model: fit B <= {BATCH_FIT_MAX} of every curve, validate B >= {BATCH_TEST_MIN}"
    knee_design = "per model: fit each curve's pre-knee run from B = 1, validate its larger B"
    for axis, split, design in (
        ("batch", batch_split, batch_design),
        ("batch-knee", knee_split, knee_design),
    ):
        for name in ("memgap-online", "memgap-offline", *ENGINES):
            if name in POOLED:
                add(axis, name, design.replace("per model", "all models in one fit"),
                    _one("all models", *split(tables[name])) if name in tables else [])  # fmt: skip
            elif name in tables:
                add(axis, name, design, _per_model(tables[name], split))
    if "llmib" in tables:
        folds = [f for label, d in _device_groups(lib) for f in _per_model(d, knee_split, f"{label} ")]
        add("batch-knee", "llmib", knee_design + " (one device's TP degree)", folds)
    for name in ENGINES:
        if name in tables:
            t = tables[name]
            add("input", name, "per model: fit the shorter ILs, validate the longest IL (every OL)",
                _per_model(t, _largest_len("input_len")))  # fmt: skip
            add("output", name, "per model: fit the shorter OLs, validate the longest OL (every IL)",
                _per_model(t, _largest_len("output_len")))  # fmt: skip
    if "memgap-online" in tables:
        add("output", "memgap-online", "per model: fit OL 130-390, validate OL 520",
            _per_model(on, _largest_len("output_len")))  # fmt: skip
    if "llmib" in tables:
        add(
            "context",
            "llmib",
            "IL = OL, per device: fit L <= 256, validate L >= 512",
            context_scenario(lib).folds,
        )
    for name in ("memgap-online", "memgap-offline", *ENGINES):
        if name in tables:
            tr, te = largest_split(tables[name])
            add(
                "model",
                name,
                "fit the smaller models, validate the largest",
                _one(str(te["model"].iloc[0]), tr, te),
            )
    if "llmib" in tables:
        folds = []
        for label, d in _device_groups(lib):
            if d["model"].nunique() > 1:
                tr, te = largest_split(d)
                folds += _one(f"{label} {te['model'].iloc[0]}", tr, te)
        add("model", "llmib", "per device: fit the smaller models, validate the largest", folds)
        add("device", "llmib", "fit one device, transfer the parameter file, validate the other (both ways)",
            gpu_transfer_scenario(lib).folds, transfer=True)  # fmt: skip
        add("tp", "llmib", "per device: fit the one-device TP degree, validate the larger ones",
            tp_scenario(lib).folds)  # fmt: skip
    if COMPOSED in tables:
        _add_composed(tables[COMPOSED], add, batch_design, knee_design)
    for name in (COMPOSED_FP8, COMPOSED_FP4):
        if name in tables:
            _add_composed(tables[name], add, batch_design, knee_design, name)
    if COMPOSED_MOE in tables:
        _add_composed(tables[COMPOSED_MOE], add, batch_design, knee_design, COMPOSED_MOE, comp)
    order = {a: i for i, a in enumerate(AXES)}
    return sorted(out, key=lambda a: order[a.axis])


def _add_composed(t: pd.DataFrame, add: Callable[..., None], batch_design: str, knee_design: str,
                  dataset: str = COMPOSED, dense: pd.DataFrame | None = None) -> None:  # fmt: skip
    """The kernel-composed curves' folds (module docstring) through `build_axis_folds`' `add`: the TP-1 rows on
    every axis but ``tp``, which fits the smallest TP degree of each GPU and model and validates the larger. With
    `dense` (the mixture of experts' `dataset`), the model folds fit each GPU's dense TP-1 curves and validate
    `t`'s, and the device folds fit on `MOE_DEVICE_SOURCE`."""
    every_tp, t = t, t[t["tensor_parallel"] == 1]
    per_gpu = list(t.groupby("gpu", sort=True))
    for axis, split, design in (
        ("batch", batch_split, batch_design),
        ("batch-knee", knee_split, knee_design),
        (
            "input",
            _largest_len("input_len"),
            "per GPU and model: fit the shorter ILs, validate the longest IL",
        ),
        (
            "output",
            _largest_len("output_len"),
            "per GPU and model: fit the shorter OLs, validate the longest OL",
        ),
    ):
        add(axis, dataset, design.replace("per model", "per GPU and model"),
            [f for gpu, d in per_gpu for f in _per_model(d, split, f"{gpu} ")])  # fmt: skip
    folds = []
    if dense is None:
        for gpu, d in per_gpu:
            if d["model"].nunique() > 1:
                tr, te = largest_split(d)
                folds += _one(f"{gpu} {te['model'].iloc[0]}", tr, te)
        add("model", dataset, "per GPU: fit the smaller models, validate the largest", folds)
    else:
        one = dense[dense["tensor_parallel"] == 1]
        for gpu, d in per_gpu:
            for model, g in d.groupby("model", sort=True):
                folds += _one(f"{gpu} dense -> {model}", one[one["gpu"] == gpu], g)
        add("model", dataset, "per GPU: fit the dense models' curves, validate the mixture of experts", folds)
    source = DEVICE_SOURCE if dense is None else MOE_DEVICE_SOURCE
    src = t[t["gpu"] == source]
    folds = [f for gpu, d in per_gpu if gpu != source for model, g in d.groupby("model", sort=True)
             for f in _one(f"{model} {source} -> {gpu}", src[src["model"] == model], g)]  # fmt: skip
    add("device", dataset, f"per model: fit on the {source}, transfer the parameter file, validate another GPU",
        folds, transfer=True)  # fmt: skip
    folds = []
    for (gpu_name, model_name), d in every_tp.groupby(["gpu", "model"], sort=True):
        tp = d["tensor_parallel"]
        low, more = int(tp.min()), sorted({int(x) for x in tp[tp > tp.min()]})
        label = f"{gpu_name} {model_name} TP {low} -> {'/'.join(map(str, more))}"
        folds += _one(label, d[tp == low], d[tp > low])
    add("tp", dataset, "per GPU and model: fit the smallest TP degree (1 where the weights fit one GPU), validate the "
        "larger ones", folds)  # fmt: skip


def fold_rows(axes: list[AxisFolds]) -> pd.DataFrame:
    """One row per fold: axis, dataset, fold, n_train, n_test (the protocol's design, for tables and tests)."""
    rows = [{"axis": a.axis, "dataset": a.dataset, "fold": f.label, "n_train": len(f.train), "n_test": len(f.test)}
            for a in axes for f in a.folds]  # fmt: skip
    return pd.DataFrame(rows, columns=["axis", "dataset", "fold", "n_train", "n_test"])
