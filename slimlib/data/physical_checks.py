"""Physical checks of ingested serving runs: what a measured run must satisfy to be fitted or scored.

Every run that `slimlib.data.ingest` reads (the project's engine campaigns and users' own ``vllm bench serve``
files) goes through `check_runs`; a run failing any check is listed in its exclusions with the check's name and
the reason, and is never fitted nor used as a measured best. The checks, in `CHECKS` order:

* ``completed``: completed requests == requested (``num_prompts``);
* ``failed``: no failed request;
* ``tokens``: ``total_output_tokens`` == requests x OL exactly (``--ignore-eos``) and ``total_input_tokens``
  within `INPUT_TOKENS_REL_TOL` of requests x IL, or one token per request where that is more (the requested
  lengths);
* ``latency_sum``: TTFT + (OL - 1) x TPOT == mean E2E within `LATENCY_SUM_REL_TOL` (vLLM defines a request's
  TPOT as (E2E - TTFT) / (OL - 1), so with every request at OL tokens the means obey this identity exactly);
* ``latency_order``: a request's time to its first token and its later token gaps lie inside its E2E (mean TTFT
  <= mean E2E, (OL - 1) x mean TPOT <= mean E2E), the two inside the run's span where it says its client
  (`slimlib.schema.latency_order_problems`) and each latency's percentiles are in order (p50 <= p90 <= p99 of
  TTFT, TPOT, ITL and E2E, where the run reports them);
* ``tpot_weight_read``: mean TPOT >= the time to read one GPU's weights once (`ServingConfig.weights` over the
  device's ``mem_bw``): every decode step reads every weight at least once (on the host CPU a small model's
  weights may stay in the last-level cache, so the bound is loose there; the committed campaign's passing runs
  sit >= 2.6x above it and its three single-chunk runs 65-90x below);
* ``throughput_roofline``: total token throughput <= the compute roofline, peak FLOP/s (the largest of the
  device's bf16/fp8/fp4 peaks) over the linear FLOPs per token (`ServingConfig.linear_flops_per_token`): every
  prompt and output token passes through every linear layer, and attention only adds FLOPs, so this is an upper
  bound (the memory roofline is the TPOT check's; the committed campaign reaches at most 33% of it);
* ``outside_load``: the runner recorded outside load on the host during the run (protocol column, when present);
* ``server_restart``: the serving process started after the run did (``server_started_utc`` later than
  ``started_utc``, protocol columns, when present): the server was restarted mid-run;
* ``token_bunching``: the median gap between a request's tokens is below `BUNCHED_ITL_FRACTION` of the mean
  (``p50_itl_ms`` against ``mean_itl_ms``, where the run reports both): most tokens reached the client together,
  so the front end's buffering, not the engine's steps, timed them. A timing check (`TIMING_CHECKS`): the run's
  TTFT, TPOT and ITL are not used, its throughput and E2E are.

The two roofline checks need the model in the architecture registry and the device in the GPU registry, on
``tensor_parallel`` GPUs (1 unless the table has the column); runs where a check cannot be evaluated (unknown
model, missing column) are counted in `Checked.unchecked`, never excluded by it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from slimlib.errors import DataError, SlimError
from slimlib.model.serving import ServingConfig, serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.schema import latency_order_problems

__all__ = [
    "CHECKS",
    "EXCLUSION_COLUMNS",
    "INPUT_TOKENS_REL_TOL",
    "LATENCY_SUM_REL_TOL",
    "Checked",
    "check_runs",
    "count_lines",
]

CHECKS = (
    "completed",
    "failed",
    "tokens",
    "latency_sum",
    "latency_order",
    "tpot_weight_read",
    "throughput_roofline",
    "outside_load",
    "server_restart",
    "token_bunching",
)
#: checks that void a run's per-token latencies only (`Checked.untimed`): its throughput and E2E stay
TIMING_CHECKS = ("token_bunching",)
#: the per-token latency columns a timing check voids
TIMING_COLUMNS = (
    "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms",
    *(f"p{q}_{m}_ms" for m in ("ttft", "tpot", "itl") for q in (50, 90, 99)),
)  # fmt: skip
#: a run whose median token gap is below this fraction of its mean gap had its tokens bunched (``token_bunching``).
#: Streamed one by one, the gaps of a decode step are alike and the median is near the mean; a prefill chunk in
#: some steps makes a long tail (the AMX campaign's long-prompt runs: median 0.3-0.5x the mean); a front end that
#: falls behind delivers several tokens at once, with gaps of about 0 (the same campaign's smallest model: medians
#: of 0.00-0.01 ms under means of 0.5-3 ms)
BUNCHED_ITL_FRACTION = 0.1
#: Relative tolerance of TTFT + (OL - 1) TPOT against the mean E2E. The identity is exact for fixed-length
#: requests (vLLM: tpot = (latency - ttft) / (output_len - 1) per request, means over the same requests); on the
#: committed campaign the largest deviation is 5e-10. 1% leaves room for rounding in files written by other tools
#: and still catches runs whose requests did not all produce OL tokens (vLLM's per-request TPOT then divides by
#: the request's own length) or whose timings were edited.
LATENCY_SUM_REL_TOL = 0.01
#: Relative tolerance of the prompt tokens against requests x IL (at least one token per request). vLLM's random
#: dataset decodes random token ids to text and the server tokenizes that text again, which merges or splits a
#: token at a seam: on the committed campaign at most 8 extra tokens over 128 x 1024, 1 over 8 x 128 (0.125 per
#: request, 0.1% of a run's prompt tokens). 1% stays 10x above that for long prompts, and the one-token floor keeps
#: short prompts (IL = 64: one token is 1.6%) from being excluded for a seam; a truncated or wrongly sized prompt
#: set is still caught.
INPUT_TOKENS_REL_TOL = 0.01
EXCLUSION_COLUMNS = ("source_file", "check", "reason")


@dataclass
class Checked:
    """`check_runs`' result: one exclusion row per (run, failing check) and the count of runs each check could
    not evaluate."""

    exclusions: pd.DataFrame
    unchecked: dict[str, int] = field(default_factory=dict)

    def failing(self) -> set[str]:
        """Source files of the runs that fail at least one check that is not a timing check."""
        ex = self.exclusions
        return set(ex.loc[~ex["check"].isin(TIMING_CHECKS), "source_file"])

    def untimed(self) -> set[str]:
        """Source files of the runs that fail a timing check (`TIMING_CHECKS`) and no other: their throughput
        and E2E are used, their per-token latencies (`TIMING_COLUMNS`) not."""
        ex = self.exclusions
        return set(ex.loc[ex["check"].isin(TIMING_CHECKS), "source_file"]) - self.failing()

    def checks_of(self, source_file: str) -> str:
        """The failing checks of one run, ';'-joined in `CHECKS` order ('' when it passes)."""
        got = set(self.exclusions.loc[self.exclusions["source_file"] == source_file, "check"])
        return ";".join(c for c in CHECKS if c in got)


def _num(row: dict, key: str) -> float:
    v = row.get(key)
    try:
        x = float(v)
    except (TypeError, ValueError):
        return math.nan
    return x


def _flag(value: object, where: str, key: str) -> bool | None:
    """A recorded boolean (bool, 0/1, 'true'/'false'); None when not recorded."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    text = str(value).strip().lower()
    if text in ("", "nan", "<na>"):
        return None
    if text in ("true", "1", "1.0", "yes"):
        return True
    if text in ("false", "0", "0.0", "no"):
        return False
    raise DataError(f"{where}: field {key!r} is {value!r}, expected true or false")


