"""Parser of AIConfigurator's tables of the 2026 layer kinds the model reads (raw folder `aiconfigurator-kernels/`,
the same wheel as `slimlib.data.aiconfigurator`). `build_layer_tables` writes, from vLLM 0.24.0 on H100 SXM, H200
SXM and B200 (one layer on one GPU):

- ``aic-gdn``: Gated DeltaNet decode kernels (``linear_attention/.../gdn_perf.parquet``), the generation phase only:
  the fused recurrent state update (``fused_recurrent_gated_delta_rule_packed_decode``) and the causal-convolution
  update (``causal_conv1d_update``), by batch size and the Qwen3.5 family's head shapes;
- ``aic-gdn-prefill``: the same table's context phase: the chunked recurrence (``chunk_gated_delta_rule_flashinfer``)
  and the causal convolution (``causal_conv1d_fn``) over a batch of prompts, by batch size, prompt length and head
  shape;
- ``aic-kda``: the same for Kimi Delta Attention (``kda/.../kda_perf.parquet``, Kimi-K3's linear attention, a vLLM
  development build): the convolution update and both recurrent decode kernels vLLM has (``fused_kda_decode`` and
  ``fused_recurrent_kda_packed_decode``), by batch size and Kimi-K3's heads at tensor parallel 1 to 8;
- ``aic-dsa``: the DeepSeek sparse attention decode module (``sparse_attention/.../dsa_generation_module_perf``:
  projections, lightning indexer, top-k selection and sparse latent attention), DeepSeek-V3.2 and GLM-5 at one GPU's
  heads (tensor parallel 1), bf16 GEMMs, by batch, cached context and KV dtype. The other head counts (tensor-parallel
  splits), the fp8/fp4 GEMM rows (the same attention beside other projection kernels) and the context phase are not
  kept (`DSA_HEADS`, `DSA_GEMM`); the README says so;
- ``aic-dsv4``: DeepSeek-V4's compressed attention decode modules (``sparse_attention/.../dsv4_csa_generation_module``
  and ``dsv4_hca_generation_module``: projections, compressor, indexer and selection (CSA), FlashMLA's sparse
  attention over the window and the compressed entries), DeepSeek-V4-Flash and -Pro (SGLang's FP8 copies; on B200
  DeepSeek's Pro) at one GPU's heads (tensor parallel 1), fp8 KV, by compression ratio, batch and cached context. The tensor-parallel
  splits (`DSV4_HEADS`) and the context phase are not kept;
- ``aic-msa``: MiniMax-M3's block-sparse attention ("MiniMax Sparse Attention") modules (``msa/.../
  msa_generation_module_perf`` and ``msa_context_module_perf``: projections, the K-only indexer, block selection
  and the sparse attention; Triton on Hopper, ``fmha_sm100`` on B200), both phases, at one GPU's 64 query heads
  (tensor parallel 1), bf16 GEMMs, bf16 and fp8 KV, by batch, prompt length and cached context, with the module's
  head shapes from the wheel's MiniMax-M3 ``config.json``. The other head counts and the fp8-block / NVFP4 GEMM
  rows are not kept (`MSA_HEADS`, `DSA_GEMM`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from slimlib.data.aiconfigurator import (
    AIC_NAME,
    SOURCE_DOCS,
    SYS_DIR,
    SYSTEMS,
    check_version,
    read_parquet,
    require_file_columns,
)
from slimlib.errors import DataError
from slimlib.registry.architectures import architecture_from_config

#: systems and vLLM version of the Gated DeltaNet tables
GDN_SYSTEMS = ("b200_sxm", "h100_sxm", "h200_sxm")
GDN_VERSION = "0.24.0"
#: the Gated DeltaNet prefill kernels: the chunked recurrence and the causal convolution over the prompt
GDN_PREFILL_KERNELS = ("chunk_gated_delta_rule_flashinfer", "causal_conv1d_fn")
#: vLLM build of the Kimi Delta Attention tables (a development build: rows carry it with a local suffix)
KDA_VERSION = "0.1.dev19262"
_RAW_COLUMNS = ["version", "kernel_source", "phase", "batch_size", "seq_len", "num_tokens", "d_model", "d_conv",
                "num_k_heads", "head_k_dim", "num_v_heads", "head_v_dim", "model_name", "latency"]  # fmt: skip

#: query heads (tensor parallel 1) and GEMM type of the aic-dsa rows kept, per model
DSA_HEADS = {"deepseek-ai/DeepSeek-V3.2": 128, "zai-org/GLM-5": 64}
DSA_GEMM = "bfloat16"
_DSA_COLUMNS = ["version", "kernel_source", "model", "mla_dtype", "kv_cache_dtype", "gemm_type", "num_heads",
                "batch_size", "isl", "tp_size", "step", "latency"]  # fmt: skip
#: query heads (tensor parallel 1) of the aic-dsv4 rows kept, per model, and the modules' compression ratios
DSV4_HEADS = {"sgl-project/DeepSeek-V4-Flash-FP8": 64, "sgl-project/DeepSeek-V4-Pro-FP8": 128,
              "deepseek-ai/DeepSeek-V4-Pro": 128}  # fmt: skip
DSV4_MODULES = {"csa": 4, "hca": 128}
#: the MiniMax-M3 module's model, query heads kept (one GPU's: tensor parallel 1) and the wheel's config of its shapes
MSA_MODEL = "MiniMaxAI/MiniMax-M3"
MSA_HEADS = {MSA_MODEL: 64}
MSA_CONFIG = "aiconfigurator_core/model_configs/MiniMaxAI--MiniMax-M3_config.json"
#: the module tables' phases: AIConfigurator's file stem -> the aic-msa phase
MSA_PHASES = {"msa_generation_module_perf": "generation", "msa_context_module_perf": "context"}
#: the mHC table's architecture and its ops (vLLM 0.24.0's TileLang kernels)
MHC_ARCHITECTURE = "DeepseekV4ForCausalLM"
MHC_OPS = ("pre", "post")
_MHC_COLUMNS = ["version", "kernel_source", "op_name", "architecture", "num_tokens", "num_sites", "hc_mult",
                "hidden_size", "sinkhorn_iters", "latency"]  # fmt: skip

_S, _I, _F = "string", "Int64", "float64"
TABLE_DOCS = {
    "aic-gdn": (
        "NVIDIA AIConfigurator: vLLM 0.24.0's Gated DeltaNet decode kernels (one layer, one GPU, bf16 activations): "
        "the recurrent state update and the convolution update, by batch size and head shape "
        "(slimlib.data.aiconfigurator_layers)."
    ),
    "aic-gdn-prefill": (
        "NVIDIA AIConfigurator: vLLM 0.24.0's Gated DeltaNet prefill kernels (one layer, one GPU): "
        "the chunked recurrence and the causal convolution over a batch of prompts, by batch size, prompt length "
        "and head shape (slimlib.data.aiconfigurator_layers)."
    ),
    "aic-kda": (
        "NVIDIA AIConfigurator: a vLLM development build's (0.1.dev19262) Kimi Delta Attention decode kernels (one "
        "layer, one GPU): the convolution update and both recurrent decode kernels, by batch size and head count "
        "(slimlib.data.aiconfigurator_layers)."
    ),
    "aic-dsa": (
        "NVIDIA AIConfigurator: vLLM 0.24.0's DeepSeek sparse attention decode module (one layer, one GPU, tensor "
        "parallel 1, bf16 GEMMs) of DeepSeek-V3.2 and GLM-5, by batch, cached context and KV dtype "
        "(slimlib.data.aiconfigurator_layers)."
    ),
    "aic-dsv4": (
        "NVIDIA AIConfigurator: vLLM 0.24.0's DeepSeek-V4 compressed attention decode modules (CSA, HCA; one layer, "
        "one GPU, tensor parallel 1, fp8 KV) of DeepSeek-V4-Flash and -Pro, by batch and cached context "
        "(slimlib.data.aiconfigurator_layers)."
    ),
    "aic-msa": (
        "NVIDIA AIConfigurator: vLLM 0.24.0's MiniMax-M3 block-sparse attention modules (one layer, one GPU, tensor "
        "parallel 1, bf16 GEMMs), decode and prompt, by batch, prompt length, cached context and KV dtype "
        "(slimlib.data.aiconfigurator_layers)."
    ),
    "aic-mhc": (
        "NVIDIA AIConfigurator: vLLM 0.24.0's DeepSeek-V4 manifold-constrained hyper-connection kernels (mhc_pre, "
        "mhc_post; one layer's two sites, one GPU), by tokens in the step and hidden size "
        "(slimlib.data.aiconfigurator_layers)."
    ),
}
_LINEAR_DOCS = {
    **SOURCE_DOCS,
    "model": (_S, "model whose shapes these are (Hugging Face id)"),
    "batch_size": (_I, "sequences in the decode step (one token each)"),
    "hidden_size": (_I, "model hidden size"),
    "conv_kernel": (_I, "causal convolution taps"),
    "key_heads": (_I, "linear-attention query/key heads on the GPU"),
    "key_head_dim": (_I, "query/key head width"),
    "value_heads": (_I, "linear-attention value heads on the GPU (one recurrent state each)"),
    "value_head_dim": (_I, "value head width"),
    "latency_ms": (_F, "kernel latency, ms"),
}
_PREFILL_DOCS = {
    **SOURCE_DOCS,
    "model": _LINEAR_DOCS["model"],
    "batch_size": (_I, "prompts in the step"),
    "input_len": (_I, "tokens per prompt (AIConfigurator 'seq_len')"),
    **{k: v for k, v in _LINEAR_DOCS.items() if k not in SOURCE_DOCS and k not in ("model", "batch_size")},
}
COLUMN_DOCS: dict[str, dict[str, tuple[str, str]]] = {
    "aic-kda": dict(_LINEAR_DOCS),
    "aic-gdn": dict(_LINEAR_DOCS),
    "aic-gdn-prefill": _PREFILL_DOCS,
    "aic-dsa": {
        **SOURCE_DOCS,
        "model": (_S, "model whose module was timed (Hugging Face id)"),
        "kv_cache_dtype": (_S, "latent KV-cache dtype (bfloat16 or fp8); the indexer's keys are fp8"),
        "n_heads": (_I, "query heads on the GPU"),
        "batch_size": (_I, "sequences in the decode step (one token each)"),
        "context": (_I, "tokens already cached per sequence (AIConfigurator 'step')"),
        "latency_ms": (
            _F,
            "measured latency of one layer's module (projections, indexer, selection, attention), ms",
        ),
    },
    "aic-dsv4": {
        **SOURCE_DOCS,
        "model": (_S, "model whose module was timed (Hugging Face id)"),
        "compress_ratio": (_I, "tokens per compressed entry: 4 (CSA, with its indexer) or 128 (HCA)"),
        "n_heads": (_I, "query heads on the GPU"),
        "batch_size": (_I, "sequences in the decode step (one token each)"),
        "context": (_I, "tokens already cached per sequence (AIConfigurator 'step')"),
        "latency_ms": (_F, "measured latency of one layer's module, ms"),
    },
    "aic-msa": {
        **SOURCE_DOCS,
        "model": (_S, "model whose module was timed (Hugging Face id)"),
        "phase": (_S, "generation (one decode token per sequence) or context (the prompt)"),
        "kv_cache_dtype": (_S, "K/V cache dtype (bfloat16 or fp8)"),
        "tensor_parallel": (_I, "tensor-parallel size of the module (AIConfigurator 'tp_size')"),
        "n_heads": (_I, "query heads on the GPU"),
        "kv_heads": (_I, "K/V heads on the GPU (the config's ratio of KV to query heads)"),
        "head_dim": (_I, "query/key/value head width (config)"),
        "index_head_dim": (_I, "width of the indexer's one key head per token (config)"),
        "index_topk": (_I, "tokens selected per query and KV head: selected blocks x block size (config)"),
        "batch_size": (_I, "sequences in the step"),
        "input_len": (
            _I,
            "tokens per sequence in the step: 1 in decode, the prompt in context (AIConfigurator 'isl')",
        ),
        "context": (_I, "tokens already cached per sequence (AIConfigurator 'step')"),
        "latency_ms": (_F, "measured latency of one layer's module, ms"),
    },
    "aic-mhc": {
        **SOURCE_DOCS,
        "op": (
            _S,
            "pre (mixing coefficients, Sinkhorn, the layer's input from the copies) or post (the copies "
            "updated with the layer's output)",
        ),  # fmt: skip
        "n_sites": (_I, "hyper-connection sites timed together: one layer's two (attention and FFN)"),
        "hc_mult": (_I, "residual copies (hyper-connection width n)"),
        "hidden_size": (_I, "model hidden size D (4096: DeepSeek-V4-Flash; 7168: -Pro)"),
        "sinkhorn_iters": (_I, "Sinkhorn normalisation iterations of the residual mixing"),
        "num_tokens": (_I, "tokens in the step"),
        "latency_ms": (_F, "measured latency of the op at all n_sites sites, ms"),
    },
}


def _linear_rows(path: Path, version: str, phases: tuple[str, ...]) -> pd.DataFrame:
    """One linear-attention table (gdn_perf.parquet, kda_perf.parquet) checked: its columns, every row's version
    `version` (or it with a local ``+...`` suffix) and phase generation or one of `phases`."""
    raw = read_parquet(path)
    require_file_columns(raw, _RAW_COLUMNS, path)
    got = raw["version"].astype(str)
    bad = (got != version) & ~got.str.startswith(version + "+")
    if bad.any():
        i = raw.index[bad][0]
        raise DataError(
            f"{path}: row {i}: version {raw.loc[i, 'version']!r}, expected {version!r} in every row"
        )
    other = raw[~raw["phase"].isin(["generation", *phases])]
    if len(other):
        raise DataError(
            f"{path}: row {other.index[0]}: phase {other['phase'].iloc[0]!r}, expected generation or one of {phases}"
        )
    return raw


def _linear_tidy(rows: pd.DataFrame, system: str, path: Path, keys: list[str]) -> pd.DataFrame:
    """`rows` of a linear-attention table as tidy rows (`_LINEAR_DOCS`, ``input_len`` from ``seq_len``); DataError
    naming the first row without a positive latency or repeating `keys`."""
    lat = rows["latency"]
    if not (lat > 0).all():
        raise DataError(f"{path}: row {rows.index[~(lat > 0)][0]}: latency must be a positive number of ms")
    t = pd.DataFrame({
        "system": system, "gpu": SYSTEMS[system]["gpu"], "vllm_version": rows["version"].astype(str),
        "kernel_source": rows["kernel_source"].astype(str), "model": rows["model_name"].astype(str),
        "batch_size": rows["batch_size"], "input_len": rows["seq_len"], "hidden_size": rows["d_model"],
        "conv_kernel": rows["d_conv"], "key_heads": rows["num_k_heads"], "key_head_dim": rows["head_k_dim"],
        "value_heads": rows["num_v_heads"], "value_head_dim": rows["head_v_dim"], "latency_ms": lat,
    })  # fmt: skip
    dup = t.duplicated(keys)
    if dup.any():
        raise DataError(
            f"{path}: row {t.index[dup][0]}: repeats the shape {t.loc[t.index[dup][0], keys].to_dict()}"
        )
    return t


def _gdn(
    path: Path, system: str, version: str = GDN_VERSION, phases: tuple[str, ...] = ("context",)
) -> pd.DataFrame:
    """The generation rows of one system's linear-attention table (gdn_perf.parquet, kda_perf.parquet) as aic-gdn /
    aic-kda rows (`_linear_rows` checks the table; its `phases` are left out)."""
    raw = _linear_rows(path, version, phases)
    gen = raw[raw["phase"] == "generation"]
    if not (gen["seq_len"] == 1).all() or not (gen["num_tokens"] == gen["batch_size"]).all():
        i = gen.index[(gen["seq_len"] != 1) | (gen["num_tokens"] != gen["batch_size"])][0]
        raise DataError(f"{path}: row {i}: a generation row must have seq_len 1 and num_tokens = batch_size")
    keys = ["kernel_source", "model", "hidden_size", "key_heads", "value_heads", "batch_size"]
    return _linear_tidy(gen, system, path, keys).drop(columns="input_len")


def _gdn_prefill(path: Path, system: str) -> pd.DataFrame:
    """The context rows of one system's gdn_perf.parquet (`GDN_PREFILL_KERNELS`) as aic-gdn-prefill rows; a row's
    tokens must be batch x prompt length."""
    raw = _linear_rows(path, GDN_VERSION, ("context",))
    ctx = raw[raw["phase"] == "context"]
    bad = ctx["num_tokens"] != ctx["batch_size"] * ctx["seq_len"]
    if bad.any():
        raise DataError(
            f"{path}: row {ctx.index[bad][0]}: a context row must have num_tokens = batch_size x seq_len"
        )
    unknown = ~ctx["kernel_source"].isin(GDN_PREFILL_KERNELS)
    if unknown.any():
        i = ctx.index[unknown][0]
        raise DataError(
            f"{path}: row {i}: context kernel {ctx.loc[i, 'kernel_source']!r} is not one of {GDN_PREFILL_KERNELS}"
        )
    keys = ["kernel_source", "model", "hidden_size", "key_heads", "value_heads", "batch_size", "input_len"]
    return _linear_tidy(ctx, system, path, keys)


def _check_module_rows(
    raw: pd.DataFrame, path: Path, same: tuple[tuple[str, object], ...], heads: dict
) -> None:
    """DataError naming the first row of a module table whose `same` column differs from its value, or whose model is
    not one of `heads`."""
    for col, want in same:
        bad = raw[col] != want
        if bad.any():
            i = raw.index[bad][0]
            raise DataError(f"{path}: row {i}: {col} {raw.loc[i, col]!r}, expected {want!r} in every row")
    unknown = ~raw["model"].isin(list(heads))
    if unknown.any():
        i = raw.index[unknown][0]
        raise DataError(f"{path}: row {i}: model {raw.loc[i, 'model']!r} is not one of {', '.join(heads)}")


def _check_latency(keep: pd.DataFrame, path: Path) -> None:
    """DataError naming the first kept row without a positive latency."""
    if not (keep["latency"] > 0).all():
        raise DataError(
            f"{path}: row {keep.index[~(keep['latency'] > 0)][0]}: latency must be a positive number of ms"
        )


def _dsa(path: Path, system: str) -> pd.DataFrame:
    """The kept rows (`DSA_HEADS`, `DSA_GEMM`) of one system's dsa_generation_module_perf.parquet as aic-dsa rows."""
    raw = read_parquet(path)
    require_file_columns(raw, _DSA_COLUMNS, path)
    _check_module_rows(raw, path, (("version", GDN_VERSION), ("tp_size", 1), ("isl", 1)), DSA_HEADS)
    keep = raw[(raw["num_heads"] == raw["model"].map(DSA_HEADS)) & (raw["gemm_type"] == DSA_GEMM)]
    _check_latency(keep, path)
    t = pd.DataFrame({
        "system": system, "gpu": SYSTEMS[system]["gpu"], "vllm_version": keep["version"].astype(str),
        "kernel_source": keep["kernel_source"].astype(str), "model": keep["model"].astype(str),
        "kv_cache_dtype": keep["kv_cache_dtype"].astype(str), "n_heads": keep["num_heads"],
        "batch_size": keep["batch_size"], "context": keep["step"], "latency_ms": keep["latency"],
    })  # fmt: skip
    keys = ["kernel_source", "model", "kv_cache_dtype", "batch_size", "context"]
    dup = t.duplicated(keys)
    if dup.any():
        raise DataError(f"{path}: row {t.index[dup][0]}: repeats {t.loc[t.index[dup][0], keys].to_dict()}")
    return t


