"""Per-row inputs of every estimator: the resolved serving configuration of each row and the GPU of a table.

Each distinct (model, precision columns, ``tensor_parallel``, engine-setting columns, ``gpu``) of a table resolves
once to a `slimlib.model.serving.ServingConfig` (precision columns named as vLLM's options, `PRECISION_COLUMNS`:
``dtype``, ``quantization``, ``kv_cache_dtype``; engine columns `ENGINE_COLUMNS`: ``gpu_memory_utilization``,
``block_size``, ``gpu_blocks`` (logged ``num_gpu_blocks``), ``max_num_batched_tokens``, ``max_num_seqs``,
``expert_parallel``); absent or empty, a row is served with vLLM's defaults: the config's dtype (2 bytes), the
checkpoint's own quantization, the fp16/bf16 peak (Eq. 7's ``F_max``, `prefill_peak_flops`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from slimlib.errors import DataError, UnknownNameError
from slimlib.model.parallel import split_features, tensor_parallel_column
from slimlib.model.serving import (
    FLASHMLA_MAX_HEADS,
    V4_ENTRY_BYTES,
    ServingConfig,
    hybrid_request_bytes,
    hyper_connection_bytes,
    kv_heads_per_rank,
    serving_config,
)
from slimlib.registry.architectures import Architecture, get_architecture
from slimlib.registry.gpus import GPU, get_gpu
from slimlib.registry.param_count import CSA_RATIO
from slimlib.registry.precision import precision_peak
from slimlib.schema import ENGINE_COLUMNS, PRECISION_COLUMNS, row_label

FloatArray = npt.NDArray[np.float64]
Features = dict[str, FloatArray]

#: per-row features, per GPU of the row's tensor-parallel group (`slimlib.model.serving.ServingConfig`):
#: ``n_layers`` (per rank: ``L / p``), ``hidden_size``, ``d_kv`` (``H_kv d_h`` x KV-head replication), ``ffn_size``
#: (for a mixture of experts the width a token passes through, its ``experts_per_token`` experts),
#: ``n_ffn_matrices``, ``kv_bytes`` (Eq. 11's ``b_kv``), ``kv_bytes_per_token`` (KV bytes one GPU holds per token at
#: the row's context ``IL + OL``: sliding-window layers count ``min(c, W) / c``), ``weight_bytes_total``,
#: ``dense_weight_bytes`` and ``expert_weight_bytes`` (weight bytes on one GPU: all, non-expert, routed experts),
#: ``n_heads``, ``n_kv_heads``, ``n_experts``, ``experts_per_token``, ``weight_precision`` (0 none, 1 fp8, 2 fp4, 3 int4);
#: ``kv_token_capacity`` (KV token slots per GPU: logged ``gpu_blocks x block_size`` where given, else the pool /
#: ``kv_bytes_per_token``; NaN without a GPU), ``max_num_batched_tokens`` and ``max_num_seqs``
#: (default vLLM 0.32's for the GPU) and ``block_size`` (default 16),
#: ``attn_bytes_per_context_token`` (bytes one GPU's decode attention reads per context token per step over its
#: full-attention layers: GQA ``L 2 D_kv r / p b_kv``, MLA ``L (kv_lora_rank + rope) b_kv``, not divided by p),
#: ``attn_bytes_per_window_token`` (the same over sliding-window layers, up to ``sliding_window`` tokens),
#: ``sliding_window`` (W, 0: none), ``expert_parallel`` (1: off), ``n_moe_layers`` (per rank: ``/ p``),
#: ``n_experts_per_gpu`` (whole experts with expert parallelism, else all X, tensor-split),
#: ``linear_flops_per_token`` (``2 x`` the active parameters of the layers ``/ p``: embeddings and LM head
#: excluded, as Eq. 8's bracket), ``lm_head_flops_per_token`` (``2 V D / p``: the LM head's GEMM, vocabulary-split
#: over the ranks), ``latent_attention`` (1 for MLA), ``bytes_per_weight`` (of the quantized linear
#: layers, `ServingConfig.bytes_per_weight`), ``attn_flops_per_kv_byte`` (the decode attention's FLOPs per KV byte
#: it reads on one GPU, `attention_intensity`), ``max_model_len`` (the model's context, vLLM's default
#: ``--max-model-len``; 0 where the config gives none), ``state_bytes`` (a hybrid's linear-attention state of one
#: sequence on one GPU, read and written each decode step; 0 without linear layers), ``n_linear_layers``,
#: ``linear_prefill_flops_per_token`` and ``linear_conv_bytes_per_token`` (a hybrid's linear layers, and their
#: prompt recurrence's FLOPs and convolution's bytes per token on one GPU), ``attention_layer_share`` (the
#: share of the layers with quadratic prompt attention: 1 but for a hybrid or a model with attention-free layers),
#: ``kv_free_layer_share`` (1 - ``attention_layer_share``), ``state_tokens`` (a hybrid's state
#: pages per sequence counted in attention-block tokens, ``state_groups block_size / attention_groups``; a hybrid's
#: ``kv_token_capacity`` counts the pool's blocks in the same tokens, so a request of context ``c`` takes
#: ``c + state_tokens`` of them); DeepSeek sparse attention: ``attention_topk`` (the keys a query reads, 0: dense),
#: ``attn_bytes_per_selected_token`` (the latent bytes per read key; ``attn_bytes_per_context_token`` then holds the
#: indexer's keys, read for every token), ``indexer_width`` (the indexer's prompt FLOPs per (query, key) pair and
#: layer, averaged over the layers, in Eq. 8's ``a D`` units: ``H_i d_i / 2``; replicated on every rank),
#: ``attention_width`` (a prompt's attention FLOPs per (query, key) pair and layer in the same units,
#: `attention_width`); DeepSeek-V4: ``csa_layer_share`` and ``hca_layer_share`` (the shares of the layers with 4:1
#: compressed sparse and 128:1 heavily compressed attention; every layer also attends to its window),
#: ``sequence_bytes`` (the compressors' state one sequence holds, `ServingConfig.sequence_bytes`); ``sparse_layer_share``
#: (the share of the attention layers that select their keys: 1 for DeepSeek sparse attention, MiniMax-M3's sparse
#: layers among its full ones, 0 for dense attention); ``hc_bytes_per_token`` (the bytes one token's hyper-connections
#: move over the layers on one GPU, `slimlib.model.serving.hyper_connection_bytes`; 0 without them). `model_features` adds
#: ``tensor_parallel``, ``n_layers_total``, ``batch_size``, ``input_len``, ``output_len``.
FEATURE_NAMES = (
    "n_layers",
    "hidden_size",
    "d_kv",
    "ffn_size",
    "n_ffn_matrices",
    "kv_bytes",
    "kv_bytes_per_token",
    "weight_bytes_total",
    "n_heads",
    "n_kv_heads",
    "n_experts",
    "experts_per_token",
    "dense_weight_bytes",
    "expert_weight_bytes",
    "weight_precision",
    "kv_token_capacity",
    "max_num_batched_tokens",
    "max_num_seqs",
    "block_size",
    "attn_bytes_per_context_token",
    "attn_bytes_per_window_token",
    "sliding_window",
    "expert_parallel",
    "n_moe_layers",
    "n_experts_per_gpu",
    "linear_flops_per_token",
    "lm_head_flops_per_token",
    "latent_attention",
    "bytes_per_weight",
    "attn_flops_per_kv_byte",
    "max_model_len",
    "state_bytes",
    "n_linear_layers",
    "linear_prefill_flops_per_token",
    "linear_conv_bytes_per_token",
    "attention_layer_share",
    "kv_free_layer_share",
    "state_tokens",
    "attention_topk",
    "attn_bytes_per_selected_token",
    "indexer_width",
    "attention_width",
    "csa_layer_share",
    "hca_layer_share",
    "sequence_bytes",
    "sparse_layer_share",
    "hc_bytes_per_token",
)
_PRECISION_CODE = {"none": 0.0, "fp8": 1.0, "fp4": 2.0, "int4": 3.0}
_CODE_PRECISION = {v: k for k, v in _PRECISION_CODE.items()}
#: per-config values (`_config_row`); the per-row ones (context-dependent) are computed from them
_CONFIG_VALUES = (
    *(f for f in FEATURE_NAMES if f not in ("kv_bytes_per_token", "kv_token_capacity", "state_tokens")),
    "kv_pool",
    "logged_tokens",
    "hybrid_block_bytes",
    "attention_groups",
    "state_groups",
)
#: the columns that resolve a row's serving configuration, besides ``model`` and ``tensor_parallel``
KEY_COLUMNS = (*PRECISION_COLUMNS, *ENGINE_COLUMNS, "gpu")


def attention_intensity(a: Architecture, s: ServingConfig) -> float:
    """Decode attention FLOPs per KV-cache byte read on one GPU of `s` (2 FLOPs per multiply-add, softmax not
    counted): MHA/GQA ``4 (H_q / p) d_h / (2 max(H_kv // p, 1) d_h b_kv)`` (scores and values of each query head
    over its KV head's keys and values); MLA ``2 (H / p) (2 kv_lora_rank + rope) / ((kv_lora_rank + rope) b_kv)``
    (the absorbed attention: scores over the latent and rope part, values over the latent, one latent read for
    all heads); DeepSeek-V4 ``4 H' d_h / 584`` over its 584-byte entries (scores and values over the one
    ``d_h``-wide KV head, ``H'`` the heads per rank padded to 64 or 128 as vLLM's FlashMLA runs them)."""
    heads = a.n_heads / s.tensor_parallel
    # DeepSeek-V4: scores and values over each 512-wide entry, for FlashMLA's heads padded to 64 or 128
    if a.is_compressed:
        return 4.0 * flashmla_heads(heads) * a.head_dim / float(V4_ENTRY_BYTES)
    if a.is_mla:
        latent = float(a.kv_lora_rank + a.qk_rope_head_dim)
        return 2.0 * heads * (latent + a.kv_lora_rank) / (latent * s.kv_bytes_per_element)
    kv_heads = kv_heads_per_rank(a.n_kv_heads, s.tensor_parallel)
    return 4.0 * heads * a.head_dim / (2.0 * kv_heads * a.head_dim * s.kv_bytes_per_element)


def flashmla_heads(heads_per_rank: float) -> float:
    """Query heads vLLM's FlashMLA kernels run DeepSeek-V4's attention at on one rank: its heads padded to 64 or 128
    (``DeepseekV4MultiHeadLatentAttentionWrapper.padded_heads``)."""
    return 64.0 if heads_per_rank <= 64 else float(FLASHMLA_MAX_HEADS)


def attention_width(a: Architecture, tensor_parallel: int = 1) -> float:
    """A prompt's attention FLOPs per (query, key) pair and layer over 4 (Eq. 8's ``D`` for MHA/GQA, as the paper
    counts it; ``H (d_h + d_v) / 2`` where the value heads have their own width); latent attention ``H (d_qk + d_v) / 2``: dense MLA's prefill in its expanded form (``d_qk`` = nope +
    rope head width, ``d_v`` the value head width), sparse MLA in its absorbed form over the latent (``d_qk`` =
    ``kv_lora_rank`` + rope, ``d_v`` = ``kv_lora_rank``), as vLLM runs them; DeepSeek-V4 ``p H' d_h`` on
    `tensor_parallel` ranks (its one KV head is the key and the value; ``H'`` each rank's heads as FlashMLA pads
    them, `flashmla_heads`); MiniMax-M3's block-sparse GQA ``H d_h`` (its query width, not ``D``)."""
    if a.is_compressed:  # one KV head of d_h for keys and values: 2 H d_h + 2 H d_h per pair, padded heads
        return tensor_parallel * flashmla_heads(a.n_heads / tensor_parallel) * a.head_dim
    if a.is_block_sparse:  # GQA scores and values: 2 H d_h + 2 H d_h per pair
        return float(a.n_heads * a.head_dim)
    if a.is_sparse:
        return a.n_heads * (2 * a.kv_lora_rank + a.qk_rope_head_dim) / 2.0
    if a.is_mla:
        return a.n_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim + a.v_head_dim) / 2.0
    if a.sliding_head_dim:  # per-kind head widths: the layers' mean of their heads' own FLOPs per pair
        full = a.n_attention_layers - a.n_sliding_layers
        per_layer = full * (a.head_dim + a.value_head_dim) + a.n_sliding_layers * a.sliding_kv_width
        return a.n_heads * per_layer / (2.0 * a.n_attention_layers)
    if a.v_head_dim:  # value heads of their own width: the heads' own FLOPs per pair
        return a.n_heads * (a.head_dim + a.value_head_dim) / 2.0
    return float(a.hidden_size)


