"""Parser of NVIDIA AIConfigurator's measured vLLM kernel latencies (raw folder `aiconfigurator-kernels/`).

The raw folder holds Parquet tables copied, unmodified, from the wheel ``aiconfigurator_core-0.12.0`` (Apache-2.0;
see its PROVENANCE.md): per-kernel latencies of vLLM's own decode attention, prefill attention and GEMM kernels on
H100 SXM, H200 SXM (vLLM 0.24.0), A100 SXM (vLLM 0.14.0) and B200 (vLLM 0.24.0). `build_aic_tables` keeps what the
package uses and writes them as tidy tables:

- ``aic-decode-attention``: decode attention of the registry models' per-GPU (query heads, KV heads, head size)
  shapes at tensor parallelism `TP_DEGREES` (`rank_heads`), full attention (no sliding window), bf16
  activations, KV cache bf16 or fp8;
- ``aic-prefill-attention``: prefill (context) attention of the same shapes;
- ``aic-gemm``: dense bf16, fp8 (per-tensor scaled) and, on the B200, NVFP4 GEMMs on the (n, k) grid points that bracket the per-GPU
  projection, FFN and LM-head shapes (`model_gemm_shapes`) of the models whose decode attention is measured (all m),
  the dense ones' and the mixtures of experts' (`moe_gpu_architectures`: the GEMMs around their attention);
- ``aic-allreduce``: vLLM's custom all-reduce of bf16 messages over 2, 4 and 8 GPUs of one node, CUDA-graph and
  eager backends, by message size (elements);
- ``aic-systems``: the peak FLOP/s, bandwidth and capacity AIConfigurator's system YAML assumes per GPU.

Reading Parquet needs ``pyarrow``. Latencies are in ms, for one layer on one GPU.
"""

from __future__ import annotations

import bisect
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.data.markdown import count_table
from slimlib.errors import DataError
from slimlib.registry.architectures import architecture_names, get_architecture
from slimlib.registry.engine_models import ALL_ENGINE_MODELS
from slimlib.registry.gpus import get_gpu

AIC_NAME = "aiconfigurator-kernels"
WHEEL = "aiconfigurator_core-0.12.0-cp311-abi3-manylinux_2_28_x86_64.whl"
WHEEL_SHA256 = "aadc4aad0a00bf8a61c477c62bef43de479849c3aa0b1c3078068e08309eccc4"
SOURCE = (
    "ai-dynamo/aiconfigurator",
    f"wheel {WHEEL} (aiconfigurator-core 0.12.0), sha256 {WHEEL_SHA256}",
    "Apache-2.0",
    "NVIDIA AIConfigurator: measured per-kernel latencies of vLLM's attention and GEMM kernels (H100/H200 SXM "
    "vLLM 0.24.0, A100 SXM vLLM 0.14.0, B200 vLLM 0.24.0)",
)
SYS_DIR = "aiconfigurator_core/systems"


#: system -> (gpu name, vLLM version of the attention and GEMM tables, decode kernels, prefill kernels, GEMM
#: kernel per dtype). gpu names are the GPU registry's (`system_for_gpu` resolves any GPU name or alias).
SYSTEMS: dict[str, dict] = {
    "h100_sxm": dict(
        gpu="h100-sxm-80gb",
        version="0.24.0",
        decode=("vllm_flash_attn_fa3",),
        prefill=("vllm_flash_attn_fa3",),
        gemm={"bfloat16": "torch.nn.functional.linear", "fp8": "CutlassFP8ScaledMMLinearKernel"},
    ),
    "h200_sxm": dict(
        gpu="h200-sxm-141gb",
        version="0.24.0",
        decode=("vllm_flash_attn_fa3",),
        prefill=("vllm_flash_attn_fa3",),
        gemm={"bfloat16": "torch.nn.functional.linear", "fp8": "CutlassFP8ScaledMMLinearKernel"},
    ),
    "a100_sxm": dict(
        gpu="a100-sxm-80gb",
        version="0.14.0",
        decode=("vllm_flash_attn",),
        prefill=("vllm_flash_attn",),
        gemm={"bfloat16": "vllm_default"},
    ),
    "b200_sxm": dict(
        gpu="b200-sxm-180gb",
        version="0.24.0",
        decode=("vllm_flashinfer_trtllmdecode",),
        # vLLM 0.24.0 on B200 times a one-token prefill with the decode kernel and longer ones with the prefill one
        prefill=("vllm_flashinfer_trtllmdecode", "vllm_flashinfer_trtllmprefill"),
        gemm={
            "bfloat16": "torch.nn.functional.linear",
            "fp8": "CutlassFP8ScaledMMLinearKernel",
            "nvfp4": "FlashInferCuteDslNvFp4LinearKernel",
        },
    ),
}


