"""Per-row inputs of every estimator: architecture features from the registry and the GPU of a table."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt
import pandas as pd

from slimlib.errors import DataError, UnknownNameError
from slimlib.model.parallel import split_features, tensor_parallel_column
from slimlib.registry.architectures import Architecture, get_architecture
from slimlib.registry.gpus import GPU, get_gpu
from slimlib.schema import row_label

FloatArray = npt.NDArray[np.float64]
Features = dict[str, FloatArray]

#: per-row features (see `slimlib.registry.architectures.Architecture`); for a mixture of experts ``ffn_size`` is
#: the FFN width a token passes through (its ``experts_per_token`` experts), and ``expert_weight_bytes`` the bytes of
#: all experts (``dense_weight_bytes`` the rest)
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
)


def _arch_row(a: Architecture) -> list[float]:
    expert_bytes = (
        a.n_experts * a.n_ffn_matrices * a.hidden_size * a.ffn_size * a.n_layers * a.weight_bytes
        if a.is_moe
        else 0
    )
    values = {
        "n_layers": a.n_layers,
        "hidden_size": a.hidden_size,
        "d_kv": a.d_kv,
        "ffn_size": a.ffn_size_active,
        "n_ffn_matrices": a.n_ffn_matrices,
        "kv_bytes": a.kv_bytes,
        "kv_bytes_per_token": a.kv_bytes_per_token,
        "weight_bytes_total": a.weight_bytes_total,
        "n_heads": a.n_heads,
        "n_kv_heads": a.n_kv_heads,
        "n_experts": a.n_experts,
        "experts_per_token": a.experts_per_token,
        "dense_weight_bytes": a.weight_bytes_total - expert_bytes,
        "expert_weight_bytes": expert_bytes,
    }
    return [float(values[f]) for f in FEATURE_NAMES]


@lru_cache(maxsize=512)
def _arch(name: str) -> Architecture:
    return get_architecture(name)


def model_features(df: pd.DataFrame) -> Features:
    """Architecture features per row of `df` (column ``model``, looked up once per distinct model) plus
    ``batch_size``, ``input_len`` and ``output_len`` as float arrays, per GPU of the row's ``tensor_parallel`` degree
    (column optional, default 1: `slimlib.model.parallel.split_features`; with 1 the features are the model's own)."""
    codes, uniques = pd.factorize(df["model"], sort=True)
    table = np.empty((len(uniques), len(FEATURE_NAMES)))
    for i, name in enumerate(uniques):
        try:
            a = _arch(str(name))
        except UnknownNameError as exc:
            pos = int(np.flatnonzero(codes == i)[0])
            raise UnknownNameError(f"{row_label(df, pos)}: {exc}") from None
        table[i] = _arch_row(a)
    feats: Features = {f: table[codes, j] for j, f in enumerate(FEATURE_NAMES)}
    for col in ("batch_size", "input_len", "output_len"):
        feats[col] = df[col].to_numpy(dtype=float)
    tp = tensor_parallel_column(df)
    out = split_features(feats, tp)
    for k in ("dense_weight_bytes", "expert_weight_bytes"):
        out[k] = feats[k] / tp
    return out


def resolve_gpu(df: pd.DataFrame, gpu: str | None) -> GPU:
    """The one GPU of a table (or the given one); a table spanning several GPUs is an error."""
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
    if other:
        raise DataError(
            f"rows for GPU(s) {', '.join(other)} but the parameters are for {hw.name}; "
            "use parameters calibrated on that GPU, or fit a new set"
        )
    return hw
