"""Measured latencies that cannot be are refused by the table check, naming the row: TTFT or the decode gaps
beyond the request's measured mean E2E, percentiles out of order. (A table's ``e2e_s`` is not a bound: in the
paper's burst runs it is the engine's time, which (OL - 1) x TPOT exceeds by up to 1.35x.)"""

from __future__ import annotations

import pandas as pd
import pytest

from slimlib.errors import DataError
from slimlib.schema import validate_table


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