def _config_row(a: Architecture, s: ServingConfig) -> list[float]:
    sparse_share = a.n_indexer_layers / a.n_attention_layers if a.is_block_sparse else float(a.is_sparse)
    values = {
        "n_layers": a.n_layers,
        "hidden_size": a.hidden_size,
        "d_kv": a.d_kv,
        "ffn_size": a.ffn_size_active * (a.n_layers - a.n_ffnless_layers) / a.n_layers
        if a.is_moe
        else a.mean_ffn_width,
        "n_ffn_matrices": a.n_ffn_matrices,
        "kv_bytes": s.kv_bytes_per_element,
        "weight_bytes_total": s.weights,
        "n_heads": a.n_heads,
        "n_kv_heads": a.n_kv_heads,
        "n_experts": a.n_experts,
        "experts_per_token": a.experts_per_token,
        "dense_weight_bytes": s.dense_weights,
        "expert_weight_bytes": s.expert_weights,
        "weight_precision": _PRECISION_CODE[s.weight_precision],
        "max_num_batched_tokens": s.max_num_batched_tokens,
        "max_num_seqs": s.max_num_seqs,
        "block_size": s.block_size,
        "attn_bytes_per_context_token": s.kv_bytes_full - s.kv_bytes_selected,
        "attn_bytes_per_window_token": s.kv_bytes_window,
        "sliding_window": s.sliding_window,
        "expert_parallel": s.expert_parallel,
        "n_moe_layers": a.n_moe_layers,
        "n_experts_per_gpu": s.n_experts_per_gpu,
        "linear_flops_per_token": s.linear_flops_per_token,
        "lm_head_flops_per_token": s.lm_head_flops_per_token,
        "latent_attention": float(a.is_mla or a.is_compressed),
        "bytes_per_weight": s.bytes_per_weight,
        "attn_flops_per_kv_byte": attention_intensity(a, s),
        "max_model_len": float(a.max_position or 0),
        "kv_pool": s.kv_pool,
        "logged_tokens": s.kv_tokens if s.logged_gpu_blocks and not s.state_groups else 0,
        "state_bytes": s.state_bytes,
        "n_linear_layers": a.n_linear_layers,
        "linear_prefill_flops_per_token": s.linear_prefill_flops_per_token,
        "linear_conv_bytes_per_token": s.linear_conv_bytes_per_token,
        "attention_layer_share": a.n_attention_layers / a.n_layers,
        "kv_free_layer_share": 1.0 - a.n_attention_layers / a.n_layers,
        "hybrid_block_bytes": s.hybrid_block_bytes,
        "attention_groups": s.attention_groups,
        "state_groups": s.state_groups,
        "attention_topk": s.sparse_topk,
        "attn_bytes_per_selected_token": s.kv_bytes_selected,
        # a DeepSeek-V4 indexer scores one compressed key per 4 tokens: a quarter of the causal pairs
        # MiniMax-M3's index heads split with the KV heads: a rank scores with its own (at least one)
        "indexer_width": a.n_indexer_layers
        / a.n_layers
        * (kv_heads_per_rank(a.index_heads, s.tensor_parallel) if a.is_block_sparse else a.index_heads)
        * a.index_head_dim
        / 2.0
        / (CSA_RATIO if a.is_compressed else 1),
        "sparse_layer_share": sparse_share,
        "attention_width": attention_width(a, s.tensor_parallel),
        "csa_layer_share": a.n_csa_layers / a.n_layers,
        "hca_layer_share": a.n_hca_layers / a.n_layers,
        "sequence_bytes": s.sequence_bytes,
        # whole on every rank: each holds the full residual stream
        "hc_bytes_per_token": a.n_layers * hyper_connection_bytes(a.hidden_size, a.hc_mult),
    }
    return [float(values[f]) for f in _CONFIG_VALUES]