def _dsv4(path: Path, system: str, module: str) -> pd.DataFrame:
    """The kept rows (`DSV4_HEADS`, tensor parallel 1) of one system's dsv4_<module>_generation_module_perf.parquet
    as aic-dsv4 rows; every row's version, prefill length, KV dtype and compression ratio as the module's."""
    raw = read_parquet(path)
    require_file_columns(raw, [*_DSA_COLUMNS, "compress_ratio"], path)
    same = (
        ("version", GDN_VERSION),
        ("isl", 1),
        ("kv_cache_dtype", "fp8"),
        ("compress_ratio", DSV4_MODULES[module]),
    )
    _check_module_rows(raw, path, same, DSV4_HEADS)
    keep = raw[(raw["tp_size"] == 1) & (raw["num_heads"] == raw["model"].map(DSV4_HEADS))]
    _check_latency(keep, path)
    t = pd.DataFrame({
        "system": system, "gpu": SYSTEMS[system]["gpu"], "vllm_version": keep["version"].astype(str),
        "kernel_source": keep["kernel_source"].astype(str), "model": keep["model"].astype(str),
        "compress_ratio": keep["compress_ratio"], "n_heads": keep["num_heads"], "batch_size": keep["batch_size"],
        "context": keep["step"], "latency_ms": keep["latency"],
    })  # fmt: skip
    keys = ["model", "batch_size", "context"]
    dup = t.duplicated(keys)
    if dup.any():
        raise DataError(f"{path}: row {t.index[dup][0]}: repeats {t.loc[t.index[dup][0], keys].to_dict()}")
    return t


