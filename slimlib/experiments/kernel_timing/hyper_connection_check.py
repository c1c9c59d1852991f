"""DeepSeek-V4's hyper-connections (mHC) against vLLM's measured ``mhc_pre`` and ``mhc_post`` kernels
(`data/aic-mhc.csv`, notebook 09, beyond the paper).

Two charges are set against each measured curve (GPU, op, hidden size), both from the module's shapes and the
registry's peaks, nothing fitted:

* ``existing``: what the model charged before `slimlib.model.terms.recommended.HYPER_CONNECTIONS`, the mixing
  projection (``(2 + n) n x n D`` weights per site, `slimlib.registry.param_count.hyper_connection_params`) among the
  decode GEMMs: ``max(T F / F_max, W / BW)`` with ``F = 2 x`` its weights per token and ``W`` its weight bytes at the
  serving configuration's ``bytes_per_weight``; ``mhc_post`` has no weights and is charged nothing;
* ``traffic``: the widened residual stream each op reads and writes (half of
  `slimlib.model.serving.hyper_connection_bytes` per token: ``mhc_pre`` reads the ``n`` copies twice and writes the
  layer's input, ``mhc_post`` reads the copies and the layer's output and writes the copies) over the peak bandwidth
  ``BW``, added to the existing charge.

As in the other module checks (`sparse_check`), the op's time at the curve's smallest token count is its base
(launches and the Sinkhorn iterations, which do not grow with the tokens) and each charge's growth beyond it is
added to that base; every other row is scored, by tokens per step below and from `LARGE_TOKENS`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.errors import DataError
from slimlib.experiments.outputs.uncertainty import N_BOOT, ape, bootstrap_mean_ci
from slimlib.model.serving import hyper_connection_bytes, serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.param_count import HC_SITES, hyper_connection_mixing_weights

#: the measured hidden sizes -> the registry's architecture of that shape
MODELS = {4096: "deepseek-v4-flash", 7168: "deepseek-v4-pro"}
#: tokens per step from which a row counts as a large step (prompt chunks) rather than a decode batch
LARGE_TOKENS = 1024
CHARGES = ("existing", "traffic")
_KEYS = ["gpu", "op", "hidden_size"]


def op_bytes(op: str, hidden_size: int, hc_mult: int) -> float:
    """Bytes one token's `op` ('pre' or 'post') moves at all of a layer's sites (module docstring)."""
    if op not in ("pre", "post"):
        raise DataError(f"aic-mhc: op {op!r} is not 'pre' or 'post'")
    return hyper_connection_bytes(hidden_size, hc_mult) / 2.0


def existing_seconds(op: str, hidden_size: int, hc_mult: int, gpu: str, tokens: np.ndarray) -> np.ndarray:
    """Seconds the model's decode GEMMs charge `op` at each token count: the mixing projection's roofline at the
    registry's peaks (module docstring); 0 for 'post'."""
    t = np.asarray(tokens, dtype=float)
    if op == "post":
        return np.zeros_like(t)
    if hidden_size not in MODELS:
        raise DataError(f"aic-mhc: hidden size {hidden_size} is none of {sorted(MODELS)}")
    a = get_architecture(MODELS[hidden_size])
    hw = get_gpu(gpu)
    weights = hyper_connection_mixing_weights(hidden_size, hc_mult)
    nbytes = weights * serving_config(a, gpu).bytes_per_weight
    return np.asarray(np.maximum(t * 2.0 * weights / hw.peak_flops, nbytes / hw.mem_bw), dtype=float)