def _precision_cells(df: pd.DataFrame, col: str) -> list[str]:
    """Column `col` as stripped lower-case strings ('' where absent or empty)."""
    if col not in df.columns:
        return [""] * len(df)
    return [_cell(v) for v in df[col]]


def precision_columns(df: pd.DataFrame) -> dict[str, list[str]]:
    """The precision columns `df` has (`PRECISION_COLUMNS`), as strings: pass them on when rebuilding a table."""
    return {c: _precision_cells(df, c) for c in PRECISION_COLUMNS if c in df.columns}


def serving_columns(df: pd.DataFrame) -> dict[str, Any]:
    """The precision and engine-setting columns `df` has (`PRECISION_COLUMNS`, `ENGINE_COLUMNS`): pass them on
    when rebuilding a table so that each row keeps its serving configuration."""
    out: dict[str, Any] = precision_columns(df)
    out.update({c: df[c].to_numpy() for c in ENGINE_COLUMNS if c in df.columns})
    return out


def _distinct_rows(
    df: pd.DataFrame, tp: FloatArray, gpu: str, gpu_column: bool = True
) -> tuple[npt.NDArray[np.intp], list[dict[str, Any]], npt.NDArray[np.intp]]:
    """The distinct serving configurations of `df` (model, `KEY_COLUMNS` it has, tensor parallel degree `tp`) in
    the order they first appear, each row's index into them, and each one's first row. Each column is factorized
    on its own (a million rows hold a handful of values); text cells as `_cell`, numbers as they are."""
    key = np.zeros(len(df), dtype=np.int64)
    coded: dict[str, tuple[npt.NDArray[np.intp], list[Any]]] = {}
    key_columns = [c for c in ("model", *KEY_COLUMNS) if c in df.columns and (gpu_column or c != "gpu")]
    columns: dict[str, Any] = {c: df[c] for c in key_columns}
    columns["tensor_parallel"] = tp
    for col, values_in in columns.items():
        raw, values = pd.factorize(values_in, use_na_sentinel=True)
        if col == "model":
            spelled: list[Any] = [str(v) for v in values] + [""]
        elif col in ENGINE_COLUMNS or col == "tensor_parallel":
            spelled = [_number(df, col, v, raw, k) for k, v in enumerate(values)] + [
                float("nan")
            ]  # -1: missing
        else:
            spelled = [_cell(v) for v in values] + [""]
        norm, distinct = pd.factorize(np.array(spelled, dtype=object), use_na_sentinel=False)
        codes = norm[raw]
        coded[col] = (codes, list(distinct))
        if len(distinct) > 1:  # a column of one value adds nothing to the key
            key = key * len(distinct) + codes
    # codes numbered by first appearance (hashing, no sort): an error names the first bad row
    rank, _ = pd.factorize(key)
    seen = np.maximum.accumulate(rank) if len(rank) else rank
    first = np.flatnonzero(np.r_[len(rank) > 0, rank[1:] > seen[:-1]])  # where the running maximum grows
    found: list[dict[str, Any]] = [
        {col: names[codes[row]] for col, (codes, names) in coded.items()} for row in first
    ]
    for cells in found:
        if not cells.get("gpu"):
            cells["gpu"] = gpu
    return rank.astype(np.intp), found, first