def _time(value: object, where: str, key: str) -> pd.Timestamp | None:
    if value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA:
        return None
    text = str(value).strip()
    if not text or text.lower() in ("nan", "<na>"):
        return None
    try:
        t = pd.Timestamp(text)
    except ValueError:
        raise DataError(f"{where}: field {key!r} is {value!r}, expected an ISO 8601 UTC time") from None
    return t.tz_convert("UTC") if t.tzinfo is not None else t.tz_localize("UTC")


def _config(model: str, gpu: str, tp: int, cache: dict) -> ServingConfig | None:
    key = (model, gpu, tp)
    if key not in cache:
        try:
            cache[key] = serving_config(get_architecture(model), get_gpu(gpu), tensor_parallel=tp)
        except SlimError:
            cache[key] = None  # not in the registries (or not servable so): the roofline checks do not apply
    return cache[key]


def _peak_flops(gpu: str) -> float:
    return max(get_gpu(gpu).peaks.values())


def _row_failures(row: dict, cache: dict, unchecked: dict[str, int]) -> list[tuple[str, str]]:
    where = str(row.get("source_file", "?"))
    out: list[tuple[str, str]] = []

    def skip(check: str) -> None:
        unchecked[check] = unchecked.get(check, 0) + 1

    requested, done = _num(row, "num_prompts"), _num(row, "completed")
    if math.isnan(requested):
        skip("completed")
        requested = done
    elif done != requested:
        out.append(("completed", f"{done:.0f} of {requested:.0f} requested requests completed"))
    failed = _num(row, "failed")
    if failed > 0:
        out.append(("failed", f"{failed:.0f} request(s) failed"))
    il, ol = _num(row, "input_len"), _num(row, "output_len")
    tin, tout = _num(row, "total_input_tokens"), _num(row, "total_output_tokens")
    if math.isnan(tin) or math.isnan(tout):
        skip("tokens")
    else:
        bad = []
        if abs(tin - requested * il) > max(INPUT_TOKENS_REL_TOL * requested * il, requested):
            bad.append(f"total_input_tokens {tin:.0f} is not {requested:.0f} x IL {il:g} within "
                       f"{INPUT_TOKENS_REL_TOL:.0%} (or one token per request)")  # fmt: skip
        if tout != round(requested * ol):
            bad.append(f"total_output_tokens {tout:.0f} != {requested:.0f} x OL {ol:g}")
        if bad:
            out.append(("tokens", "; ".join(bad)))
    ttft, tpot, e2e = _num(row, "mean_ttft_ms"), _num(row, "mean_tpot_ms"), _num(row, "mean_e2el_ms")
    if math.isnan(ttft) or math.isnan(tpot) or math.isnan(e2e) or ol <= 1:
        skip("latency_sum")
    else:
        total = ttft + (ol - 1) * tpot
        if abs(total - e2e) > LATENCY_SUM_REL_TOL * e2e:
            out.append(("latency_sum", f"TTFT + (OL-1) x TPOT = {total:.4g} ms but mean E2E = {e2e:.4g} ms "
                                       f"(tolerance {LATENCY_SUM_REL_TOL:.0%})"))  # fmt: skip
    order = latency_order_problems(row, LATENCY_SUM_REL_TOL, span_tol=LATENCY_SUM_REL_TOL)  # one run: exact
    if order:
        out.append(("latency_order", "; ".join(order)))
    tp = _num(row, "tensor_parallel")
    cfg = _config(str(row.get("model", "")), str(row.get("gpu", "")), 1 if math.isnan(tp) else int(tp), cache)
    if cfg is None or math.isnan(tpot):
        skip("tpot_weight_read")
    else:
        floor_ms = cfg.weights / get_gpu(cfg.gpu).mem_bw * 1e3
        if tpot < floor_ms:
            out.append(("tpot_weight_read", f"mean TPOT {tpot:.4g} ms < {floor_ms:.4g} ms, the time to read the "
                        f"{cfg.weights / 1e6:.1f} MB of weights per device once at {cfg.gpu}'s memory bandwidth"))  # fmt: skip
    thr = _num(row, "throughput_tok_s")
    if cfg is None or math.isnan(thr):
        skip("throughput_roofline")
    else:
        bound = _peak_flops(cfg.gpu) / cfg.linear_flops_per_token
        if thr > bound:
            out.append(("throughput_roofline", f"throughput {thr:.4g} tok/s > {bound:.4g} tok/s, the compute "
                        f"roofline (peak FLOP/s of {cfg.gpu} over {cfg.linear_flops_per_token:.4g} linear FLOPs "
                        "per token)"))  # fmt: skip
    load = _flag(row.get("outside_load"), where, "outside_load")
    if load is None:
        skip("outside_load")
    elif load:
        steal = _num(row, "cpu_steal")
        stolen = f", {100 * steal:.2g}% of CPU time stolen by the hypervisor" if steal > 0 else ""
        out.append(("outside_load", f"outside load on the host during the run ({_num(row, 'outside_cpu'):.2f} "
                                    f"cores used by other processes{stolen})"))  # fmt: skip
    start = _time(row.get("started_utc"), where, "started_utc")
    server = _time(row.get("server_started_utc"), where, "server_started_utc")
    if start is None or server is None:
        skip("server_restart")
    elif server > start:
        iso = "%Y-%m-%dT%H:%M:%SZ"
        out.append(("server_restart", f"the server (pid {row.get('server_pid', '?')}) started at "
                    f"{server.strftime(iso)}, after the run did ({start.strftime(iso)}): restarted mid-run"))  # fmt: skip
    itl, median = _num(row, "mean_itl_ms"), _num(row, "p50_itl_ms")
    if math.isnan(itl) or math.isnan(median) or ol <= 1:
        skip("token_bunching")
    elif median < BUNCHED_ITL_FRACTION * itl:
        out.append(("token_bunching", f"median token gap {median:.3g} ms < {BUNCHED_ITL_FRACTION:g} x the mean "
                    f"{itl:.3g} ms: tokens reached the client in bunches; its TTFT and TPOT are not used, its "
                    "throughput and E2E are"))  # fmt: skip
    return out


