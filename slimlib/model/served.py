"""TTFT and TPOT as a served request sees them, from the model's own step costs (beyond the paper).

A table row says how its requests reach the engine (column ``client``, `client_codes`): ``static`` (one batch of B
requests started together: offline sweeps; also a true ``static_batch`` column), ``concurrency`` (a closed loop of C
clients, as ``vllm bench serve --max-concurrency C``: column ``max_concurrency``, else C = B; the default where a row
says nothing, and `predict` says so)
or ``burst`` (``num_prompts`` requests at once, at most B running: ``--request-rate inf`` with ``--max-num-seqs B``).
The replay of vLLM's scheduler (`slimlib.model.schedule`; the token budget ``max_num_batched_tokens`` with chunked
prefill, else V0's ``max(max_model_len, 2048)``) gives the steps each request waits through, prefills in and
decodes in; the model times them with its own terms:

* a step that decodes ``d`` sequences costs ``c0 + c1 d``: the model's decode time at the effective batch
  ``B_eff`` over the replay's decode steps, ``T_dec(B_eff) / (OL - 1)`` (vLLM samples the first token in the
  prompt's step, so OL - 1 steps decode), and its slope in the batch, from ``T_dec`` at a second batch (half of
  ``B_eff``; 2 where it is 1);
* a prompt token costs ``tau = T_pre(B_eff) / (B_eff IL)``, whatever step carries it;
* the step times are scaled by ``kappa`` so that the replay keeps the batch model's time ``T = T_pre + T_dec`` and
  throughput, ``B_eff`` requests per ``E2E = t_fixed + T``, the replay saying only how that time splits: a static
  batch of B ends at ``E2E B / B_eff - t_fixed`` (its last request's end; ``T`` where all B run at once); a closed
  loop of C clients always has C requests out, so by Little's law a request's mean time from its arrival to its
  end is ``E2E C / B_eff - t_fixed`` (C above the B running: the others wait for a slot); a burst keeps ``B_eff``
  requests in the engine, so a request's mean time there (its first step to its last) is ``T``, its queue for a
  slot on top.

Per request: ``queue`` the steps before its first (a closed-loop request sent while the engine runs waits for that
step; a burst, or a closed loop of more clients than slots, waits for a slot), ``TTFT = t_fixed + queue + its steps
to its first token``, ``TPOT = (its steps after that) / (OL - 1)``, and its ``E2E = TTFT + (OL - 1) TPOT``.
`served_latencies` gives the means over the scored requests and their 50th, 90th and 99th percentiles (numpy's
linear interpolation, as ``vllm bench serve`` reports them).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.errors import DataError
from slimlib.model.features import Features, FloatArray
from slimlib.model.schedule import CLIENTS, Windows, replay
from slimlib.schema import flag_column

#: client -> its code in the features (``client``); `CLIENTS` order
CLIENT_CODE = {name: float(i) for i, name in enumerate(CLIENTS)}
#: the client a row that says none is served by
DEFAULT_CLIENT = "concurrency"
#: percentiles of TTFT, TPOT and E2E `served_latencies` gives, and the quantities it gives them of
PERCENTILES = (50, 90, 99)
SPREAD = ("ttft", "tpot", "e2e")
#: vLLM V0's token budget of a step without chunked prefill, at least (``max(max_model_len, 2048)``)
UNCHUNKED_MIN_BUDGET = 2048


def client_codes(df: pd.DataFrame) -> tuple[FloatArray, int]:
    """Per row, the code of its client (`CLIENT_CODE`: column ``client``, else ``static`` where a ``static_batch``
    column is true, else `DEFAULT_CLIENT`) and how many rows said none; DataError naming the row for an unknown
    client, a client that contradicts ``static_batch``, a ``burst`` without ``num_prompts``, a closed loop's
    ``max_concurrency`` that is not a whole number of clients at least ``batch_size``, or a ``num_prompts`` below 1 or
    the requests its client keeps out (a closed loop's clients, a burst's batch), infinite, or (a burst's) not a whole
    number."""
    n = len(df)
    static = flag_column(df, "static_batch", False)
    given = df["client"] if "client" in df.columns else pd.Series([None] * n, index=df.index)
    codes = np.empty(n)
    unsaid = 0
    for i, (value, st) in enumerate(zip(given, static, strict=True)):
        name = "" if pd.isna(value) else str(value).strip().lower()
        if not name:
            name = "static" if st else DEFAULT_CLIENT
            unsaid += not st
        if name == "rate":
            raise DataError(
                f"row {i + 1}: client 'rate' (requests paced at a rate) is not modelled; measure at a fixed "
                "concurrency (--max-concurrency) or with every request at once, or drop the row"
            )
        if name not in CLIENT_CODE:
            raise DataError(f"row {i + 1}: client {value!r} is not one of {', '.join(CLIENTS)}")
        if st and name != "static":
            raise DataError(f"row {i + 1}: static_batch is true but client is {name!r}; give one of the two")
        codes[i] = CLIENT_CODE[name]
    if "num_prompts" in df.columns:
        prompts = pd.to_numeric(df["num_prompts"], errors="coerce").to_numpy(dtype=float)
    else:
        prompts = np.full(n, np.nan)
    burst = np.flatnonzero((codes == CLIENT_CODE["burst"]) & ~(prompts > 0))
    if burst.size:
        raise DataError(
            f"row {burst[0] + 1}: client 'burst' needs num_prompts (the requests sent at once); add the column"
        )
    sent = (codes != CLIENT_CODE["static"]) & ~np.isnan(prompts)
    # a burst's requests are a count; a closed loop's may be a median over repeats
    fraction = (codes == CLIENT_CODE["burst"]) & (prompts != np.round(prompts))
    bad = np.flatnonzero(sent & ((prompts < 1) | ~np.isfinite(prompts) | fraction))
    if bad.size:
        raise DataError(
            f"row {bad[0] + 1}: num_prompts = {prompts[bad[0]]:g}; give the requests the run sent, a whole number "
            "of 1 or more"
        )
    b = _batch_sizes(df)
    loop = codes == CLIENT_CODE["concurrency"]
    c = _max_concurrency(df)
    odd = np.flatnonzero(loop & ~np.isnan(c) & (~np.isfinite(c) | (c != np.round(c)) | (c < 1)))
    if odd.size:
        raise DataError(
            f"row {odd[0] + 1}: max_concurrency = {c[odd[0]]:g}; give the clients of the closed loop, a whole number "
            "of 1 or more (vLLM bench serve --max-concurrency)"
        )
    below = np.flatnonzero(loop & (c < b))
    if below.size:
        i = below[0]
        raise DataError(
            f"row {i + 1}: max_concurrency = {c[i]:g} clients never keep batch_size = {b[i]:g} running; give "
            f"batch_size {c[i]:g}, the smaller of --max-num-seqs and --max-concurrency, as `slim data ingest` does"
        )
    out = closed_loop_clients(df, codes)  # the requests a client keeps out
    few = np.flatnonzero(sent & (prompts < out))
    if few.size:
        i = few[0]
        name = "max_concurrency" if out[i] != b[i] else "batch_size"
        raise DataError(
            f"row {i + 1}: num_prompts = {prompts[i]:g} requests never keep {name} = {out[i]:g} out; give {name} "
            f"{prompts[i]:g}, or more prompts"
        )
    return codes, unsaid


def running_cap(df: pd.DataFrame, default: FloatArray) -> FloatArray:
    """Per row of `df`: the most sequences its server runs, its ``max_num_seqs`` where the row gives one (DataError
    naming the row where that is below ``batch_size``, the requests decoded together), else its ``batch_size`` where
    that is above the `default` (vLLM's, for the row's GPU): a row's batch is the ``--max-num-seqs`` it ran at."""
    b = _batch_sizes(df)
    given = (
        pd.to_numeric(df["max_num_seqs"], errors="coerce").to_numpy(dtype=float)
        if "max_num_seqs" in df.columns
        else np.full(len(df), np.nan)
    )
    below = np.flatnonzero(given < b)
    if below.size:
        i = below[0]
        raise DataError(
            f"row {i + 1}: batch_size = {b[i]:g} above max_num_seqs = {given[i]:g}: vLLM decodes at most "
            f"max_num_seqs together; give batch_size {given[i]:g} (and max_concurrency {b[i]:g} for a closed loop "
            "of that many clients)"
        )
    return np.asarray(
        np.where(np.isnan(given), np.maximum(np.asarray(default, dtype=float), b), given), dtype=float
    )


def _max_concurrency(df: pd.DataFrame) -> FloatArray:
    """The optional ``max_concurrency`` column as floats, NaN where absent or empty; DataError naming the row for a
    cell that is not a number."""
    if "max_concurrency" not in df.columns:
        return np.full(len(df), np.nan)
    raw = df["max_concurrency"]
    c = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip() == "").to_numpy()
    text = np.flatnonzero(np.isnan(c) & ~blank)
    if text.size:
        raise DataError(
            f"row {text[0] + 1}: max_concurrency = {str(raw.iloc[text[0]])[:80]!r} is not a number of clients"
        )
    return np.asarray(c, dtype=float)


