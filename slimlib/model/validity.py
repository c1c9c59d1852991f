"""Physical validity of a configuration, in one place: what `slim fit`, `predict`, `advise`, `plan` and `transfer`
accept before any model runs.

* architecture sizes positive (a config.json with ``hidden_size`` 0 is not a model);
* the context window: ``IL + OL <= max_position_embeddings`` (where the config fixes one);
* tensor parallelism as vLLM allows it: ``num_attention_heads % TP == 0`` and TP at most the GPUs of one node
  (`GPUS_PER_NODE`);
* memory, per GPU of the group, from the row's resolved serving configuration (precision, parallel sizes and engine
  settings: `slimlib.model.serving.ServingConfig`): a KV pool <= 0 is an error that shows the arithmetic; one request longer than the pool, or more requests than the pool has blocks (each running request
  holds at least one), is an error; a batch whose KV cache exceeds the pool is a `PreemptionWarning` (vLLM would
  preempt and recompute: `slim` charges the recompute in a static batch (`slimlib.model.preemption`), not under
  continuous batching, and the other methods not at all);
* the all-reduce latency: rows with TP > 1 on a GPU whose registry latency is another GPU's figures
  (`slimlib.registry.gpus.GPU.allreduce_proxy`, the AMD GPUs among them) get a `ProxyLatencyWarning` that names it
  (their all-reduce time, and so their TP scaling, rests on that proxy; `check_allreduce`);
* parameters: finite numbers within their `ParamSpec` bounds, on load and on transfer;
* a measured throughput within the device's compute roofline (`check_measured_throughput`, before a fit).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd

from slimlib.errors import DataError, UnknownNameError
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.features import serving_configs
from slimlib.model.memory import GIB, tensor_parallel_refusal
from slimlib.model.methods import get_method, model_from_dict, read_params_document
from slimlib.model.serving import ServingConfig
from slimlib.registry.architectures import Architecture, get_architecture
from slimlib.registry.gpus import GPU, get_gpu
from slimlib.schema import row_chunks, row_label


class PreemptionWarning(UserWarning):
    """A batch whose KV cache exceeds the engine's pool: vLLM would preempt requests (`slim` charges their
    recompute in a static batch only)."""


class ProxyLatencyWarning(UserWarning):
    """Tensor-parallel rows on a GPU whose all-reduce latency in the registry is another GPU's figures."""


def canonical_model(name: str) -> str:
    """Identity of a model: its content (`Architecture.identity`), so aliases and copies of one config.json are one
    model and two different configs in folders of one name are two; the lower-cased name when it is unknown."""
    try:
        return get_architecture(name).identity
    except (UnknownNameError, DataError):
        return name.strip().lower()


def canonical_gpu(name: str) -> str:
    """Registry name of a GPU (aliases and case folded); the lower-cased name when the registry lacks it."""
    try:
        return get_gpu(name).name
    except (UnknownNameError, DataError):
        return name.strip().lower()


#: column -> canonical-key function, for `slimlib.schema.validate_table(canonical=...)`: duplicates are found
#: after alias normalization (``LLAMA-2-7B`` is ``llama-2-7b``, ``h100-64gb`` is ``h100-sxm-64gb``) and by a
#: model's content (two config.json files in folders both named ``model`` are two models)
CANONICAL = {"model": canonical_model, "gpu": canonical_gpu}


def check_architecture(arch: Architecture, where: str = "") -> None:
    """DataError unless layers, hidden size, heads, KV heads, head width, FFN width and vocabulary are > 0."""
    sizes = {
        "num_hidden_layers": arch.n_layers,
        "hidden_size": arch.hidden_size,
        "num_attention_heads": arch.n_heads,
        "num_key_value_heads": arch.n_kv_heads,
        "head_dim": arch.head_dim,
        "intermediate_size": arch.ffn_size,
        "vocab_size": arch.vocab_size,
    }
    bad = [f"{k} = {v}" for k, v in sizes.items() if not v or v <= 0]
    if bad:
        at = f"{where}: " if where else ""
        raise DataError(
            f"{at}model {arch.name!r} has {', '.join(bad)}; every size of a model must be positive: fix its config.json"
        )