def hyper_connection_points(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per measured op time: each charge's time (``existing_ms``, ``traffic_ms``: its growth beyond the
    curve's smallest token count added to that count's measured time), its error (``ape_existing_pct``,
    ``ape_traffic_pct``), the traffic's bytes and the measured/modelled growth; role 'base' at the smallest count,
    else 'score'; band 'small' below `LARGE_TOKENS`, else 'large'."""
    df = load("aic-mhc") if table is None else table
    if len(df) == 0:
        raise DataError("aic-mhc: no rows")
    parts = []
    for (gpu, op, hidden), g in df.groupby(_KEYS, sort=True):
        g = g.sort_values("num_tokens", kind="mergesort")
        hc = g["hc_mult"].to_numpy()
        if (g["n_sites"] != HC_SITES).any():
            raise DataError(
                f"aic-mhc: {gpu} {op} hidden {hidden}: an op timed at other than {HC_SITES} sites"
            )
        if (hc != hc[0]).any():
            raise DataError(f"aic-mhc: {gpu} {op} hidden {hidden}: more than one hc_mult")
        t = g["num_tokens"].to_numpy(dtype=float)
        base = float(g["latency_ms"].iloc[0])
        nbytes = t * op_bytes(str(op), int(hidden), int(hc[0]))
        old = 1e3 * existing_seconds(str(op), int(hidden), int(hc[0]), str(gpu), t)
        new = old + 1e3 * nbytes / get_gpu(str(gpu)).mem_bw
        parts.append(g.assign(traffic_bytes=nbytes, existing_ms=base + old - old[0], traffic_ms=base + new - new[0],
                              measured_growth_ms=g["latency_ms"] - base, traffic_growth_ms=new - new[0],
                              role=np.where(t == t[0], "base", "score"),
                              band=np.where(t >= LARGE_TOKENS, "large", "small")))  # fmt: skip
    pts = pd.concat(parts, ignore_index=True)
    for c in CHARGES:
        pts[f"ape_{c}_pct"] = ape(pts["latency_ms"], pts[f"{c}_ms"])
    return pts


def hyper_connection_check(points: pd.DataFrame, *, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per GPU and band of tokens per step (and 'all'), over the scored rows of both ops and hidden sizes: rows,
    each charge's MAPE with its bootstrap 95% interval, and the median modelled/measured time of the traffic
    charge."""
    scored = points[points["role"] == "score"]
    rows = []
    for gpu, g in scored.groupby("gpu", sort=True):
        for band, b in [*g.groupby("band", sort=True), ("all", g)]:
            row: dict[str, object] = {"gpu": gpu, "band": band, "tokens_min": int(b["num_tokens"].min()),
                                      "tokens_max": int(b["num_tokens"].max()), "n_scored": len(b)}  # fmt: skip
            for c in CHARGES:
                mean, lo, hi = bootstrap_mean_ci(
                    b[f"ape_{c}_pct"].to_numpy(), n_boot=n_boot, label=f"mhc {gpu} {band} {c}"
                )
                row.update({f"mape_{c}_pct": mean, f"mape_{c}_lo_pct": lo, f"mape_{c}_hi_pct": hi})
            row["traffic_ratio_median"] = float((b["traffic_ms"] / b["latency_ms"]).median())
            rows.append(row)
    if not rows:
        raise DataError("aic-mhc: no scored rows")
    return pd.DataFrame(rows)


def plot_mhc_check(ax, points: pd.DataFrame, gpu: str, colors: list[str]) -> None:
    """One GPU's panel: the measured op time (markers: pre circles, post crosses; one colour per hidden size of
    `MODELS`), the traffic charge (solid lines) and the existing charge (dotted) against the tokens per step."""
    g = points[points["gpu"] == gpu]
    if g.empty:
        raise DataError(f"aic-mhc: no points for {gpu}")
    for hidden, color in zip(sorted(MODELS), colors, strict=True):
        for op, marker in (("pre", "o"), ("post", "x")):
            c = g[(g["hidden_size"] == hidden) & (g["op"] == op)].sort_values("num_tokens")
            if c.empty:
                raise DataError(f"aic-mhc: no points for {gpu} {op} hidden {hidden}")
            ax.plot(c["num_tokens"], c["latency_ms"], ls="none", marker=marker, markersize=2.0, color=color,
                    label=f"{op}, D={hidden}")  # fmt: skip
            ax.plot(c["num_tokens"], c["traffic_ms"], ls="-", linewidth=0.7, color=color)
            ax.plot(c["num_tokens"], c["existing_ms"], ls=":", linewidth=0.7, color=color)
    ax.axvline(float(LARGE_TOKENS), color="0.5", linewidth=0.5, linestyle="--")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
