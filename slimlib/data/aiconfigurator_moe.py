"""Parser of AIConfigurator's mixture-of-experts, MLA, MLA-BMM and expert all-to-all tables (raw folder
`aiconfigurator-kernels/`, the same wheel as `slimlib.data.aiconfigurator`).

`build_moe_mla_tables` writes:

- ``aic-moe``: one fused-MoE layer on one GPU, by tokens per step, expert shape, top-k, dtype, expert tensor /
  expert parallel layout and router distribution, from the newest vLLM table of each system (`MOE_VERSIONS`).
  Subsampling rule (size): every row at moe_tp = moe_ep = 1 (all distributions), plus the ``balanced`` rows of
  the single-node layouts moe_tp = 8 or moe_ep = 8 (`KEEP_LAYOUTS`), plus the rows the kernel composition times
  (`composed_row`: the registry mixtures of experts' expert shapes, bf16, `COMPOSED_DISTRIBUTION`, each expert
  split over 2, 4 or 8 GPUs); the other rows are counted in the exclusions;
- ``aic-mla``: DeepSeek-V3's multi-head latent attention module, one layer, prefill (``phase`` context) and decode
  (``phase`` generation);
- ``aic-mla-bmm``: the MLA decode pre/post batched matmuls;
- ``aic-moe-a2a``: DeepEP dispatch / combine latency for expert parallelism (latency in microseconds);
- ``aic-moe-mla-exclusions``: every raw row not kept, counted by group, with the reason.

Rows appended with approximations that `collection_meta.yaml` names are handled by `APPENDED` (excluded, or kept
and flagged in ``latency_stat``); the row counts the YAML comments state are checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from slimlib.data.aiconfigurator import (
    AIC_NAME,
    SOURCE_DOCS,
    SYS_DIR,
    SYSTEMS,
    check_version,
    moe_gpu_architectures,
    read_parquet,
    read_yaml,
    require_file_columns,
)
from slimlib.data.markdown import count_table
from slimlib.errors import DataError

#: system -> vLLM version of the MoE table kept (the newest the wheel has for it)
MOE_VERSIONS = {"a100_sxm": "0.14.0", "b200_sxm": "0.24.0", "h100_sxm": "0.24.0", "h200_sxm": "0.24.0"}
#: older MoE tables, read and counted in the exclusions only: system -> versions
MOE_OLDER = {"b200_sxm": ("0.19.0", "0.22.0"), "h200_sxm": ("0.19.0",)}
#: systems and vLLM version of the MLA, MLA-BMM and all-to-all tables
MLA_SYSTEMS = ("b200_sxm", "h100_sxm", "h200_sxm")
MLA_VERSION = "0.24.0"
#: MoE parallel layouts kept, (moe_tp, moe_ep) -> router distributions kept (None: all)
KEEP_LAYOUTS: dict[tuple[int, int], tuple[str, ...] | None] = {
    (1, 1): None,
    (8, 1): ("balanced",),
    (1, 8): ("balanced",),
}
#: router distribution and dtype of the fused-MoE rows the kernel composition times
#: (`slimlib.experiments.kernel_timing.composition`): the power law, whose 4-token rows read about as many experts
#: as random top-k routing does (Mixtral on H200: 0.42 ms against 0.67 ms for ``balanced``, which spreads 4 tokens
#: over all 8 experts), and which AIConfigurator describes as its realistic workload
COMPOSED_DISTRIBUTION = "power_law_1.01"
COMPOSED_DTYPE = "bfloat16"
#: expert-split degrees (moe_tp, moe_ep = 1) kept for the composition besides `KEEP_LAYOUTS`
COMPOSED_TP = (2, 4, 8)
MLA_MODEL = "deepseek-ai/DeepSeek-V3"


@dataclass(frozen=True)
class Appended:
    """Rows appended to a MoE table with a deviation its collection_meta.yaml names: the rows matching `match`
    (raw column -> value), how many the YAML says there are, and what is done: ``exclude`` (reason) or kept with
    ``latency_stat`` set to `stat`."""

    system: str
    match: tuple[tuple[str, object], ...]
    n_rows: int
    action: str  # "exclude" or "flag"
    note: str


_K3_SILU = "vllm_compressedtensorsw4a4mxfp4moe_marlin_marlinexperts_situ_as_silu"
APPENDED = (
    Appended("h100_sxm", (("kernel_source", _K3_SILU),), 972, "exclude",
             "approximation: Kimi-K3 SITU activation run as SiLU with an EP-local shim (collection_meta.yaml, "
             "2026-08-02)"),
    Appended("h200_sxm", (("kernel_source", _K3_SILU),), 972, "exclude",
             "approximation: Kimi-K3 SITU activation run as SiLU with an EP-local shim (collection_meta.yaml, "
             "2026-08-02)"),
    Appended("b200_sxm", (("version", "0.1.dev19262+gb6bbf29dd.d20260727"),), 972, "exclude",
             "other runtime: Kimi-K3 rows collected in a vLLM preview build (0.1.dev19262), not vLLM 0.24.0 "
             "(collection_meta.yaml, 2026-08-01)"),
    Appended("b200_sxm", (("moe_dtype", "nvfp4"), ("hidden_size", 4096), ("inter_size", 2048),
                          ("num_experts", 256), ("topk", 6)), 1134, "flag",
             "DeepSeek-V4-Flash NVFP4: latency is the per-key minimum of two runs (collection_meta.yaml, 2026-08-20)"),
    Appended("b200_sxm", (("moe_dtype", "nvfp4"), ("hidden_size", 7168), ("inter_size", 3072),
                          ("num_experts", 384), ("topk", 6)), 972, "flag",
             "DeepSeek-V4-Pro NVFP4: latency is the per-key minimum of two runs (collection_meta.yaml, 2026-08-20)"),
    Appended("b200_sxm", (("moe_dtype", "nvfp4"), ("hidden_size", 2688), ("inter_size", 1856),
                          ("num_experts", 128), ("topk", 6)), 1053, "flag",
             "Nemotron-3.5-Lightning NVFP4: latency is the per-key minimum of two runs (collection_meta.yaml, "
             "2026-08-19)"),
)  # fmt: skip

_S, _I, _F = "string", "Int64", "float64"
COLUMN_DOCS: dict[str, dict[str, tuple[str, str]]] = {
    "aic-moe": {
        **SOURCE_DOCS,
        "moe_dtype": (
            _S,
            "weight/activation format: bfloat16, fp8 (per-tensor), fp8_block (128x128 block "
            "scales), int4_wo, w4a16_mxfp4 (4-bit weights, 16-bit compute), nvfp4, "
            "w4a8_mxfp4_mxfp8",
        ),  # fmt: skip
        "num_tokens": (_I, "tokens in the step (all GPUs of the layout together)"),
        "hidden_size": (_I, "model hidden size"),
        "inter_size": (_I, "expert FFN width (whole expert, before moe_tp splits it)"),
        "top_k": (_I, "experts each token is routed to"),
        "n_experts": (_I, "routed experts of the layer (all GPUs)"),
        "moe_tp": (_I, "tensor-parallel split of each expert's FFN width"),
        "moe_ep": (_I, "expert-parallel degree (experts spread over moe_ep GPUs)"),
        "distribution": (_S, "router load: balanced, power_law_1.01 or power_law_1.2 (skewed)"),
        "latency_ms": (_F, "measured latency of one fused-MoE layer on one GPU, ms"),
        "latency_stat": (
            _S,
            "one_run, or min_of_two_runs (rows appended with the per-key minimum of two runs; "
            "see data/README.md)",
        ),  # fmt: skip
    },
    "aic-mla": {
        **SOURCE_DOCS,
        "phase": (_S, "context (prefill of input_len tokens per request) or generation (one decode step)"),
        "mla_dtype": (_S, "activation dtype of the attention"),
        "kv_cache_dtype": (_S, "latent KV-cache dtype (bfloat16 or fp8)"),
        "gemm_type": (_S, "dtype of the module's projection GEMMs (bfloat16, fp8_block, nvfp4)"),
        "n_heads": (_I, "attention heads on the GPU (DeepSeek-V3 has 128; 128 / tensor parallel)"),
        "batch_size": (_I, "requests in the batch"),
        "input_len": (
            _I,
            "context phase: prompt tokens per request (AIConfigurator 'isl'); empty in generation",
        ),
        "context": (
            _I,
            "generation phase: tokens in each request's KV cache (AIConfigurator 'step'); empty in context",
        ),  # fmt: skip
        "norm_dispatch": (
            _S,
            "RMSNorm dispatch of the collection: default, or vllm_c_eager_surrogate (B200: eager "
            "kernels standing in for the engine's fused ones; collection_meta.yaml)",
        ),  # fmt: skip
        "latency_ms": (_F, "measured latency of one layer's MLA module (projections, norms, attention), ms"),
    },
    "aic-mla-bmm": {
        **SOURCE_DOCS,
        "op_name": (
            _S,
            "mla_gen_pre (query absorption into the latent) or mla_gen_post (latent to value heads)",
        ),
        "bmm_dtype": (_S, "dtype of the batched matmul"),
        "num_tokens": (_I, "tokens (decode requests) in the step"),
        "n_heads": (_I, "attention heads on the GPU"),
        "latency_ms": (_F, "measured latency of the batched matmul, ms"),
    },
    "aic-moe-a2a": {
        **SOURCE_DOCS,
        "comm_backend": (
            _S,
            "DeepEP mode: deepep_ht (high throughput), deepep_ll (low latency), deepep_v2_*",
        ),
        "phase": (_S, "dispatch (tokens to their experts' GPUs) or combine (results back)"),
        "comm_dtype": (_S, "payload dtype as AIConfigurator names it (default: the activations' dtype)"),
        "ep_size": (_I, "expert-parallel GPUs"),
        "node_num": (_I, "nodes"),
        "hidden_size": (_I, "hidden size of a token's activation"),
        "top_k": (_I, "experts per token"),
        "n_experts": (_I, "routed experts"),
        "num_tokens": (_I, "tokens per GPU in the step"),
        "sms": (_I, "streaming multiprocessors given to the communication kernel (0: backend default)"),
        "latency_us": (_F, "measured latency of the dispatch or combine, microseconds"),
    },
    "aic-moe-mla-exclusions": {
        "source": (
            _S,
            "raw table: moe_perf, mla_context_module_perf, mla_generation_module_perf, mla_bmm_perf, "
            "moe_a2a_perf",
        ),  # fmt: skip
        "system": SOURCE_DOCS["system"],
        "vllm_version": (_S, "vLLM version of the raw table (its folder)"),
        "moe_dtype": (_S, "moe_dtype of the rows (MoE tables; empty otherwise)"),
        "moe_tp": (_I, "moe_tp of the rows (MoE tables)"),
        "moe_ep": (_I, "moe_ep of the rows (MoE tables)"),
        "distribution": (_S, "router distribution of the rows (MoE tables)"),
        "reason": (_S, "why the rows are not in the tidy table"),
        "n_rows": (_I, "raw rows of this group"),
    },
}
TABLE_DOCS = {
    "aic-moe": "Measured vLLM fused-MoE layer latency on one GPU (NVIDIA AIConfigurator data), newest vLLM per GPU; "
    "all rows at moe_tp = moe_ep = 1, balanced rows at moe_tp = 8 or moe_ep = 8 (the rest in the exclusions).",
    "aic-mla": "Measured vLLM latency of DeepSeek-V3's MLA attention module, one layer, prefill and decode "
    "(NVIDIA AIConfigurator data, vLLM 0.24.0).",
    "aic-mla-bmm": "Measured vLLM latency of the MLA decode pre/post batched matmuls (NVIDIA AIConfigurator data, "
    "vLLM 0.24.0).",
    "aic-moe-a2a": "Measured DeepEP expert-parallel dispatch/combine latency, 8 GPUs in one node (NVIDIA "
    "AIConfigurator data, vLLM 0.24.0).",
    "aic-moe-mla-exclusions": "Raw rows of the MoE/MLA/all-to-all tables not kept in the aic-moe, aic-mla, "
    "aic-mla-bmm and aic-moe-a2a tables, counted by group, with the reason.",
}
MOE_KEYS = ["moe_dtype", "num_tokens", "hidden_size", "inter_size", "top_k", "n_experts", "moe_tp", "moe_ep",
            "distribution"]  # fmt: skip
_EXCL_GROUP = ["moe_dtype", "moe_tp", "moe_ep", "distribution"]


def _dir(sysdir: Path, system: str, kind: str, version: str) -> Path:
    return sysdir / "data" / system / kind / "vllm" / version


def _positive(df: pd.DataFrame, col: str, where: Path) -> None:
    bad = ~(df[col] > 0)
    if bad.any():
        i = df.index[bad][0]
        raise DataError(f"{where}: row {i}: {col} {df.loc[i, col]!r} is not a positive number")


def _unique(df: pd.DataFrame, keys: list[str], where: Path) -> pd.DataFrame:
    dup = df.duplicated(keys, keep=False)
    if dup.any():
        first = df[dup].iloc[0]
        raise DataError(f"{where}: several latencies for {dict(first[keys])}; expected one per point")
    return df.sort_values(keys, kind="mergesort").reset_index(drop=True)


def _excluded(rows: pd.DataFrame, source: str, system: str, version: str, reason: str) -> pd.DataFrame:
    """Exclusion counts of raw `rows`, grouped by the MoE columns where the table has them."""
    if len(rows) == 0:
        return pd.DataFrame()
    g = pd.DataFrame(index=rows.index)
    g["moe_dtype"] = rows["moe_dtype"].astype(str) if "moe_dtype" in rows else pd.NA
    g["moe_tp"] = rows["moe_tp_size"] if "moe_tp_size" in rows else pd.NA
    g["moe_ep"] = rows["moe_ep_size"] if "moe_ep_size" in rows else pd.NA
    g["distribution"] = rows["distribution"].astype(str) if "distribution" in rows else pd.NA
    out = g.groupby(_EXCL_GROUP, dropna=False, sort=True).size().reset_index(name="n_rows")
    return out.assign(source=source, system=system, vllm_version=version, reason=reason)


def _appended_mask(raw: pd.DataFrame, a: Appended, where: Path) -> pd.Series:
    mask = pd.Series(True, index=raw.index)
    for col, val in a.match:
        mask &= raw[col] == val
    if int(mask.sum()) != a.n_rows:
        raise DataError(
            f"{where}: {int(mask.sum())} rows match {dict(a.match)}, but collection_meta.yaml names {a.n_rows} "
            f"({a.note}); the table changed: update slimlib.data.aiconfigurator_moe.APPENDED"
        )
    return mask


def _kept(tp: int, ep: int, distribution: str) -> bool:
    """Whether the subsampling rule (`KEEP_LAYOUTS`) keeps a MoE row of layout (tp, ep) and `distribution`."""
    if (tp, ep) not in KEEP_LAYOUTS:
        return False
    dists = KEEP_LAYOUTS[(tp, ep)]
    return dists is None or distribution in dists


def composed_expert_shapes() -> set[tuple[int, int, int, int]]:
    """(hidden size, expert FFN width, top-k, experts) of the registry mixtures of experts the kernel composition
    times (`slimlib.data.aiconfigurator.moe_gpu_architectures`)."""
    return {
        (a.hidden_size, a.moe_ffn_size, a.experts_per_token, a.n_experts) for a in moe_gpu_architectures()
    }


def composed_row(tp: int, ep: int, distribution: str, dtype: str, shape: tuple[int, int, int, int],
                 shapes: set[tuple[int, int, int, int]]) -> bool:  # fmt: skip
    """Whether a MoE row is one the kernel composition times beyond `KEEP_LAYOUTS`: an expert shape of `shapes`
    (`composed_expert_shapes`), `COMPOSED_DTYPE`, `COMPOSED_DISTRIBUTION`, split over `COMPOSED_TP` GPUs."""
    return (ep == 1 and tp in COMPOSED_TP and distribution == COMPOSED_DISTRIBUTION and dtype == COMPOSED_DTYPE
            and shape in shapes)  # fmt: skip


def _moe(sysdir: Path, files: list[Path]) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    parts, excl = [], []
    cols = ["version", "kernel_source", "moe_dtype", "num_tokens", "hidden_size", "inter_size", "topk",
            "num_experts", "moe_tp_size", "moe_ep_size", "distribution", "latency"]  # fmt: skip
    for system in sorted(MOE_VERSIONS):
        for ver in MOE_OLDER.get(system, ()):
            d = _dir(sysdir, system, "moe", ver)
            files.append(check_version(d, ver))
            path = d / "moe_perf.parquet"
            raw = read_parquet(path)
            files.append(path)
            if (d / "reuse.yaml").is_file():
                files.append(d / "reuse.yaml")
            reason = f"older vLLM table: the {MOE_VERSIONS[system]} table of this GPU is kept"
            excl.append(_excluded(raw, "moe_perf", system, ver, reason))
        ver = MOE_VERSIONS[system]
        d = _dir(sysdir, system, "moe", ver)
        files.append(check_version(d, ver))
        path = d / "moe_perf.parquet"
        raw = read_parquet(path)
        files.append(path)
        require_file_columns(raw, cols, path)
        stat = pd.Series("one_run", index=raw.index, dtype=object)
        drop = pd.Series(False, index=raw.index)
        for a in APPENDED:
            if a.system != system:
                continue
            m = _appended_mask(raw, a, path)
            if a.action == "exclude":
                excl.append(_excluded(raw[m], "moe_perf", system, ver, a.note))
                drop |= m
            else:
                stat[m] = "min_of_two_runs"
        other = ~drop & (raw["version"] != ver)
        if other.any():
            i = raw.index[other][0]
            raise DataError(
                f"{path}: row {i}: version {raw.loc[i, 'version']!r} differs from the folder's {ver}"
            )
        shapes = composed_expert_shapes()
        keep = pd.Series(
            [_kept(int(tp), int(ep), str(dist))
             or composed_row(int(tp), int(ep), str(dist), str(dt), (int(h), int(i), int(k), int(x)), shapes)
             for tp, ep, dist, dt, h, i, k, x in zip(
                raw["moe_tp_size"], raw["moe_ep_size"], raw["distribution"], raw["moe_dtype"], raw["hidden_size"],
                raw["inter_size"], raw["topk"], raw["num_experts"], strict=True)],
            index=raw.index,
            dtype=bool,
        )  # fmt: skip
        excl.append(_excluded(raw[~drop & ~keep], "moe_perf", system, ver,
                              "subsampled: layout/distribution outside the kept set (data/README.md)"))  # fmt: skip
        sel = raw[~drop & keep]
        _positive(sel, "latency", path)
        t = pd.DataFrame({
            "system": system, "gpu": SYSTEMS[system]["gpu"], "vllm_version": sel["version"].astype(str),
            "kernel_source": sel["kernel_source"].astype(str), "moe_dtype": sel["moe_dtype"].astype(str),
            "num_tokens": sel["num_tokens"], "hidden_size": sel["hidden_size"], "inter_size": sel["inter_size"],
            "top_k": sel["topk"], "n_experts": sel["num_experts"], "moe_tp": sel["moe_tp_size"],
            "moe_ep": sel["moe_ep_size"], "distribution": sel["distribution"].astype(str),
            "latency_ms": sel["latency"], "latency_stat": stat[sel.index].astype(str),
        })  # fmt: skip
        parts.append(_unique(t, MOE_KEYS, path))
    return pd.concat(parts, ignore_index=True), excl


def _mla(sysdir: Path, files: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    mla, bmm, a2a = [], [], []
    for system in MLA_SYSTEMS:
        gpu = SYSTEMS[system]["gpu"]
        d = _dir(sysdir, system, "mla", MLA_VERSION)
        meta = check_version(d, MLA_VERSION)
        files.append(meta)
        tables = (read_yaml(meta) or {}).get("tables") or {}
        for phase, name in (
            ("context", "mla_context_module_perf"),
            ("generation", "mla_generation_module_perf"),
        ):
            path = d / f"{name}.parquet"
            raw = read_parquet(path)
            files.append(path)
            require_file_columns(raw, ["version", "kernel_source", "model", "mla_dtype", "kv_cache_dtype", "gemm_type",
                           "num_heads", "batch_size", "isl", "tp_size", "step", "latency"], path)  # fmt: skip
            for col, want in (("model", MLA_MODEL), ("tp_size", 1), ("version", MLA_VERSION)) + (
                (("step", 0),) if phase == "context" else (("isl", 1),)
            ):
                bad = raw[col] != want
                if bad.any():
                    i = raw.index[bad][0]
                    raise DataError(
                        f"{path}: row {i}: {col} {raw.loc[i, col]!r}, expected {want!r} in every row"
                    )
            _positive(raw, "latency", path)
            norm = str((tables.get(name) or {}).get("norm_dispatch") or "default")
            t = pd.DataFrame({
                "system": system, "gpu": gpu, "vllm_version": raw["version"].astype(str),
                "kernel_source": raw["kernel_source"].astype(str), "phase": phase,
                "mla_dtype": raw["mla_dtype"].astype(str), "kv_cache_dtype": raw["kv_cache_dtype"].astype(str),
                "gemm_type": raw["gemm_type"].astype(str), "n_heads": raw["num_heads"],
                "batch_size": raw["batch_size"],
                "input_len": raw["isl"] if phase == "context" else pd.NA,
                "context": raw["step"] if phase == "generation" else pd.NA,
                "norm_dispatch": norm, "latency_ms": raw["latency"],
            })  # fmt: skip
            keys = ["kernel_source", "mla_dtype", "kv_cache_dtype", "gemm_type", "n_heads", "batch_size",
                    "input_len" if phase == "context" else "context"]  # fmt: skip
            mla.append(_unique(t, keys, path))
        d = _dir(sysdir, system, "mla_bmm", MLA_VERSION)
        files.append(check_version(d, MLA_VERSION))
        path = d / "mla_bmm_perf.parquet"
        raw = read_parquet(path)
        files.append(path)
        require_file_columns(
            raw,
            ["version", "kernel_source", "op_name", "bmm_dtype", "num_tokens", "num_heads", "latency"],
            path,
        )
        _positive(raw, "latency", path)
        t = pd.DataFrame({
            "system": system, "gpu": gpu, "vllm_version": raw["version"].astype(str),
            "kernel_source": raw["kernel_source"].astype(str), "op_name": raw["op_name"].astype(str),
            "bmm_dtype": raw["bmm_dtype"].astype(str), "num_tokens": raw["num_tokens"],
            "n_heads": raw["num_heads"], "latency_ms": raw["latency"],
        })  # fmt: skip
        bmm.append(_unique(t, ["op_name", "bmm_dtype", "num_tokens", "n_heads"], path))
        d = _dir(sysdir, system, "comm", MLA_VERSION)
        files.append(check_version(d, MLA_VERSION))
        path = d / "moe_a2a_perf.parquet"
        raw = read_parquet(path)
        files.append(path)
        require_file_columns(raw, ["version", "kernel_source", "comm_backend", "phase", "comm_dtype", "ep_size", "node_num",
                       "hidden_size", "topk", "num_experts", "num_tokens", "sms", "latency"], path)  # fmt: skip
        _positive(raw, "latency", path)
        t = pd.DataFrame({
            "system": system, "gpu": gpu, "vllm_version": raw["version"].astype(str),
            "kernel_source": raw["kernel_source"].astype(str), "comm_backend": raw["comm_backend"].astype(str),
            "phase": raw["phase"].astype(str), "comm_dtype": raw["comm_dtype"].astype(str),
            "ep_size": raw["ep_size"], "node_num": raw["node_num"], "hidden_size": raw["hidden_size"],
            "top_k": raw["topk"], "n_experts": raw["num_experts"], "num_tokens": raw["num_tokens"],
            "sms": raw["sms"], "latency_us": raw["latency"],
        })  # fmt: skip
        keys = ["comm_backend", "phase", "comm_dtype", "ep_size", "node_num", "hidden_size", "top_k", "n_experts",
                "sms", "num_tokens"]  # fmt: skip
        a2a.append(_unique(t, keys, path))
    return (pd.concat(mla, ignore_index=True), pd.concat(bmm, ignore_index=True),
            pd.concat(a2a, ignore_index=True))  # fmt: skip


def build_moe_mla_tables(root: str | Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """The aic-moe, aic-mla, aic-mla-bmm, aic-moe-a2a and aic-moe-mla-exclusions tables from the raw folder
    `root` (aiconfigurator-kernels/), and the raw files read."""
    sysdir = Path(root) / SYS_DIR
    if not sysdir.is_dir():
        raise DataError(f"{root}: no {SYS_DIR}/ here; expected the {AIC_NAME} mirror (see its PROVENANCE.md)")
    files: list[Path] = []
    moe, excl = _moe(sysdir, files)
    mla, bmm, a2a = _mla(sysdir, files)
    ex = pd.concat([e for e in excl if len(e)], ignore_index=True)
    ex = ex[list(COLUMN_DOCS["aic-moe-mla-exclusions"])]
    ex = ex.sort_values(["source", "system", "vllm_version", "reason", *_EXCL_GROUP], kind="mergesort")
    tables = {
        "aic-moe": moe[list(COLUMN_DOCS["aic-moe"])],
        "aic-mla": mla[list(COLUMN_DOCS["aic-mla"])],
        "aic-mla-bmm": bmm[list(COLUMN_DOCS["aic-mla-bmm"])],
        "aic-moe-a2a": a2a[list(COLUMN_DOCS["aic-moe-a2a"])],
        "aic-moe-mla-exclusions": ex.reset_index(drop=True),
    }
    return tables, files


def moe_readme_section(tables: dict[str, pd.DataFrame]) -> list[str]:
    """Lines of data/README.md on the MoE/MLA tables: versions kept, subsampling rule, approximations, counts."""
    moe, ex = tables["aic-moe"], tables["aic-moe-mla-exclusions"]
    kept = ", ".join(f"{s} vLLM {v}" for s, v in sorted(MOE_VERSIONS.items()))
    lines = [
        "## AIConfigurator MoE, MLA and expert all-to-all timings (aic-moe, aic-mla, aic-mla-bmm, aic-moe-a2a)",
        "",
        "Same wheel and licence as the aic-* kernel tables above. MoE tables kept (older vLLM tables are",
        f"counted in aic-moe-mla-exclusions): {kept}. A100 has only power-law router rows at vLLM 0.14.0.",
        "Subsampling rule (to keep the CSV small): every MoE row at moe_tp =",
        "moe_ep = 1, all router distributions; plus the balanced rows of the single-node layouts moe_tp = 8 and",
        "moe_ep = 8; plus, for the registry mixtures of experts the kernel composition times, their expert shapes'",
        f"{COMPOSED_DTYPE} {COMPOSED_DISTRIBUTION} rows split over {', '.join(map(str, COMPOSED_TP))} GPUs (moe_ep = 1);",
        "every other layout is counted in the exclusions with the reason `subsampled`. Rows appended",
        "with an approximation that collection_meta.yaml names are excluded (Kimi-K3 SITU-as-SiLU rows on",
        "H100/H200, Kimi-K3 rows of a vLLM preview build on B200); the B200 NVFP4 rows whose latency is the",
        "per-key minimum of two runs are kept with latency_stat = min_of_two_runs. The B200 MLA rows were timed",
        "with eager RMSNorm kernels standing in for the engine's fused ones (norm_dispatch). MLA rows are",
        f"{MLA_MODEL}'s module at the per-GPU head counts; aic-moe-a2a latencies are in microseconds.",
        "",
        f"aic-moe ({len(moe)} rows) by system, dtype and layout:",
        "",
    ]
    lines.append(count_table(moe, ["system", "moe_dtype", "moe_tp", "moe_ep"]))
    lines += ["aic-mla by system and phase:", ""]
    lines.append(count_table(tables["aic-mla"], ["system", "phase", "kv_cache_dtype"]))
    lines += ["aic-moe-mla-exclusions, raw rows by source, system and reason:", ""]
    g = ex.groupby(["source", "system", "vllm_version", "reason"], sort=True)["n_rows"].sum().reset_index()
    lines += ["| source | system | vLLM | reason | rows |", "|---|---|---|---|---|"]
    lines += [
        f"| {r.source} | {r.system} | {r.vllm_version} | {r.reason} | {r.n_rows} |" for r in g.itertuples()
    ]
    lines.append("")
    return lines