def system_for_gpu(name: str) -> str:
    """The AIConfigurator system whose kernel tables cover GPU `name` (any registry name or alias, or a system
    name such as 'h100_sxm'); UnknownNameError for an unknown GPU, DataError for one without kernel tables."""
    gpu = get_gpu(name).name
    for system, spec in SYSTEMS.items():
        if spec["gpu"] == gpu:
            return system
    covered = ", ".join(f"{spec['gpu']} ({system})" for system, spec in SYSTEMS.items())
    raise DataError(f"GPU {gpu} has no AIConfigurator kernel tables; measured GPUs: {covered}")


_HEAD_COLS = ["system", "gpu", "device", "vllm_version", "kernel_source", "n_heads", "n_kv_heads", "head_dim",
              "kv_cache_dtype"]  # fmt: skip
DECODE_COLUMNS = [*_HEAD_COLS, "batch_size", "context", "latency_ms"]
PREFILL_COLUMNS = [*_HEAD_COLS, "batch_size", "input_len", "latency_ms"]
GEMM_COLUMNS = ["system", "gpu", "device", "vllm_version", "kernel_source", "gemm_dtype", "m", "n", "k",
                "latency_ms"]  # fmt: skip
ALLREDUCE_COLUMNS = ["system", "gpu", "device", "vllm_version", "kernel_source", "backend", "n_gpus",
                     "message_elements", "latency_ms"]  # fmt: skip
#: tensor-parallel degrees whose per-GPU attention and GEMM shapes the tables keep (the all-reduce's group sizes)
TP_DEGREES = (1, 2, 4, 8)
#: all-reduce kernels kept (vLLM's custom all-reduce; ``backend`` vllm_graph inside a CUDA graph, vllm_eager not)
ALLREDUCE_KERNELS = ("vLLM_custom_graph", "vLLM_custom_eager")
SYSTEM_COLUMNS = ["system", "gpu", "device", "vllm_version", "peak_bf16_flops", "peak_fp8_flops", "mem_bw",
                  "mem_bytes", "decode_kernel", "prefill_kernel", "gemm_kernels"]  # fmt: skip