def _msa(path: Path, system: str, phase: str, shapes: dict[str, int]) -> pd.DataFrame:
    """The kept rows (`MSA_HEADS`, `DSA_GEMM`) of one system's msa_<phase>_module_perf.parquet as aic-msa rows of
    `phase`, with the module's head `shapes` (from its config); every row's version and tensor-parallel size checked,
    a decode row's prompt length 1."""
    raw = read_parquet(path)
    require_file_columns(raw, _DSA_COLUMNS, path)
    same: tuple[tuple[str, object], ...] = (("version", GDN_VERSION), ("tp_size", 1))
    _check_module_rows(raw, path, same + ((("isl", 1),) if phase == "generation" else ()), MSA_HEADS)
    keep = raw[(raw["num_heads"] == raw["model"].map(MSA_HEADS)) & (raw["gemm_type"] == DSA_GEMM)]
    _check_latency(keep, path)
    t = pd.DataFrame({
        "system": system, "gpu": SYSTEMS[system]["gpu"], "vllm_version": keep["version"].astype(str),
        "kernel_source": keep["kernel_source"].astype(str), "model": keep["model"].astype(str), "phase": phase,
        "kv_cache_dtype": keep["kv_cache_dtype"].astype(str), "tensor_parallel": keep["tp_size"],
        "n_heads": keep["num_heads"], "kv_heads": keep["num_heads"] * shapes["kv_heads"] // shapes["n_heads"],
        "head_dim": shapes["head_dim"], "index_head_dim": shapes["index_head_dim"],
        "index_topk": shapes["index_topk"], "batch_size": keep["batch_size"], "input_len": keep["isl"],
        "context": keep["step"], "latency_ms": keep["latency"],
    })  # fmt: skip
    keys = ["kv_cache_dtype", "batch_size", "input_len", "context"]
    dup = t.duplicated(keys)
    if dup.any():
        raise DataError(f"{path}: row {t.index[dup][0]}: repeats {t.loc[t.index[dup][0], keys].to_dict()}")
    return t