def _number(df: pd.DataFrame, col: str, value: Any, raw: npt.NDArray[np.intp], code: int) -> float:
    """An engine-setting cell as a float; DataError naming the first row that holds anything else."""
    try:
        return float(value)
    except (TypeError, ValueError):
        row = int(np.flatnonzero(raw == code)[0])
        raise DataError(f"{row_label(df, row)}: field {col!r} is {value!r}, not a number") from None


def _cell(v: Any) -> str:
    return "" if pd.isna(v) else str(v).strip().lower()


def serving_configs(
    df: pd.DataFrame,
    gpu: GPU | str | None = None,
    *,
    reserve_gib: float | None = None,
    gpu_column: bool = True,
    within_node: bool = False,
) -> tuple[npt.NDArray[np.intp], list[ServingConfig]]:
    """Each row's index into the distinct `ServingConfig` s of `df` (resolved once each; module docstring), and
    those configurations. `gpu` (optional) stands in where the table has no ``gpu`` cell (with `gpu_column`
    False: for every row, the table's ``gpu`` column ignored). Errors name the first row of a configuration vLLM
    refuses (`slimlib.model.serving.serving_config`; `within_node`: tensor parallelism within one node too)."""
    codes, configs, _ = _resolve(df, gpu, reserve_gib, gpu_column, within_node)
    return codes, configs