def check_runs(runs: pd.DataFrame) -> Checked:
    """The physical checks (module docstring) of every row of an ingested table (columns of
    `slimlib.data.ingest.COLUMNS`, with ``total_input_tokens``/``total_output_tokens`` and the optional protocol
    columns). Raises DataError for a protocol field that is not a boolean or a time."""
    cache: dict = {}
    unchecked: dict[str, int] = {}
    rows = []
    for row in runs.to_dict("records"):
        for check, reason in _row_failures(row, cache, unchecked):
            rows.append({"source_file": str(row.get("source_file", "")), "check": check, "reason": reason})
    ex = pd.DataFrame(rows, columns=list(EXCLUSION_COLUMNS))
    return Checked(ex, {c: unchecked[c] for c in CHECKS if c in unchecked})


def count_lines(checked: Checked, n_runs: int) -> list[str]:
    """Report lines: runs excluded per check (every check, zeros included) and runs a check could not evaluate."""
    per = checked.exclusions.groupby("check")["source_file"].nunique()
    n_bad = len(checked.failing())
    counts = ", ".join(f"{c} {int(per.get(c, 0))}" for c in CHECKS if c not in TIMING_CHECKS)
    lines = [f"physical checks: {n_bad} of {n_runs} run(s) excluded ({counts})"]
    timing = ", ".join(f"{c} {int(per.get(c, 0))}" for c in TIMING_CHECKS)
    lines.append(f"  {len(checked.untimed())} more kept without their per-token latencies ({timing})")
    if checked.unchecked:
        lines.append("  not evaluated (field or registry entry missing): "
                     + ", ".join(f"{c} {n}" for c, n in checked.unchecked.items()))  # fmt: skip
    return lines