_S, _I, _F = "string", "Int64", "float64"
_COMMON_DOCS = {
    "system": (_S, "AIConfigurator system name (h100_sxm, h200_sxm, a100_sxm, b200_sxm)"),
    "gpu": (_S, "GPU registry name (slimlib.registry.gpus)"),
    "device": (_S, "device name reported when measuring"),
    "vllm_version": (_S, "vLLM version whose kernels were timed"),
    "kernel_source": (_S, "kernel implementation timed (e.g. vllm_flash_attn_fa3)"),
}
#: the columns that say where a kernel-table row comes from (the MoE, MLA and linear-attention tables)
SOURCE_DOCS = {
    "system": (_S, "AIConfigurator system name (h100_sxm, h200_sxm, a100_sxm, b200_sxm)"),
    "gpu": (_S, "GPU registry name (slimlib.registry.gpus)"),
    "vllm_version": (_S, "vLLM version whose kernels were timed"),
    "kernel_source": (_S, "kernel implementation timed, as AIConfigurator names it"),
}
_ATT_DOCS = {
    "n_heads": (_I, "query heads on the GPU"),
    "n_kv_heads": (_I, "key/value heads on the GPU"),
    "head_dim": (_I, "head size d_h"),
    "kv_cache_dtype": (_S, "KV-cache dtype (bfloat16 or fp8); activations bf16"),
    "batch_size": (_I, "requests in the batch"),
}
COLUMN_DOCS: dict[str, dict[str, tuple[str, str]]] = {
    "aic-decode-attention": {
        **_COMMON_DOCS,
        **_ATT_DOCS,
        "context": (
            _I,
            "tokens already in each request's KV cache (AIConfigurator 'step'); one new token each",
        ),
        "latency_ms": (_F, "measured latency of one layer's decode attention, ms"),
    },
    "aic-prefill-attention": {
        **_COMMON_DOCS,
        **_ATT_DOCS,
        "input_len": (_I, "prompt tokens per request (AIConfigurator 'isl'), no prefix cached"),
        "latency_ms": (_F, "measured latency of one layer's prefill attention, ms"),
    },
    "aic-gemm": {
        **_COMMON_DOCS,
        "gemm_dtype": (_S, "bfloat16, fp8 (per-tensor scaled) or nvfp4 (B200)"),
        "m": (_I, "rows of the activation (tokens)"),
        "n": (_I, "output features"),
        "k": (_I, "input features"),
        "latency_ms": (_F, "measured latency of the GEMM, ms"),
    },
    "aic-allreduce": {
        **_COMMON_DOCS,
        "backend": (_S, "vllm_graph (captured in a CUDA graph) or vllm_eager"),
        "n_gpus": (_I, "GPUs in the all-reduce group (one node, NVLink)"),
        "message_elements": (_I, "bf16 elements all-reduced (each GPU's message)"),
        "latency_ms": (_F, "measured latency of one all-reduce, ms"),
    },
    "aic-systems": {
        "system": _COMMON_DOCS["system"],
        "gpu": _COMMON_DOCS["gpu"],
        "device": _COMMON_DOCS["device"],
        "vllm_version": _COMMON_DOCS["vllm_version"],
        "peak_bf16_flops": (_F, "dense bf16 tensor-core peak assumed by AIConfigurator, FLOP/s"),
        "peak_fp8_flops": (_F, "dense fp8 tensor-core peak assumed by AIConfigurator, FLOP/s"),
        "mem_bw": (_F, "peak DRAM bandwidth assumed by AIConfigurator, bytes/s"),
        "mem_bytes": (_I, "memory capacity, bytes"),
        "decode_kernel": (_S, "decode-attention kernel kept in aic-decode-attention"),
        "prefill_kernel": (_S, "prefill-attention kernel(s) kept, ';'-joined"),
        "gemm_kernels": (_S, "GEMM kernel kept per dtype, dtype=kernel ';'-joined"),
    },
}
TABLE_DOCS = {
    "aic-decode-attention": "Measured vLLM decode-attention latency per layer (NVIDIA AIConfigurator data) for "
    "the registry models' per-GPU head shapes at TP 1, 2, 4 and 8, by batch size and cached context.",
    "aic-prefill-attention": "Measured vLLM prefill-attention latency per layer (NVIDIA AIConfigurator data) for "
    "the registry models' per-GPU head shapes at TP 1, 2, 4 and 8, by batch size and input length.",
    "aic-gemm": "Measured vLLM dense GEMM latency (NVIDIA AIConfigurator data) on the (n, k) grid points that "
    "bracket the per-GPU projection, FFN and LM-head shapes (TP 1, 2, 4, 8) of the models with measured decode "
    "attention (for a mixture of experts the projections and LM head around its attention; its experts: aic-moe).",
    "aic-allreduce": "Measured vLLM custom all-reduce latency (NVIDIA AIConfigurator data), bf16, over 2, 4 and 8 "
    "GPUs of one node, CUDA-graph and eager backends, by message size.",
    "aic-systems": "Peaks AIConfigurator's system YAML assumes for each GPU of the kernel tables, and the vLLM "
    "version and kernels kept.",
}


def read_parquet(path: Path) -> pd.DataFrame:
    """A Parquet table of the mirror; DataError naming the file when it is missing or pyarrow is absent."""
    try:
        import pyarrow  # noqa: F401
    except ImportError as exc:  # pragma: no cover - pyarrow is a dependency
        raise DataError(f"{path}: reading Parquet needs pyarrow; `pip install pyarrow`") from exc
    if not path.is_file():
        raise DataError(f"{path}: missing; the {AIC_NAME} mirror is incomplete (see its PROVENANCE.md)")
    return pd.read_parquet(path)