def _resolve(
    df: pd.DataFrame,
    gpu: GPU | str | None,
    reserve_gib: float | None,
    gpu_column: bool = True,
    within_node: bool = False,
) -> tuple[npt.NDArray[np.intp], list[ServingConfig], list[Architecture]]:
    """`serving_configs` and the architecture of each configuration (`gpu_column` False: `gpu` for every row,
    whatever the table's ``gpu`` column says)."""
    tp = tensor_parallel_column(df)
    codes, uniques, first_rows = _distinct_rows(
        df, tp, get_gpu(gpu).name if gpu is not None else "", gpu_column
    )
    extra: dict[str, Any] = {"within_node": within_node}
    if reserve_gib is not None:
        extra["reserve_gib"] = reserve_gib
    configs, archs = [], []
    for i, cells in enumerate(uniques):
        pos = int(first_rows[i])
        try:
            hw = get_gpu(cells["gpu"]) if cells["gpu"] else None
        except UnknownNameError as exc:
            raise UnknownNameError(f"{row_label(df, pos)}: field 'gpu': {exc}") from None
        try:
            a = get_architecture(cells["model"])  # file reads are cached on the resolved path and file state
            settings: dict[str, Any] = {k: cells.get(k) for k in (*PRECISION_COLUMNS, *ENGINE_COLUMNS)}
            configs.append(
                serving_config(a, hw, tensor_parallel=cells["tensor_parallel"], **settings, **extra)
            )
        except (UnknownNameError, DataError) as exc:
            raise type(exc)(f"{row_label(df, pos)}: {exc}") from None
        archs.append(a)
    return codes, configs, archs


