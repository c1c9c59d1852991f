"""Kernel-composed curves: the extrapolation cross-validation's dataset on NVIDIA GPUs (``aic-composed``).

Each row is a static batch of B equal requests on one GPU, or on 2, 4 or 8 GPUs of one node with tensor
parallelism, whose E2E is composed, not measured end to end:
the measured vLLM kernel latencies of NVIDIA AIConfigurator's tables summed over the engine's steps (the prefill,
then OL - 1 decode steps; `slimlib.experiments.kernel_timing.composition`), plus vLLM's measured host work per
running sequence and decode step (`slimlib.model.terms.recommended.HOST_SEQUENCE_S`, Vidur's CPU profile), which
the kernels do not hold. The composition leaves out norms, activations, RoPE, sampling and launch gaps (not in the
tables), so it tests the model's GPU terms where no end-to-end data exist: the decode GEMMs' and attention's
shapes past the pre-knee batch sizes, at longer prompts and outputs, on a larger model, on another GPU and split
over more GPUs (each kernel at one GPU's share, plus the measured all-reduces).

The mixtures of experts (`COMPOSED_MOE_MODELS`: Mixtral-8x7B, 8 experts of width 14336, 2 per token, and
Qwen3-30B-A3B, 128 experts of width 768, 8 per token; their experts are the measured fused-MoE kernel) are a
dataset of their own, `COMPOSED_MOE`, so that its cells say how the model's expert terms extrapolate apart from the
dense models'. So are the dense models with FP8 weights (`COMPOSED_FP8`: vLLM's ``--quantization fp8``, per-tensor
scaled FP8 GEMMs, on the GPUs with FP8 tensor cores, `COMPOSED_FP8_GPUS`) and with NVFP4 weights (`COMPOSED_FP4`:
``--quantization modelopt_fp4``, FlashInfer's NVFP4 GEMMs, on the B200, the one GPU with FP4 tensor cores and
tables), KV cache and activations bf16: their cells say how the model's terms extrapolate at another weight
precision.

Design (`COMPOSED_GPUS` x the dense and MoE models, `COMPOSED_FP8_GPUS` and `COMPOSED_FP4_GPUS` x the dense models
at FP8 and FP4, each x
`COMPOSED_TP` x `COMPOSED_BATCHES` x `COMPOSED_LENGTHS`): a
configuration is kept where the model's weights leave each GPU a KV pool (vLLM's defaults,
`slimlib.model.serving.serving_config`) that holds all B requests at IL + OL tokens and B is at most
``max_num_seqs``, and where every kernel lies inside its measured grid (nothing is extrapolated); `composed_table`
says how many it left out and why.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.data.aiconfigurator import TP_DEGREES
from slimlib.errors import DataError
from slimlib.experiments.accuracy.fit_cache import read_table_entry, table_key, write_table_entry
from slimlib.experiments.accuracy.scenarios import COLUMNS
from slimlib.experiments.kernel_timing.composition import OutOfGridError, compose_kernels
from slimlib.experiments.workers import fork_map
from slimlib.model.memory import DEFAULT_BLOCK_SIZE
from slimlib.model.serving import serving_config
from slimlib.model.terms.recommended import HOST_SEQUENCE_S
from slimlib.registry.architectures import get_architecture

#: dataset names in the cross-validation's tables: the dense models' curves and the mixture of experts'
COMPOSED = "aic-composed"
COMPOSED_MOE = "aic-composed-moe"
COMPOSED_FP8 = "aic-composed-fp8"
COMPOSED_FP4 = "aic-composed-fp4"
#: registry GPUs whose kernel tables compose them (the composition resolves each one's AIConfigurator system)
COMPOSED_GPUS = ("a100-sxm-80gb", "h100-sxm", "h200-sxm", "b200-sxm-180gb")
#: dense GQA models whose attention shapes the tables measure, smallest first (the largest fits only a B200)
COMPOSED_MODELS = ("llama-3-8b", "qwen3-32b", "llama-3-70b")
#: mixtures of experts whose attention and fused-MoE kernel the tables measure (the dataset `COMPOSED_MOE`): few
#: wide experts and many narrow ones
COMPOSED_MOE_MODELS = ("mixtral-8x7b", "qwen3-30b-a3b")
#: GPUs whose FP8 GEMMs the tables measure, for the dense models' FP8 curves (`COMPOSED_FP8`)
COMPOSED_FP8_GPUS = ("h100-sxm", "h200-sxm", "b200-sxm-180gb")
#: the ``quantization`` value of the FP8 curves (vLLM's option) and the GEMM dtype the composition times for it
FP8 = "fp8"
#: GPUs whose NVFP4 GEMMs the tables measure, the ``quantization`` value of their FP4 curves (vLLM's option for
#: NVFP4 checkpoints) and the GEMM dtype the composition times for it
COMPOSED_FP4_GPUS = ("b200-sxm-180gb",)
FP4 = "modelopt_fp4"
GEMM_DTYPE = {"": "bfloat16", FP8: "fp8", FP4: "nvfp4"}
#: tensor-parallel degrees: every degree the kernel tables keep (GPUs of one node; all-reduces measured at 2, 4, 8)
COMPOSED_TP = TP_DEGREES
COMPOSED_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
#: (IL, OL): three prompt lengths at OL 128, two at OL 512
COMPOSED_LENGTHS = ((128, 128), (512, 128), (2048, 128), (128, 512), (512, 512))
#: the device axis: the GPU the parameter file is fitted on, and the models transferred from it (the mixtures of
#: experts': Mixtral's weights leave no KV pool on one H100)
DEVICE_SOURCE = "h100-sxm"
MOE_DEVICE_SOURCE = "h200-sxm"


def composed_configs() -> tuple[pd.DataFrame, dict[str, int]]:
    """The design's configurations whose B requests fit the default KV pool (module docstring), and the count left
    out per reason."""
    rows, left = [], {"no KV pool for the weights": 0, "KV pool or max_num_seqs below B": 0}
    designs = [
        (gpu, model, "") for gpu in COMPOSED_GPUS for model in (*COMPOSED_MODELS, *COMPOSED_MOE_MODELS)
    ]
    designs += [(gpu, model, FP8) for gpu in COMPOSED_FP8_GPUS for model in COMPOSED_MODELS]
    designs += [(gpu, model, FP4) for gpu in COMPOSED_FP4_GPUS for model in COMPOSED_MODELS]
    for gpu, model, quant in designs:
        for tp in COMPOSED_TP:
            sc = serving_config(get_architecture(model), gpu, tensor_parallel=tp, quantization=quant or None)
            n = len(COMPOSED_LENGTHS) * len(COMPOSED_BATCHES)
            if not sc.fits:
                left["no KV pool for the weights"] += n
                continue
            for il, ol in COMPOSED_LENGTHS:
                cap = float(np.asarray(sc.kv_token_capacity(il + ol)))
                for b in COMPOSED_BATCHES:
                    if b * (il + ol) > cap or b > sc.max_num_seqs:
                        left["KV pool or max_num_seqs below B"] += 1
                        continue
                    rows.append({"model": model, "gpu": gpu, "tensor_parallel": tp, "quantization": quant,
                                 "batch_size": float(b), "input_len": float(il), "output_len": float(ol)})  # fmt: skip
    return pd.DataFrame(rows), left


def composed_dataset(t: pd.DataFrame) -> np.ndarray:
    """Per row of a composed table (columns ``model``, optional ``quantization``), its dataset: `COMPOSED_MOE` for
    a mixture of experts (registry architecture), `COMPOSED_FP8` / `COMPOSED_FP4` for dense FP8 / FP4 weights,
    else `COMPOSED`."""
    if len(t) == 0:
        return np.full(0, COMPOSED)
    moe = t["model"].map(lambda m: get_architecture(str(m)).is_moe).to_numpy(dtype=bool)
    quant = t["quantization"].to_numpy() if "quantization" in t.columns else np.full(len(t), "")
    return np.select([moe, quant == FP8, quant == FP4], [COMPOSED_MOE, COMPOSED_FP8, COMPOSED_FP4], COMPOSED)


#: the composed table of this process, once made or read
_MEMO: list[tuple[pd.DataFrame, dict[str, int]]] = []


def composed_table(cache_dir: str | Path | None = None) -> tuple[pd.DataFrame, dict[str, int]]:
    """The kernel-composed curves in the scenario layout (static batch, no chunked prefill, no TTFT) with their
    ``tensor_parallel`` degree and weight ``quantization`` (empty: the checkpoint's bf16; `FP8`, `FP4`), and the
    configurations left out per reason (`composed_configs`, and those outside a measured kernel grid). Composed once
    per process, or read from `cache_dir` where an entry for this code and data is (and stored there when composed;
    `slimlib.experiments.accuracy.fit_cache`); each call returns its own copy."""
    key = table_key("composed curves") if cache_dir is not None else ""
    entry = read_table_entry(Path(cache_dir), key) if cache_dir is not None else None
    if not _MEMO:
        _MEMO.append(
            (entry[0], {str(k): int(v) for k, v in entry[1].items()})
            if entry is not None
            else _composed_table()
        )
    if cache_dir is not None and entry is None:
        write_table_entry(Path(cache_dir), key, _MEMO[0][0], _MEMO[0][1])
    table, left = _MEMO[0]
    return table.copy(), dict(left)


def _compose_curve(curve: pd.DataFrame, quantization: str) -> list[float | None]:
    """The kernel E2E of each row of one curve: the whole curve at once; where one of its rows lies outside a
    measured grid, row by row, None for those rows."""
    dtype = {"gemm_dtype": GEMM_DTYPE[quantization]}
    try:
        return [float(x) for x in compose_kernels(curve, **dtype)["e2e_s"].to_numpy()]
    except OutOfGridError:
        pass
    out: list[float | None] = []
    for i in range(len(curve)):
        try:
            out.append(float(compose_kernels(curve.iloc[[i]], **dtype)["e2e_s"].iloc[0]))
        except OutOfGridError:
            out.append(None)
    return out


def composed_curves_of(
    gpu: str, tensor_parallel: int | None = None, quantization: str | None = None
) -> pd.DataFrame:
    """The composed table's rows of one GPU (of one TP degree and weight precision where given: None, every one),
    composed on their own (the same values as `composed_table`'s rows, without composing the other GPUs)."""
    cfg, _ = composed_configs()
    keep = cfg["gpu"] == gpu
    if tensor_parallel is not None:
        keep &= cfg["tensor_parallel"] == tensor_parallel
    if quantization is not None:
        keep &= cfg["quantization"] == quantization
    if not keep.any():
        raise DataError(f"no kernel-composed configuration of {gpu} at TP {tensor_parallel or 'any'} "
                        f"{'any precision' if quantization is None else quantization or 'bf16'}")  # fmt: skip
    return _composed_table(cfg[keep].reset_index(drop=True))[0]


def _composed_table(cfg: pd.DataFrame | None = None) -> tuple[pd.DataFrame, dict[str, int]]:
    cfg, left = composed_configs() if cfg is None else (cfg, {})
    keys = ["gpu", "model", "tensor_parallel", "quantization", "input_len", "output_len"]
    curves = [(str(key[3]), curve) for key, curve in cfg.groupby(keys, sort=False)]
    e2e = fork_map(lambda i: _compose_curve(curves[i][1], curves[i][0]), len(curves))
    parts = []
    for (_, curve), values in zip(curves, e2e, strict=True):
        keep = [v is not None for v in values]
        parts.append(curve[keep].assign(kernel_e2e_s=[v for v in values if v is not None]))
    left["outside a measured kernel grid"] = sum(v is None for values in e2e for v in values)
    out = pd.concat(parts, ignore_index=True)
    out["e2e_s"] = out["kernel_e2e_s"] + (out["output_len"] - 1.0) * out["batch_size"] * HOST_SEQUENCE_S
    out["throughput_tok_s"] = out["batch_size"] * (out["input_len"] + out["output_len"]) / out["e2e_s"]
    out["mean_ttft_ms"] = np.nan
    out["mean_itl_ms"] = np.nan
    out["gpu_blocks"] = np.nan
    out["block_size"] = float(DEFAULT_BLOCK_SIZE)
    out["chunked_prefill"] = False  # the composition prefills the B prompts in one pass
    out["static_batch"] = True
    out["source"] = composed_dataset(out)
    fp8, fp4 = out["source"] == COMPOSED_FP8, out["source"] == COMPOSED_FP4
    out["curve"] = (
        out["model"] + " IL=" + out["input_len"].round().astype(int).astype(str)
        + " OL=" + out["output_len"].round().astype(int).astype(str)
        + np.where(out["tensor_parallel"] > 1, " TP=" + out["tensor_parallel"].astype(str), "")
        + np.where(fp8, " FP8", "") + np.where(fp4, " FP4", "")
    )  # fmt: skip
    out = out.sort_values(
        ["model", "tensor_parallel", "input_len", "output_len", "batch_size"], kind="mergesort"
    )
    return out.reindex(columns=[*COLUMNS, "tensor_parallel", "quantization"]).reset_index(drop=True), left