def _batch_sizes(df: pd.DataFrame) -> FloatArray:
    """The ``batch_size`` column as floats, NaN where absent."""
    if "batch_size" not in df.columns:
        return np.full(len(df), np.nan)
    return np.asarray(pd.to_numeric(df["batch_size"], errors="coerce").to_numpy(dtype=float), dtype=float)


def closed_loop_clients(df: pd.DataFrame, codes: FloatArray) -> FloatArray:
    """Per row of `df` with client `codes`: a closed loop's clients, its ``max_concurrency`` where the column gives
    one (checked by `client_codes`), else ``batch_size``; ``batch_size`` for the other clients (NaN without the
    column)."""
    b = _batch_sizes(df)
    c = _max_concurrency(df)
    loop = (np.asarray(codes) == CLIENT_CODE["concurrency"]) & np.isfinite(c)
    return np.asarray(np.where(loop, c, b), dtype=float)


def _slope(
    dec_b: FloatArray, dec_2: FloatArray, b: FloatArray, b2: FloatArray, ol: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """(c0, c1) of the decode step ``c0 + c1 d`` through the model's decode steps at batches `b` and `b2`."""
    steps = np.maximum(ol - 1.0, 1.0)
    t_b, t_2 = dec_b / steps, dec_2 / steps
    with np.errstate(divide="ignore", invalid="ignore"):
        c1 = np.where(b != b2, (t_b - t_2) / (b - b2), 0.0)
    c1 = np.clip(np.nan_to_num(c1), 0.0, None)
    c0 = np.clip(t_b - c1 * b, 0.0, None)
    return c0, c1


def second_batch(b: FloatArray) -> FloatArray:
    """The batch at which the decode step's slope is taken beside `b`: half of it, 2 where it is below 2."""
    return np.asarray(np.where(b >= 2.0, b / 2.0, 2.0), dtype=float)


def _weighted_percentiles(values: np.ndarray, weights: np.ndarray, qs: tuple[int, ...]) -> list[float]:
    """numpy's linear-interpolation percentiles of `values` repeated `weights` (whole) times, without the repeat."""
    if values.size == 1:
        return [float(values[0])] * len(qs)
    order = np.argsort(values, kind="stable")
    v, ends = values[order], np.cumsum(weights[order].astype(np.int64))
    h = (ends[-1] - 1) * np.asarray(qs, dtype=float) / 100.0
    lo = np.floor(h).astype(np.int64)
    low = v[np.searchsorted(ends, lo, side="right")]  # the lo-th of the repeated values
    high = v[np.searchsorted(ends, np.minimum(lo + 1, ends[-1] - 1), side="right")]
    return [float(x) for x in low + (h - lo) * (high - low)]


#: the window features of a row (`window_features`): the scored requests' mean (steps with a decode, decodes,
#: prefill tokens) over each window of `slimlib.model.schedule.Windows`, and ``last``: the largest of each counter
#: from arrival to end (for a static batch, whose requests all arrive at 0, the window of the one that ends last)
WINDOW_KEYS = tuple(f"w_{w}_{k}" for w in ("wait", "ttft", "e2e", "last") for k in ("a", "d", "p"))


def clients(f: Features) -> FloatArray:
    """Per row of features `f` (after the effective batch): the requests its client keeps out, a closed loop's
    ``clients`` (``max_concurrency``, which may exceed the batch the server runs: the others wait for a slot), else
    the requested batch (``batch_cap``)."""
    cap = np.asarray(f.get("batch_cap", f["batch_size"]), dtype=float)
    loop = np.asarray(f.get("clients", cap), dtype=float)
    return np.asarray(np.where(np.asarray(f["client"]) == CLIENT_CODE["concurrency"], loop, cap), dtype=float)


def _replay_keys(f: Features) -> np.ndarray:
    """Per row of features `f` (after the effective batch), the arguments of its `replay` as an (n, 8) array:
    client code, concurrency (`clients`), IL, OL, token budget, slots (at most the requested batch), chunked, prompts
    (0: the client's default)."""
    cap = np.round(np.asarray(f.get("batch_cap", f["batch_size"]), dtype=float))
    slots = np.maximum(np.floor(np.minimum(np.minimum(f["kv_slots"], f["max_num_seqs"]), cap)), 1.0)
    cap = np.round(clients(f))
    chunked = np.asarray(f["chunked_prefill"], dtype=float) > 0
    whole = np.maximum(np.asarray(f.get("max_model_len", 0.0 * cap), dtype=float), UNCHUNKED_MIN_BUDGET)
    budget = np.where(chunked, np.asarray(f["max_num_batched_tokens"], dtype=float), whole)
    prompts = np.asarray(f["num_prompts"], dtype=float)
    prompts = np.where(np.isfinite(prompts) & (prompts > 0), prompts, 0.0)
    lengths = [np.round(np.asarray(f[k], dtype=float)) for k in ("input_len", "output_len")]
    return np.column_stack(
        [np.asarray(f["client"], dtype=float), cap, *lengths, budget, slots, chunked, prompts]
    )


def _replay_of(key: np.ndarray) -> Windows:
    c, cap, il, ol, budget, slots, chunked, prompts = key
    return replay(
        CLIENTS[int(c)], int(cap), int(il), int(ol), int(budget), int(slots), bool(chunked), int(prompts)
    )


def window_features(f: Features) -> dict[str, FloatArray]:
    """`WINDOW_KEYS` per row of features `f` (after the effective batch): the replay's mean windows, one replay
    per distinct configuration."""
    keys = _replay_keys(f)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    means = np.zeros((len(unique), len(WINDOW_KEYS)))
    for j, key in enumerate(unique):
        w = _replay_of(key)
        avg = [np.average(x, axis=0, weights=w.weight) for x in (w.wait, w.ttft, w.e2e)]
        means[j] = np.concatenate([*avg, (w.wait + w.e2e).max(axis=0)])
    out = means[np.asarray(inverse).ravel()]
    return {k: out[:, j] for j, k in enumerate(WINDOW_KEYS)}


def served_latencies(
    f: Features, pre: FloatArray, dec: FloatArray, e2e: FloatArray, dec_2: FloatArray, detail: bool = False
) -> dict[str, FloatArray]:
    """Per row of features `f` (after the effective batch and with `window_features`), from the model's prefill
    `pre`, decode `dec` and E2E `e2e` at ``B_eff`` and its decode `dec_2` at `second_batch`: the means ``ttft``,
    ``tpot`` and ``queue`` and, with `detail`, ``ttft_pNN``, ``tpot_pNN`` and ``e2e_pNN`` for `PERCENTILES` (module
    docstring)."""
    b = np.asarray(f["batch_size"], dtype=float)
    il, ol = np.asarray(f["input_len"], dtype=float), np.asarray(f["output_len"], dtype=float)
    c0, c1 = _slope(dec, dec_2, b, second_batch(b), ol)
    with np.errstate(divide="ignore", invalid="ignore"):
        tau = np.where(b * il > 0, pre / (b * il), 0.0)
        coef = np.stack([c0, c1, tau])

        def mean(window: str) -> FloatArray:
            return np.asarray(sum(coef[j] * f[f"w_{window}_{k}"] for j, k in enumerate("adp")), dtype=float)

        engine = mean("e2e")
        fixed = e2e - pre - dec
        client = np.asarray(f["client"], dtype=float)
        cap = clients(f)
        span = np.select(
            [client == CLIENT_CODE["static"], client == CLIENT_CODE["concurrency"]],
            [mean("last"), mean("wait") + engine], engine,
        )  # fmt: skip
        target = np.where(
            client == CLIENT_CODE["burst"], pre + dec, e2e * np.maximum(cap, b) / np.maximum(b, 1.0) - fixed
        )
        k = np.where(span > 0, target / span, 1.0)
        later = ol - 1.0
        first = mean("ttft")
        out = {
            "queue": k * mean("wait"),
            "ttft": fixed + k * (mean("wait") + first),
            "tpot": np.where(later > 0, k * (engine - first) / later, np.nan),
        }
    if detail:
        out.update({f"{q}_p{p}": np.full(len(b), np.nan) for q in SPREAD for p in PERCENTILES})
        keys = _replay_keys(f)
        for i in range(len(b)):
            if not np.isfinite(out["ttft"][i]):
                continue
            w = _replay_of(keys[i])
            per = {
                "ttft": fixed[i] + k[i] * (w.wait + w.ttft) @ coef[:, i],
                "e2e": fixed[i] + k[i] * (w.wait + w.e2e) @ coef[:, i],
            }
            if later[i] > 0:
                per["tpot"] = k[i] * (w.e2e - w.ttft) @ coef[:, i] / later[i]
            for name, v in per.items():
                for p, value in zip(
                    PERCENTILES, _weighted_percentiles(v, w.weight, PERCENTILES), strict=True
                ):
                    out[f"{name}_p{p}"][i] = value
    return out