def model_features(df: pd.DataFrame, gpu: GPU | str | None = None) -> Features:
    """Features (`FEATURE_NAMES`) per row of `df` (column ``model``; the serving configuration resolved once per
    distinct row, `serving_configs`) plus ``batch_size``, ``input_len`` and ``output_len`` as float arrays, per GPU
    of the row's ``tensor_parallel`` degree (column optional, default 1: `slimlib.model.parallel.split_features`).
    `gpu` (optional) is the device where the table has no ``gpu`` column (without either, the pool-dependent
    ``kv_token_capacity`` is NaN)."""
    tp = tensor_parallel_column(df)
    codes, configs, archs = _resolve(df, gpu, None)
    table = np.array([_config_row(a, s) for a, s in zip(archs, configs, strict=True)], dtype=float).reshape(
        len(configs), len(_CONFIG_VALUES)
    )
    # per row: a value every configuration shares is broadcast (read-only, no copy), others gathered
    columns = np.ascontiguousarray(table.T)
    col = {
        f: np.broadcast_to(v[0], codes.shape) if (v == v[0]).all() else v.take(codes)
        for f, v in zip(_CONFIG_VALUES, columns, strict=True)
    }
    feats: Features = {f: col[f] for f in FEATURE_NAMES if f in col}
    for c in ("batch_size", "input_len", "output_len"):
        feats[c] = df[c].to_numpy(dtype=float)
    ctx = np.maximum(feats["input_len"] + feats["output_len"], 1.0)
    window = col["sliding_window"]
    share = np.where(window > 0, np.minimum(ctx, window) / ctx, 1.0)
    # held, not read: a sparse attention holds the latent of every token though it reads the selected ones
    held_per_token = col["attn_bytes_per_context_token"] + col["attn_bytes_per_selected_token"]
    per_token = held_per_token + col["attn_bytes_per_window_token"] * share + col["sequence_bytes"] / ctx
    hybrid = col["state_groups"] > 0
    state_tokens = np.zeros(np.shape(ctx))
    if hybrid.any():  # a hybrid's blocks and state pages (`slimlib.model.serving.hybrid_request_bytes`)
        held = hybrid_request_bytes(ctx, col["block_size"], col["hybrid_block_bytes"], col["attention_groups"],
                                    col["state_groups"])  # fmt: skip
        per_token = np.where(hybrid, held / ctx, per_token)
        groups = np.where(hybrid, col["attention_groups"], 1.0)
        state_tokens = np.where(hybrid, col["state_groups"] * col["block_size"] / groups, 0.0)
    feats["state_tokens"] = state_tokens
    feats["kv_bytes_per_token"] = per_token
    logged = col["logged_tokens"]
    with np.errstate(invalid="ignore"):
        feats["kv_token_capacity"] = np.where(logged > 0, logged, np.maximum(col["kv_pool"] / per_token, 0.0))
        if hybrid.any():  # the pool's whole blocks, in attention-block tokens
            blocks = np.floor(
                np.maximum(col["kv_pool"], 0.0) / np.where(hybrid, col["hybrid_block_bytes"], 1.0)
            )
            feats["kv_token_capacity"] = np.where(hybrid, blocks * col["block_size"] / groups,
                                                  feats["kv_token_capacity"])  # fmt: skip
    return split_features(feats, tp)