def check_tensor_parallel(arch: Architecture, tp: float, where: str = "") -> None:
    """DataError unless TP is a whole number in [1, GPUS_PER_NODE] dividing the attention heads (vLLM's rule,
    `tensor_parallel_refusal`)."""
    refusal = tensor_parallel_refusal(arch.name, arch.n_heads, arch.n_kv_heads, tp)
    if refusal:
        raise DataError(f"{where}: {refusal}" if where else refusal)


def allreduce_proxy_message(device: GPU, tp: float, where: str = "") -> str | None:
    """The `ProxyLatencyWarning` text when `tp` > 1 on a GPU whose all-reduce latency is a proxy (module
    docstring); None when no warning is due."""
    if not (float(tp) > 1 and device.allreduce_proxy):
        return None
    at = f"{where}: " if where else ""
    return (
        f"{at}tensor_parallel = {float(tp):g} on {device.name}, whose all-reduce latency in the registry is not "
        f"measured on it ({device.allreduce_source}); the predicted all-reduce time and TP scaling rest on that figure"
    )


def check_allreduce(device: GPU, tp: float, where: str = "") -> None:
    """`ProxyLatencyWarning` with `allreduce_proxy_message` where one is due."""
    message = allreduce_proxy_message(device, tp, where)
    if message is not None:
        warnings.warn(message, ProxyLatencyWarning, stacklevel=2)


def check_context(arch: Architecture, input_len: float, output_len: float, where: str = "") -> None:
    """DataError when ``IL + OL`` exceeds the model's context window (``max_position_embeddings``)."""
    total = float(input_len) + float(output_len)
    if arch.max_position and total > arch.max_position:
        at = f"{where}: " if where else ""
        raise DataError(
            f"{at}IL + OL = {total:g} tokens exceeds the {arch.max_position}-token context window of {arch.name} "
            "(max_position_embeddings); shorten the lengths"
        )


def check_memory(
    config: ServingConfig,
    batch_size: Any,
    input_len: Any,
    output_len: Any,
    *,
    labels: Any = None,
    pool_bytes: float | None = None,
    preempted: dict[tuple[str, str, float], list[Any]] | None = None,
) -> None:
    """Batch sizes and lengths (arrays) against the KV pool of one GPU of `config` (`ServingConfig.kv_pool`, or
    `pool_bytes`): DataError when the pool holds no block, when one request cannot fit or more requests run than
    the pool has blocks; `PreemptionWarning` when a batch's KV exceeds the pool. `labels(i)` names row i in
    messages. With `preempted`, the warning is not given but counted there, by (model, GPU, TP): [the first such
    row's text, its row count] (`check_table` warns once for all chunks)."""
    if pool_bytes is None:
        config.check_fits()
        pool = config.kv_pool
    else:
        pool = float(pool_bytes)
    pool_blocks = math.floor(pool / config.block_bytes)
    block_bytes = config.block_bytes
    b = np.atleast_1d(np.asarray(batch_size, dtype=float))
    tokens = np.atleast_1d(np.asarray(input_len, dtype=float) + np.asarray(output_len, dtype=float))
    b, tokens = np.broadcast_arrays(b, tokens)
    blocks = config.request_blocks(tokens)
    where = f"{config.model} on {config.gpu} (tensor_parallel {config.tensor_parallel:g})"

    def name(i: int) -> str:
        return f"{labels(i)}: " if labels is not None else ""

    one = np.flatnonzero(blocks > pool_blocks)
    if one.size:
        i = int(one[0])
        raise DataError(
            f"{name(i)}one request of {tokens[i]:g} tokens needs {blocks[i] * block_bytes / GIB:.3g} GiB of KV cache, "
            f"more than the {pool / GIB:.3g} GiB pool of {where}; shorten the lengths or use more GPUs"
        )
    many = np.flatnonzero(b > pool_blocks)
    if many.size:
        i = int(many[0])
        raise DataError(
            f"{name(i)}batch_size = {b[i]:g} exceeds the {pool_blocks} KV blocks of {where}; no GPU memory holds "
            f"that many requests at once: use a batch size <= {pool_blocks}"
        )
    over = np.flatnonzero(b * blocks > pool_blocks)
    if over.size:
        i = int(over[0])
        first = (
            f"{name(i)}batch_size {b[i]:g} x {tokens[i]:g} tokens needs {b[i] * blocks[i] * block_bytes / GIB:.3g} "
            f"GiB of KV cache, more than the {pool / GIB:.3g} GiB pool of {config.model} on {config.gpu}"
        )
        if preempted is None:
            warnings.warn(_preemption_message(first, over.size), PreemptionWarning, stacklevel=2)
        else:
            key = (config.identity, config.gpu, float(config.tensor_parallel))
            preempted.setdefault(key, [first, 0])[1] += int(over.size)