def read_yaml(path: Path) -> dict:
    """A YAML file of the mirror (system spec, collection_meta.yaml); DataError naming it when missing."""
    import yaml

    if not path.is_file():
        raise DataError(f"{path}: missing; the {AIC_NAME} mirror is incomplete (see its PROVENANCE.md)")
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def require_file_columns(df: pd.DataFrame, cols: list[str], where: Path) -> None:
    """DataError naming `where` and the columns of `cols` that `df` lacks."""
    missing = [c for c in cols if c not in df.columns]
    if missing:
        raise DataError(f"{where}: columns {missing} missing; expected AIConfigurator's kernel-table layout")


def check_version(table_dir: Path, version: str) -> Path:
    """The collection_meta.yaml of `table_dir`, after checking its runtime.version is `version` (DataError)."""
    meta = read_yaml(table_dir / "collection_meta.yaml")
    got = str((meta.get("runtime") or {}).get("version"))
    if got != version:
        raise DataError(
            f"{table_dir / 'collection_meta.yaml'}: runtime.version {got!r}, expected {version!r}"
        )
    return table_dir / "collection_meta.yaml"


def dense_gpu_architectures() -> list:
    """Registry architectures the dense attention and GEMM tables cover: every one served on these GPUs (not the
    CPU engine's families, `slimlib.registry.engine_models`) except mixtures of experts and latent attention,
    whose kernels are the MoE and MLA tables' (`slimlib.data.aiconfigurator_moe`), and hybrids, whose
    linear-attention layers the composition does not time, and DeepSeek-V4 (compressed attention)."""
    archs = [get_architecture(n) for n in architecture_names() if n not in ALL_ENGINE_MODELS]
    return [
        a for a in archs if not a.is_moe and not a.is_mla and not a.n_linear_layers and not a.is_compressed
    ]


def moe_gpu_architectures() -> list:
    """Registry mixtures of experts without latent attention served on these GPUs: their attention and the
    projections and LM head around it are the dense tables' shapes, their routed experts the MoE table's
    (`slimlib.experiments.kernel_timing.composition`); hybrids left out, as in `dense_gpu_architectures`."""
    archs = [get_architecture(n) for n in architecture_names() if n not in ALL_ENGINE_MODELS]
    return [a for a in archs if a.is_moe and not a.is_mla and not a.n_linear_layers and not a.is_compressed]


def rank_heads(arch, tp: int = 1) -> tuple[int, int, int] | None:
    """(query heads, KV heads, head size) on each GPU of `arch` split over `tp` GPUs as vLLM splits it: the
    query heads evenly, the KV heads evenly or, with fewer KV heads than GPUs, one replicated head per GPU
    (`slimlib.model.memory.kv_replication`); None where vLLM refuses the split (heads not divisible)."""
    hq, hkv = arch.n_heads, arch.n_kv_heads
    if hq % tp or (hkv % tp and tp % hkv):
        return None
    return hq // tp, max(hkv // tp, 1), arch.head_dim


def registry_head_shapes(measured: set[tuple[int, int, int]] | None = None) -> list[tuple[int, int, int]]:
    """(query heads, KV heads, head size) of every `dense_gpu_architectures` entry at TP 1; with `measured` (the
    TP-1 shapes whose decode attention is measured), also the per-GPU `rank_heads` at every degree of `TP_DEGREES`
    of the models whose TP-1 shape is in it (the models the composition can time; the split shapes of
    multi-head models, whose TP-1 decode is not measured, are left out)."""
    archs = dense_gpu_architectures()
    shapes = {rank_heads(a) for a in archs}
    if measured is not None:
        shapes |= {rank_heads(a, p) for a in archs if rank_heads(a) in measured for p in TP_DEGREES}
    return sorted(s for s in shapes if s is not None)