#: features a method's terms must read to represent a layer kind: (feature, the layers, what a method without it
#: does instead)
_LAYER_KIND_FEATURES = (
    ("state_bytes", "linear-attention (Gated DeltaNet) layers", "prices KV over every layer and no state"),
    (
        "linear_prefill_flops_per_token",
        "linear-attention (Gated DeltaNet) layers",
        "leaves their prompt's recurrence out",
    ),
    (
        "hca_layer_share",
        "DeepSeek-V4 compressed attention",
        "prices every cached token's KV and dense prompt attention",
    ),
    (
        "attention_topk",
        "sparse attention (DeepSeek's lightning indexer or MiniMax-M3's block selection)",
        "prices every cached token's KV and dense prompt attention",
    ),
    ("kv_free_layer_share", "layers without attention", "prices KV and prompt attention in every layer"),
)


def refuse_unread_layers(f: Features, method: str, reads: tuple[str, ...] = ()) -> None:
    """DataError naming the first row of a model whose layer kind (`_LAYER_KIND_FEATURES`: a hybrid's state, a
    sparse attention, layers without attention) the method's terms do not read (`reads`; the share of layers
    without attention is read with ``attention_layer_share``): they would misprice it."""
    for feature, layers, instead in _LAYER_KIND_FEATURES:
        rows = np.flatnonzero(np.asarray(f[feature]) > 0)
        read = feature in reads or (feature == "kv_free_layer_share" and "attention_layer_share" in reads)
        if rows.size and not read:
            raise DataError(
                f"row {int(rows[0])}: the model has {layers}, which {method} does not represent (it {instead}); "
                "use the method slim"
            )


def prefill_peak_flops(f: Features, hw: GPU) -> FloatArray:
    """Eq. 7's ``F_max`` per row: `hw`'s tensor peak at the row's weight precision (feature ``weight_precision``;
    `slimlib.registry.precision.precision_peak`), the fp16/bf16 peak without it."""
    code = f.get("weight_precision")
    if code is None:
        return np.asarray(hw.peak_flops, dtype=float)
    code = np.asarray(code)
    base = float(hw.peak_flops)
    out = np.full(code.shape, base)
    for c, p in _CODE_PRECISION.items():
        peak = precision_peak(hw, p)
        if peak != base:  # rows at the fp16/bf16 peak already hold it
            out[code == c] = peak
    return out


def resolve_gpu(df: pd.DataFrame, gpu: str | None, *, fitting: bool = False) -> GPU:
    """The one GPU of a table (or the given one); a table spanning several GPUs is an error, and so are rows of
    another GPU than the given one (worded for a fit when `fitting`, else for parameters being used)."""
    names = sorted(set(df["gpu"].astype(str))) if "gpu" in df.columns else []
    if gpu is None:
        if not names:
            raise DataError("no 'gpu' column and no GPU given; add the column or pass the GPU name")
        canon = sorted({get_gpu(n).name for n in names})
        if len(canon) > 1:
            raise DataError(
                f"the table spans several GPUs ({', '.join(canon)}); SLIM parameters belong to one GPU: "
                "fit each GPU's rows separately"
            )
        return get_gpu(canon[0])
    hw = get_gpu(gpu)
    other = sorted({get_gpu(n).name for n in names} - {hw.name})
    if other and fitting:
        raise DataError(
            f"rows for GPU(s) {', '.join(other)} but the fit was asked for {hw.name}; fit each GPU's own rows "
            "(leave out the GPU name to take the table's)"
        )
    if other:
        raise DataError(
            f"rows for GPU(s) {', '.join(other)} but the parameters are for {hw.name}; "
            "use parameters calibrated on that GPU, or fit a new set"
        )
    return hw