def _preemption_message(first: str, rows: int) -> str:
    return (
        f"{first} ({rows} row(s) like it): vLLM would preempt requests; slim charges their recompute in a "
        "static batch, not under continuous batching, and the other methods do not describe it"
    )


def check_table(df: pd.DataFrame, gpu: str | GPU | None = None) -> None:
    """Every physical check on a configuration table (columns ``model``, ``batch_size``, ``input_len``,
    ``output_len``, optional ``gpu`` and ``tensor_parallel``), per distinct model and TP; errors name the row.
    `gpu` is the GPU of the parameters (default: the row's ``gpu``). The rows are checked a chunk at a time
    (`checking_rows`: memory of one chunk), with one `PreemptionWarning` per model, GPU and TP and one
    `ProxyLatencyWarning` per GPU and TP for the whole table."""
    with checking_rows(gpu) as check:
        for part in row_chunks(df):
            check(part)


@contextlib.contextmanager
def checking_rows(gpu: str | GPU | None = None) -> Iterator[Callable[[pd.DataFrame], None]]:
    """`check_table` for a table that arrives in chunks (`row_chunks`, e.g. as `slim predict` writes them): call
    the yielded function on each chunk; the `ProxyLatencyWarning`s (one per GPU and TP) and `PreemptionWarning`s
    (one per model, GPU and TP) for all the chunks are given when the block ends without an error."""
    preempted: dict[tuple[str, str, float], list[Any]] = {}
    proxied: dict[tuple[str, float], str] = {}
    yield lambda part: _check_rows(part, gpu, preempted, proxied)
    for message in proxied.values():
        warnings.warn(message, ProxyLatencyWarning, stacklevel=3)
    for first, rows in preempted.values():
        warnings.warn(_preemption_message(first, rows), PreemptionWarning, stacklevel=3)


def _check_rows(
    df: pd.DataFrame,
    gpu: str | GPU | None,
    preempted: dict[tuple[str, str, float], list[Any]],
    proxied: dict[tuple[str, float], str],
) -> None:
    il = df["input_len"].to_numpy(dtype=float)
    ol = df["output_len"].to_numpy(dtype=float)
    b = df["batch_size"].to_numpy(dtype=float)
    m_codes, m_names = pd.factorize(df["model"])
    first_of_model = np.unique(m_codes, return_index=True)[1]
    for k, first in enumerate(first_of_model):  # sizes before any arithmetic on them
        try:
            arch = get_architecture(str(m_names[k]))
        except UnknownNameError as exc:
            raise UnknownNameError(f"{row_label(df, int(first))}: {exc}") from None
        check_architecture(arch, row_label(df, int(first)))
    hw = get_gpu(gpu) if gpu is not None else None  # the parameters' GPU for every row
    # vLLM's refusals (precision, tensor parallel split and the one-node limit, ...) name the first row
    codes, configs = serving_configs(df, hw, gpu_column=hw is None, within_node=True)
    by_config = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[by_config], np.arange(len(configs) + 1))
    for j, s in enumerate(configs):  # in the order of their first row
        rows = by_config[bounds[j] : bounds[j + 1]]
        first = int(rows[0])
        where = row_label(df, first)

        def label(i: int, rows: Any = rows) -> str:
            return row_label(df, int(rows[i]))

        arch = get_architecture(str(df["model"].iloc[first]))
        t = float(s.tensor_parallel)
        if arch.max_position:
            too = np.flatnonzero(il[rows] + ol[rows] > arch.max_position)
            if too.size:
                check_context(arch, il[rows][too[0]], ol[rows][too[0]], label(int(too[0])))
        if not s.gpu:
            continue
        device = get_gpu(s.gpu)
        if t > 1 and not device.link_bw:
            raise DataError(
                f"{where}: tensor_parallel = {t:g} on {device.name}, whose registry entry has no "
                "interconnect bandwidth (link_bw); add it to slimlib.registry.gpus with its source, or use rows "
                "with tensor_parallel 1"
            )
        proxy = allreduce_proxy_message(device, t, where)
        if proxy is not None:
            proxied.setdefault((device.name, t), proxy)
        s.check_fits(where)
        check_memory(s, b[rows], il[rows], ol[rows], labels=label, preempted=preempted)