def model_gemm_shapes(arch, tp: int = 1) -> dict[str, tuple[int, int]]:
    """(n, k) of each GEMM in one layer of `arch` on one of `tp` GPUs, plus the LM head: qkv, o, ffn_up (gate and
    up fused for a gated FFN), ffn_down (column- and row-parallel as vLLM splits them, `rank_heads`), lm_head
    (vocabulary-parallel: ceil(V / tp) rows of the embedding); a mixture of experts has no ffn_up or ffn_down (its
    experts are one fused-MoE kernel, each expert's FFN width split over the GPUs). DataError where vLLM refuses the
    split."""
    if not splittable(arch, tp):
        raise DataError(f"{arch.name}: {arch.n_heads} query / {arch.n_kv_heads} KV heads and FFN width "
                        f"{ffn_split_width(arch)} cannot be split over {tp} GPUs (vLLM needs them divisible)")  # fmt: skip
    hq, hkv, dh = rank_heads(arch, tp) or (0, 0, 0)  # set: splittable
    d = arch.hidden_size
    out = {"qkv": ((hq + 2 * hkv) * dh, d), "o": (d, hq * dh)}
    if not arch.is_moe:
        ffn = arch.ffn_size // tp
        out["ffn_up"] = ((2 if arch.ffn_kind == "gated" else 1) * ffn, d)
        out["ffn_down"] = (d, ffn)
    out["lm_head"] = (-(-arch.vocab_size // tp), d)
    return out


def ffn_split_width(arch) -> int:
    """The FFN width vLLM splits over the GPUs: each routed expert's for a mixture of experts."""
    return int(arch.moe_ffn_size if arch.is_moe else arch.ffn_size)


def splittable(arch, tp: int) -> bool:
    """Whether vLLM splits `arch`'s heads (`rank_heads`) and FFN width (`ffn_split_width`) over `tp` GPUs."""
    return rank_heads(arch, tp) is not None and ffn_split_width(arch) % tp == 0


def needed_gemm_shapes(archs, degrees=(1,)) -> list[tuple[int, int]]:
    """The (n, k) of every per-GPU GEMM (`model_gemm_shapes`) of `archs` at the TP `degrees` vLLM can split them
    over."""
    return sorted(
        {nk for a in archs for p in degrees if splittable(a, p) for nk in model_gemm_shapes(a, p).values()}
    )


def gemm_grid_pairs(needed, ngrid: list[int], kgrid: list[int]) -> set[tuple[int, int]]:
    """The measured (n, k) grid points that bracket each shape of `needed` (`_bracket`, the composition's
    interpolation corners)."""
    pairs = {(n2, k2) for n, k in needed for n2 in _bracket(ngrid, n) for k2 in _bracket(kgrid, k)}
    return {(n, k) for n, k in pairs if n in ngrid and k in kgrid}


def _bracket(grid: list[int], v: int) -> list[int]:
    """Grid points bracketing `v` (the point itself when on the grid); the largest point when `v` is above it
    (the composition times such a GEMM as blocks of the largest n)."""
    if v in grid:
        return [v]
    i = bisect.bisect_left(grid, v)
    if i == 0:
        return [grid[0]]
    if i == len(grid):
        rest = v % grid[-1]
        return [grid[-1], *(_bracket(grid, rest) if rest else [])]
    return [grid[i - 1], grid[i]]


def _keep_attention(
    df: pd.DataFrame, kernels: tuple[str, ...], shapes: list[tuple[int, int, int]], where: Path
):
    require_file_columns(df, ["kernel_source", "num_heads", "num_key_value_heads", "head_dim", "attn_dtype", "kv_cache_dtype",
                  "beam_width", "batch_size", "isl", "step", "latency"], where)  # fmt: skip
    keep = df["kernel_source"].isin(kernels) & (df["attn_dtype"] == "bfloat16") & (df["beam_width"] == 1)
    keep &= df["kv_cache_dtype"].isin(["bfloat16", "fp8"])
    if "window_size" in df.columns:
        keep &= df["window_size"] == 0
    key = list(zip(df["num_heads"], df["num_key_value_heads"], df["head_dim"], strict=True))
    keep &= pd.Series([k in set(shapes) for k in key], index=df.index)
    out = df[keep]
    if not (out["latency"] > 0).all():
        bad = out[~(out["latency"] > 0)].index[0]
        raise DataError(
            f"{where}: row {bad}: latency {out.loc[bad, 'latency']!r} is not a positive number (ms)"
        )
    return out


def _dedupe(df: pd.DataFrame, keys: list[str], where: Path) -> pd.DataFrame:
    dup = df.duplicated(keys, keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        raise DataError(f"{where}: several latencies for {dict(first[keys])}; expected one per point")
    return df.sort_values(keys, kind="mergesort").reset_index(drop=True)


def _read_system_table(
    sysdir: Path, system: str, kind: str, name: str, files: list[Path], columns: list[str]
) -> tuple[Path, pd.DataFrame]:
    """The Parquet table `name` of `system`'s `kind` folder at its vLLM version (`SYSTEMS`), after checking the
    folder's version and the table's `columns`; the files read are appended to `files`."""
    folder = sysdir / "data" / system / kind / "vllm" / SYSTEMS[system]["version"]
    files.append(check_version(folder, SYSTEMS[system]["version"]))
    path = folder / name
    raw = read_parquet(path)
    files.append(path)
    require_file_columns(raw, columns, path)
    return path, raw


def _measured_tp1_decode(sysdir: Path) -> tuple[set[tuple[int, int, int]], dict[Path, pd.DataFrame]]:
    """The TP-1 registry head shapes with a measured decode attention on some system (kernels of `SYSTEMS`), and
    the decode tables read for it (by path, so that `build_aic_tables` reads each once)."""
    tp1 = registry_head_shapes()
    out: set[tuple[int, int, int]] = set()
    raws: dict[Path, pd.DataFrame] = {}
    for system, spec in sorted(SYSTEMS.items()):
        path = (
            sysdir
            / "data"
            / system
            / "attention"
            / "vllm"
            / spec["version"]
            / "generation_attention_perf.parquet"
        )
        raws[path] = read_parquet(path)
        sel = _keep_attention(raws[path], spec["decode"], tp1, path)
        out |= set(zip(sel["num_heads"], sel["num_key_value_heads"], sel["head_dim"], strict=True))
    return {(int(a), int(b), int(c)) for a, b, c in out}, raws


def build_aic_tables(root: str | Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """The aic-* tables from the raw folder `root` (aiconfigurator-kernels/), and the raw files read."""
    root = Path(root)
    sysdir = root / SYS_DIR
    if not sysdir.is_dir():
        raise DataError(f"{root}: no {SYS_DIR}/ here; expected the {AIC_NAME} mirror (see its PROVENANCE.md)")
    files: list[Path] = [root / "PROVENANCE.md", root / "aiconfigurator_core-0.12.0.dist-info" / "METADATA"]
    for f in files:
        if not f.is_file():
            raise DataError(f"{f}: missing; the {AIC_NAME} mirror is incomplete")
    measured_tp1, decode_raws = _measured_tp1_decode(sysdir)
    shapes = registry_head_shapes(measured_tp1)
    dec_parts: list[pd.DataFrame] = []
    pre_parts: list[pd.DataFrame] = []
    gemm_parts: list[pd.DataFrame] = []
    systems = []
    measured_shapes: set[tuple[int, int, int]] = set()
    for system in sorted(SYSTEMS):
        spec = SYSTEMS[system]
        ver = spec["version"]
        yml = sysdir / f"{system}.yaml"
        gpu_spec = (read_yaml(yml) or {}).get("gpu") or {}
        for key in ("mem_bw", "bfloat16_tc_flops", "mem_capacity"):
            if key not in gpu_spec:
                raise DataError(f"{yml}: gpu.{key} missing")
        files.append(yml)
        att_dir = sysdir / "data" / system / "attention" / "vllm" / ver
        files.append(check_version(att_dir, ver))
        device = None
        for fname, kernels, parts, length in (
            ("generation_attention_perf.parquet", spec["decode"], dec_parts, "context"),
            ("context_attention_perf.parquet", spec["prefill"], pre_parts, "input_len"),
        ):
            path = att_dir / fname
            raw = decode_raws[path] if path in decode_raws else read_parquet(path)
            files.append(path)
            sel = _keep_attention(raw, kernels, shapes, path)
            if len(sel) == 0:
                raise DataError(f"{path}: no rows of kernels {kernels} for the registry head shapes")
            device = str(sel["device"].iloc[0])
            t = pd.DataFrame({
                "system": system, "gpu": spec["gpu"], "device": sel["device"].astype(str),
                "vllm_version": sel["version"].astype(str), "kernel_source": sel["kernel_source"].astype(str),
                "n_heads": sel["num_heads"], "n_kv_heads": sel["num_key_value_heads"], "head_dim": sel["head_dim"],
                "kv_cache_dtype": sel["kv_cache_dtype"].astype(str), "batch_size": sel["batch_size"],
                length: sel["step"] if length == "context" else sel["isl"], "latency_ms": sel["latency"],
            })  # fmt: skip
            if (t["vllm_version"] != ver).any():
                raise DataError(f"{path}: version column differs from {ver}")
            keys = ["n_heads", "n_kv_heads", "head_dim", "kv_cache_dtype", "batch_size", length]
            parts.append(_dedupe(t, keys, path))
            if length == "context":
                measured_shapes |= set(zip(t["n_heads"], t["n_kv_heads"], t["head_dim"], strict=True))
        systems.append({
            "system": system, "gpu": spec["gpu"], "device": device, "vllm_version": ver,
            "peak_bf16_flops": float(gpu_spec["bfloat16_tc_flops"]),
            "peak_fp8_flops": float(gpu_spec.get("fp8_tc_flops", np.nan)), "mem_bw": float(gpu_spec["mem_bw"]),
            "mem_bytes": int(gpu_spec["mem_capacity"]), "decode_kernel": ";".join(spec["decode"]),
            "prefill_kernel": ";".join(spec["prefill"]),
            "gemm_kernels": ";".join(f"{k}={v}" for k, v in sorted(spec["gemm"].items())),
        })  # fmt: skip
    # GEMM (n, k) needed by the models whose decode attention is measured on some GPU (dense, and the GEMMs around a
    # mixture of experts' attention)
    archs = [*dense_gpu_architectures(), *moe_gpu_architectures()]
    archs = [a for a in archs if (a.n_heads, a.n_kv_heads, a.head_dim) in measured_shapes]
    needed = needed_gemm_shapes(archs, TP_DEGREES)
    for system in sorted(SYSTEMS):
        spec = SYSTEMS[system]
        path, raw = _read_system_table(sysdir, system, "gemm", "gemm_perf.parquet", files,
                                       ["kernel_source", "gemm_dtype", "m", "n", "k", "latency", "device", "version"])  # fmt: skip
        for dtype, kernel in sorted(spec["gemm"].items()):
            g = raw[(raw["gemm_dtype"] == dtype) & (raw["kernel_source"] == kernel)]
            if len(g) == 0:
                raise DataError(f"{path}: no {dtype} rows of kernel {kernel}")
            ngrid, kgrid = sorted(int(v) for v in g["n"].unique()), sorted(int(v) for v in g["k"].unique())
            pairs = gemm_grid_pairs(needed, ngrid, kgrid)
            idx = pd.MultiIndex.from_arrays([g["n"], g["k"]])
            g = g[idx.isin(list(pairs))]
            if not (g["latency"] > 0).all():
                raise DataError(f"{path}: a {dtype} GEMM latency is not a positive number (ms)")
            t = pd.DataFrame({
                "system": system, "gpu": spec["gpu"], "device": g["device"].astype(str),
                "vllm_version": g["version"].astype(str), "kernel_source": g["kernel_source"].astype(str),
                "gemm_dtype": dtype, "m": g["m"], "n": g["n"], "k": g["k"], "latency_ms": g["latency"],
            })  # fmt: skip
            gemm_parts.append(_dedupe(t, ["m", "n", "k"], path))
    ar_parts = []
    for system in sorted(SYSTEMS):
        spec = SYSTEMS[system]
        path, raw = _read_system_table(sysdir, system, "comm", "custom_allreduce_perf.parquet", files,
                                       ["kernel_source", "allreduce_dtype", "num_gpus", "message_size", "latency",
                                        "backend", "device", "version"])  # fmt: skip
        g = raw[raw["kernel_source"].isin(ALLREDUCE_KERNELS) & (raw["allreduce_dtype"] == "bfloat16")]
        if len(g) == 0:
            raise DataError(f"{path}: no bf16 rows of kernels {ALLREDUCE_KERNELS}")
        if not (g["latency"] > 0).all():
            raise DataError(f"{path}: an all-reduce latency is not a positive number (ms)")
        t = pd.DataFrame({
            "system": system, "gpu": spec["gpu"], "device": g["device"].astype(str),
            "vllm_version": g["version"].astype(str), "kernel_source": g["kernel_source"].astype(str),
            "backend": g["backend"].astype(str), "n_gpus": g["num_gpus"], "message_elements": g["message_size"],
            "latency_ms": g["latency"],
        })  # fmt: skip
        if (t["vllm_version"] != spec["version"]).any():
            raise DataError(f"{path}: version column differs from {spec['version']}")
        ar_parts.append(_dedupe(t, ["backend", "n_gpus", "message_elements"], path))
    tables = {
        "aic-decode-attention": pd.concat(dec_parts, ignore_index=True)[DECODE_COLUMNS],
        "aic-prefill-attention": pd.concat(pre_parts, ignore_index=True)[PREFILL_COLUMNS],
        "aic-gemm": pd.concat(gemm_parts, ignore_index=True)[GEMM_COLUMNS],
        "aic-allreduce": pd.concat(ar_parts, ignore_index=True)[ALLREDUCE_COLUMNS],
        "aic-systems": pd.DataFrame(systems, columns=SYSTEM_COLUMNS),
    }
    return tables, files


def readme_section(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Lines of data/README.md on the aic-* tables: source wheel, what is kept, coverage, caveats."""
    systems = tables["aic-systems"]
    lines = [
        "## NVIDIA AIConfigurator kernel timings (aic-* tables)",
        "",
        f"From `{AIC_NAME}/` (copied unmodified from the wheel `{WHEEL}`, sha256 `{WHEEL_SHA256}`; Apache-2.0;",
        "attribute NVIDIA AIConfigurator). Measured latencies of vLLM's own kernels, one layer on one GPU; timings",
        "only (no hardware counters). Kept: full-attention (no sliding window) bf16 decode and prefill attention",
        "of the registry models' per-GPU head shapes at TP 1, 2, 4 and 8 (KV cache bf16 or fp8), dense bf16 / fp8",
        "GEMMs on the (n, k) grid points bracketing those models' per-GPU shapes, and vLLM's custom all-reduce",
        "(bf16, 2-8 GPUs, CUDA-graph and eager). The Parquet files read are in raw_manifest.csv with their",
        "sha256. Reading them needs `pyarrow`.",
        "",
        "| system | GPU | device | vLLM | decode kernel | prefill kernel(s) | bf16 peak TFLOP/s | bandwidth TB/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in systems.itertuples(index=False):
        lines.append(f"| {r.system} | {r.gpu} | {r.device} | {r.vllm_version} | {r.decode_kernel} | "
                     f"{r.prefill_kernel} | {r.peak_bf16_flops / 1e12:g} | {r.mem_bw / 1e12:g} |")  # fmt: skip
    lines += ["", "aic-decode-attention by system and head shape:", ""]
    lines.append(count_table(tables["aic-decode-attention"], ["system", "n_heads", "n_kv_heads", "head_dim"]))
    lines += ["aic-gemm by system and dtype:", ""]
    lines.append(count_table(tables["aic-gemm"], ["system", "gemm_dtype"]))
    lines += ["aic-allreduce by system and backend:", ""]
    lines.append(count_table(tables["aic-allreduce"], ["system", "vllm_version", "backend"]))
    lines += [
        "Coverage: decode attention is measured for at most 8 KV heads, so multi-head-attention models (OPT,",
        "Llama-2) and 28-head Qwen2-7B have no decode-attention rows; Mistral-7B, Llama-3-8B and Granite-8B",
        "(32 query / 8 KV heads, head size 128) and the 64/8 70B-class shapes are covered, and so are their",
        "per-GPU shapes at TP 2, 4 and 8 (16/4, 8/2, 4/1 and 32/4, 16/2, 8/1). Large batch sizes at the",
        "longest contexts were not measured (out of memory). The peaks in aic-systems are AIConfigurator's; the",
        "GPU registry (`slim gpus`) holds the data-sheet figures with their sources.",
        "",
    ]
    return lines