def _mhc(path: Path, system: str) -> pd.DataFrame:
    """One system's mhc_module_perf.parquet as aic-mhc rows; every row's version and architecture checked, its op
    one of `MHC_OPS`."""
    raw = read_parquet(path)
    require_file_columns(raw, _MHC_COLUMNS, path)
    for col, want in (("version", GDN_VERSION), ("architecture", MHC_ARCHITECTURE)):
        bad = raw[col] != want
        if bad.any():
            i = raw.index[bad][0]
            raise DataError(f"{path}: row {i}: {col} {raw.loc[i, col]!r}, expected {want!r} in every row")
    bad = ~raw["op_name"].isin(MHC_OPS)
    if bad.any():
        i = raw.index[bad][0]
        raise DataError(f"{path}: row {i}: op_name {raw.loc[i, 'op_name']!r}, expected one of {MHC_OPS}")
    for col in ("num_tokens", "num_sites", "hc_mult", "hidden_size", "sinkhorn_iters"):
        v = pd.to_numeric(raw[col], errors="coerce")
        bad = ~((v >= 1) & (v == v.round()))
        if bad.any():
            i = raw.index[bad][0]
            raise DataError(f"{path}: row {i}: {col} {raw.loc[i, col]}, expected a whole number >= 1")
    _check_latency(raw, path)
    t = pd.DataFrame({
        "system": system, "gpu": SYSTEMS[system]["gpu"], "vllm_version": raw["version"].astype(str),
        "kernel_source": raw["kernel_source"].astype(str), "op": raw["op_name"].astype(str),
        "n_sites": raw["num_sites"], "hc_mult": raw["hc_mult"], "hidden_size": raw["hidden_size"],
        "sinkhorn_iters": raw["sinkhorn_iters"], "num_tokens": raw["num_tokens"], "latency_ms": raw["latency"],
    })  # fmt: skip
    keys = ["op", "n_sites", "hc_mult", "hidden_size", "sinkhorn_iters", "num_tokens"]
    dup = t.duplicated(keys)
    if dup.any():
        raise DataError(f"{path}: row {t.index[dup][0]}: repeats {t.loc[t.index[dup][0], keys].to_dict()}")
    return t