def check_measured_throughput(df: pd.DataFrame, gpu: str | GPU | None = None) -> None:
    """DataError naming the row where a measured ``throughput_tok_s`` asks each GPU for more FLOP/s than its
    highest tensor peak at any precision for the linear layers alone (``throughput x`` the serving configuration's
    `linear_flops_per_token`): no engine serves faster, so the measurement cannot be right. `gpu` as in
    `check_table`."""
    if "throughput_tok_s" not in df.columns or df.empty:
        return
    data = df.reset_index(drop=True)
    hw = get_gpu(gpu) if gpu is not None else None
    codes, configs = serving_configs(data, hw, gpu_column=hw is None)
    throughput = pd.to_numeric(data["throughput_tok_s"], errors="coerce").to_numpy(dtype=float)
    for j, s in enumerate(configs):
        if not s.gpu:
            continue
        device = get_gpu(s.gpu)
        precision, peak = max(device.peaks.items(), key=lambda kv: kv[1])
        rows = np.flatnonzero(codes == j)
        with np.errstate(over="ignore", invalid="ignore"):  # 1e300 tok/s is refused below, not warned about
            need = throughput[rows] * s.linear_flops_per_token
        over = rows[need > peak]
        if over.size:
            i = int(over[0])
            with np.errstate(over="ignore"):
                flops = throughput[i] * s.linear_flops_per_token
            raise DataError(
                f"{row_label(df, i)}: throughput_tok_s = {throughput[i]:.4g} needs "
                f"{f'{flops:.3g}' if math.isfinite(flops) else 'infinitely many'} FLOP/s per GPU for {s.model}'s "
                "linear layers alone, "
                f"above {device.name}'s highest peak ({peak:.3g} FLOP/s at {precision}); no engine serves that "
                "fast: check the row's throughput (tokens per second of the whole server) and units"
            )


def check_param_values(doc: dict[str, Any], where: str) -> None:
    """DataError unless the variant is known and every parameter is a finite number within its bounds."""
    try:
        method = get_method(str(doc["variant"]))
    except UnknownNameError as exc:
        raise UnknownNameError(f"{where}: field 'variant': {exc}") from None
    params = doc["params"]
    for k, v in params.items():
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            raise DataError(
                f"{where}: parameter {k!r} is {v!r}, not a finite number; regenerate the file with `slim fit`"
            )
    if issubclass(method.cls, CalibratedModel):
        specs = method.cls(**method.options).param_specs()
        for s in specs:
            if s.name not in params:
                raise DataError(
                    f"{where}: parameter {s.name!r} of {method.name!r} is missing; regenerate the file"
                )
            v = float(params[s.name])
            if not s.lower <= v <= s.upper:
                raise DataError(
                    f"{where}: parameter {s.name} = {v:g} is outside its bounds [{s.lower:g}, {s.upper:g}] "
                    f"({s.doc}); regenerate the file with `slim fit`"
                )


def load_checked_params(path: str) -> Any:
    """`load_params` with the parameter checks (`check_param_values`) first."""
    doc, where = read_params_document(path)
    check_param_values(doc, where)
    return model_from_dict(doc, where)
