"""Measured latencies that cannot be are refused by the table check, naming the row: TTFT or the decode gaps
beyond the request's measured mean E2E, a request's E2E beyond its run's span, percentiles out of order. (A
table's ``e2e_s`` is not a bound: in the paper's burst runs it is the engine's time, which (OL - 1) x TPOT exceeds
by up to 1.35x.)"""

from __future__ import annotations

import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.schema import latency_order_problems, validate_table


def _row(**kw):
    row = {"model": "llama-2-7b", "gpu": "h100-sxm-64gb", "batch_size": 8, "input_len": 250, "output_len": 131,
           "throughput_tok_s": 1889.0, "mean_ttft_ms": 40.0, "mean_tpot_ms": 12.1, "p50_ttft_ms": 38.0,
           "p90_ttft_ms": 52.0, "p99_ttft_ms": 60.0}  # fmt: skip
    return pd.DataFrame([{**row, **kw}])


def test_a_consistent_row_passes():
    assert len(validate_table(_row(mean_e2el_ms=1700.0))) == 1


@pytest.mark.parametrize(
    "change, words",
    [
        ({"mean_e2el_ms": 30.0}, "mean TTFT 40 ms > mean E2E 30 ms"),
        ({"mean_e2el_ms": 1000.0}, "(OL - 1) x mean TPOT = 1573 ms > mean E2E 1000 ms"),
        ({"p90_ttft_ms": 30.0}, "p50 TTFT 38 ms > p90 30 ms"),
    ],
)
def test_latencies_that_cannot_be_are_refused_naming_the_row(change, words):
    with pytest.raises(DataError) as err:
        validate_table(_row(**change))
    msg = str(err.value)
    assert words in msg and "row 0" in msg and "\n" not in msg, msg


# B = 8 requests of IL + OL = 381 tokens at 1889 tok/s: a closed loop's run spans 8 x 381 / 1889 s = 1613.6 ms, which
# is the row's TTFT + 130 TPOT (Little's law holds to the last digit in one run)
SPAN_WORDS = "> the run's span, 8 requests x (IL + OL) / throughput = 1614 ms"


@pytest.mark.parametrize(
    "change",
    [
        {"mean_ttft_ms": 40_000.0, "p50_ttft_ms": 38_000.0, "p90_ttft_ms": 52_000.0, "p99_ttft_ms": 60_000.0},
        {"mean_tpot_ms": 121.0},  # a TPOT in the wrong unit
        {"static_batch": True, "mean_tpot_ms": 121.0},
    ],
)
def test_latencies_beyond_the_runs_span_are_refused(change):
    client = {} if "static_batch" in change else {"client": "concurrency"}
    with pytest.raises(DataError) as err:
        validate_table(_row(**client, **change))
    msg = str(err.value)
    assert SPAN_WORDS in msg and "row 0" in msg and "inside the run" in msg and "\n" not in msg, msg


def test_the_span_counts_every_prompt_of_a_burst_and_needs_the_client():
    queued = {
        "mean_ttft_ms": 20_000.0,
        "p50_ttft_ms": 19_000.0,
        "p90_ttft_ms": 30_000.0,
        "p99_ttft_ms": 39_000.0,
    }
    # 2000 prompts at once: a request waits for the ones before it, far beyond 8 requests' span
    assert len(validate_table(_row(client="burst", num_prompts=2000, **queued))) == 1
    with pytest.raises(DataError, match="the run's span"):
        validate_table(_row(client="concurrency", **queued))
    # a row that does not say its client has no known span (it is served as a closed loop, and `fit` says so)
    assert len(validate_table(_row(**queued))) == 1


def test_medians_over_repeats_may_exceed_the_span_by_the_tolerance():
    within = _row(client="concurrency", mean_tpot_ms=12.1 * 1.2)  # E2E 1.19 x the span
    assert len(validate_table(within)) == 1
    with pytest.raises(DataError, match="the run's span"):
        validate_table(_row(client="concurrency", mean_tpot_ms=12.1 * 1.35))  # 1.32 x


def test_a_closed_loop_keeps_its_clients_out_even_above_the_servers_batch():
    # 16 clients (--max-concurrency 16) on a server of 8 sequences: 16 requests out, twice the batch's span
    over = _row(client="concurrency", max_concurrency=16, mean_tpot_ms=12.1 * 1.9)
    assert len(validate_table(over)) == 1
    with pytest.raises(DataError, match="the run's span, 8 requests"):
        validate_table(over.drop(columns="max_concurrency"))


def test_the_span_is_checked_for_a_static_batch_without_a_client_and_skipped_without_a_throughput():
    row = {"batch_size": 8.0, "input_len": 250.0, "output_len": 131.0, "throughput_tok_s": 1889.0,
           "mean_ttft_ms": 40.0, "mean_tpot_ms": 121.0}  # fmt: skip
    assert latency_order_problems({**row, "client": float("nan"), "static_batch": "1"})
    assert not latency_order_problems({**row, "static_batch": "1", "throughput_tok_s": 0.0})
    assert not latency_order_problems({**row, "static_batch": "1", "throughput_tok_s": float("nan")})
    # one run obeys the bound exactly, so the physical checks allow it no slack (a table of medians 25%)
    exact = {**row, "client": "static", "mean_tpot_ms": 12.1 * 1.05}
    assert latency_order_problems(exact, span_tol=0.01) and not latency_order_problems(exact)