def msa_shapes(config: Path) -> dict[str, int]:
    """MiniMax-M3's head shapes from its `config` (`architecture_from_config`): query and KV heads, head width, the
    index key's width and the tokens selected (blocks x block size)."""
    a = architecture_from_config(config)
    if not a.is_block_sparse:
        raise DataError(f"{config}: not a block-sparse (MiniMax-M3) attention config")
    return {"n_heads": a.n_heads, "kv_heads": a.n_kv_heads, "head_dim": a.head_dim,
            "index_head_dim": a.index_head_dim, "index_topk": a.index_topk}  # fmt: skip


def build_layer_tables(root: str | Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """The aic-gdn, aic-gdn-prefill, aic-kda, aic-dsa, aic-dsv4, aic-msa and aic-mhc tables from the raw folder `root` (aiconfigurator-kernels/) and the raw files read."""
    sysdir = Path(root) / SYS_DIR
    if not sysdir.is_dir():
        raise DataError(f"{root}: no {SYS_DIR}/ here; expected the {AIC_NAME} mirror (see its PROVENANCE.md)")
    files: list[Path] = []
    parts, prefill, dsa, kda, dsv4, msa, mhc = [], [], [], [], [], [], []
    config = Path(root) / MSA_CONFIG
    files.append(config)
    shapes = msa_shapes(config)
    for system in GDN_SYSTEMS:
        d = sysdir / "data" / system / "kda" / "vllm" / KDA_VERSION
        files.append(check_version(d, KDA_VERSION))
        path = d / "kda_perf.parquet"
        files.append(path)
        kda.append(_gdn(path, system, KDA_VERSION, ("context", "verify")))
        d = sysdir / "data" / system / "linear_attention" / "vllm" / GDN_VERSION
        files.append(check_version(d, GDN_VERSION))
        path = d / "gdn_perf.parquet"
        files.append(path)
        parts.append(_gdn(path, system))
        prefill.append(_gdn_prefill(path, system))
        d = sysdir / "data" / system / "sparse_attention" / "vllm" / GDN_VERSION
        files.append(check_version(d, GDN_VERSION))
        path = d / "dsa_generation_module_perf.parquet"
        files.append(path)
        dsa.append(_dsa(path, system))
        for module in DSV4_MODULES:
            path = d / f"dsv4_{module}_generation_module_perf.parquet"
            files.append(path)
            dsv4.append(_dsv4(path, system, module))
        d = sysdir / "data" / system / "msa" / "vllm" / GDN_VERSION
        files.append(check_version(d, GDN_VERSION))
        for stem, phase in MSA_PHASES.items():
            path = d / f"{stem}.parquet"
            files.append(path)
            msa.append(_msa(path, system, phase, shapes))
        d = sysdir / "data" / system / "mhc" / "vllm" / GDN_VERSION
        files.append(check_version(d, GDN_VERSION))
        path = d / "mhc_module_perf.parquet"
        files.append(path)
        mhc.append(_mhc(path, system))
    order = ["system", "kernel_source", "model", "hidden_size", "key_heads", "value_heads", "batch_size"]
    gdn = pd.concat(parts, ignore_index=True).sort_values(order, kind="mergesort").reset_index(drop=True)
    gdn_prefill = pd.concat(prefill, ignore_index=True).sort_values([*order, "input_len"], kind="mergesort")
    kimi = pd.concat(kda, ignore_index=True).sort_values(order, kind="mergesort").reset_index(drop=True)
    sparse = pd.concat(dsa, ignore_index=True)
    sparse = sparse.sort_values(["system", "model", "kv_cache_dtype", "batch_size", "context"],
                                kind="mergesort").reset_index(drop=True)  # fmt: skip
    compressed = pd.concat(dsv4, ignore_index=True)
    compressed = compressed.sort_values(["system", "model", "compress_ratio", "batch_size", "context"],
                                        kind="mergesort").reset_index(drop=True)  # fmt: skip
    block = pd.concat(msa, ignore_index=True)
    block = block.sort_values(["system", "phase", "kv_cache_dtype", "batch_size", "input_len", "context"],
                              kind="mergesort").reset_index(drop=True)  # fmt: skip
    hyper = pd.concat(mhc, ignore_index=True)
    hyper = hyper.sort_values(["system", "op", "hidden_size", "num_tokens"], kind="mergesort").reset_index(
        drop=True
    )
    return {
        "aic-mhc": hyper[list(COLUMN_DOCS["aic-mhc"])],
        "aic-msa": block[list(COLUMN_DOCS["aic-msa"])],
        "aic-dsv4": compressed[list(COLUMN_DOCS["aic-dsv4"])],
        "aic-gdn": gdn[list(COLUMN_DOCS["aic-gdn"])],
        "aic-gdn-prefill": gdn_prefill.reset_index(drop=True)[list(COLUMN_DOCS["aic-gdn-prefill"])],
        "aic-kda": kimi[list(COLUMN_DOCS["aic-kda"])],
        "aic-dsa": sparse[list(COLUMN_DOCS["aic-dsa"])],
    }, files


def layers_readme_section(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Lines of data/README.md on the Gated DeltaNet and sparse-attention tables: what is kept, what is left out."""
    g = tables["aic-gdn"]
    return [
        "## AIConfigurator Gated DeltaNet decode kernels (aic-gdn)",
        "",
        f"Same wheel and licence as the aic-* kernel tables above; vLLM {GDN_VERSION} on "
        f"{', '.join(GDN_SYSTEMS)}. Kept: the generation phase ({len(g)} rows: the recurrent state update and the",
        "convolution update, one layer, one token per sequence). The collection notes name the shapes that failed",
        "(a CUDA-grid guard on the largest decode shapes): they have no row.",
        "",
        "## AIConfigurator Gated DeltaNet prefill kernels (aic-gdn-prefill)",
        "",
        f"The same files' context phase ({len(tables['aic-gdn-prefill'])} rows): the chunked recurrence and the causal",
        "convolution over a batch of prompts, one layer, by batch, prompt length and head shape. Every row is kept;",
        "the largest H100 shapes failed with CUDA out-of-memory (the collection notes) and have no row.",
        "",
        "## AIConfigurator Kimi Delta Attention decode kernels (aic-kda)",
        "",
        f"Same wheel; a vLLM development build ({KDA_VERSION}) on {', '.join(GDN_SYSTEMS)}. Kept: the generation phase",
        f"({len(tables['aic-kda'])} rows: the convolution update and both recurrent decode kernels, Kimi-K3's heads",
        "at tensor parallel 1 to 8). Left out: the context (chunked prefill) and speculative-verify rows, which no",
        "term of the model prices; the collection notes name the failed cells (a Triton grid limit at batch 1024).",
        "",
        "## AIConfigurator DeepSeek sparse attention decode module (aic-dsa)",
        "",
        f"Same wheel; vLLM {GDN_VERSION}, the FlashMLA sparse kernel in its module. Kept: "
        f"{len(tables['aic-dsa'])} rows, DeepSeek-V3.2 at 128 and GLM-5 at 64 query heads (one GPU, tensor",
        f"parallel 1), GEMMs {DSA_GEMM}, both KV dtypes, every batch and cached context. Left out: the other head counts",
        "(tensor-parallel splits of the same module), the fp8-block and NVFP4 GEMM rows (the same attention beside other",
        "projection kernels) and every context-phase row.",
        "",
        "## AIConfigurator DeepSeek-V4 compressed attention decode modules (aic-dsv4)",
        "",
        f"Same wheel; vLLM {GDN_VERSION}, FlashMLA's DeepSeek-V4 sparse kernel in its module. Kept: "
        f"{len(tables['aic-dsv4'])} rows, the CSA",
        "(4:1, with its indexer) and HCA (128:1) modules of DeepSeek-V4-Flash at 64 and -Pro at 128 query heads",
        "(SGLang's FP8 copies; DeepSeek's Pro on B200), one GPU, tensor parallel 1, fp8 KV, every batch and cached",
        "context. Left out: the other head counts (tensor-parallel splits of the same module), the context-phase and",
        "HCA attention-only tables and the indexer's logits kernel alone.",
        "",
        "## AIConfigurator MiniMax-M3 block-sparse attention modules (aic-msa)",
        "",
        f"Same wheel; vLLM {GDN_VERSION}, MiniMax-M3's sparse path (Triton on H100/H200, fmha_sm100 on B200). Kept: "
        f"{len(tables['aic-msa'])} rows,",
        f"both phases ({(tables['aic-msa']['phase'] == 'generation').sum()} decode, "
        f"{(tables['aic-msa']['phase'] == 'context').sum()} prompt), the model's 64 query heads (one GPU, tensor "
        f"parallel 1), GEMMs {DSA_GEMM},",
        "bf16 and fp8 KV, every batch, prompt length and cached context; the head shapes from the wheel's MiniMax-M3",
        "config.json. Left out: the other head counts and the fp8-block and NVFP4 GEMM rows (the same attention beside",
        "other projection kernels). The collection notes: decode rows re-keyed to the measured cached context.",
        "",
        "## AIConfigurator DeepSeek-V4 hyper-connection kernels (aic-mhc)",
        "",
        f"Same wheel; vLLM {GDN_VERSION}'s TileLang mhc_pre and mhc_post kernels, each row one op at one layer's two",
        f"sites (attention and FFN), hc_mult 4, 20 Sinkhorn iterations. Kept: every row ({len(tables['aic-mhc'])}), "
        "hidden size 4096",
        "(DeepSeek-V4-Flash) and 7168 (-Pro), 1 to 524,288 tokens per step. Not read: B200's vLLM 0.22.0 folder, whose",
        "reuse.yaml only points at the 0.24.0 table (no rows of its own). Missing cells (no row, the collection",
        "marked complete): B200 pre at hidden 4096 below 48 tokens, H100 post at hidden 7168 and 524,288 tokens.",
        "",
    ]
