"""Nsight Compute CSV parser (on a hand-made fixture in ncu's documented layout) and command builder."""

import math
from pathlib import Path

import numpy as np
import pytest

from slimlib.errors import DataError
from slimlib.kit.ncu import (
    HOPPER_METRICS,
    METRICS,
    counters_wide,
    duration_weighted,
    ncu_command,
    parse_ncu_csv,
    unit_scale,
)

FIX = Path(__file__).parent / "fixtures" / "profiling" / "ncu_details_handmade.csv"
HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
    '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"'
)


def _row(i, metric, unit, value, kernel="k"):
    return f'"{i}","1","py","h","{kernel}","1","7","(1, 1, 1)","(1, 1, 1)","0","9.0","s","{metric}","{unit}","{value}"'


@pytest.mark.parametrize(
    "unit,factor,base",
    [
        ("nsecond", 1e-9, "second"),
        ("usecond", 1e-6, "second"),
        ("msecond", 1e-3, "second"),
        ("ns", 1e-9, "second"),
        ("byte", 1.0, "byte"),
        ("Kbyte", 1e3, "byte"),
        ("Mbyte", 1e6, "byte"),
        ("Gbyte", 1e9, "byte"),
        ("KiB", 1024.0, "byte"),
        ("byte/second", 1.0, "byte/second"),
        ("Gbyte/second", 1e9, "byte/second"),
        ("Tbyte/second", 1e12, "byte/second"),
        ("Mbyte/usecond", 1e12, "byte/second"),
        ("%", 1.0, "%"),
        ("inst", 1.0, "inst"),
        ("", 1.0, ""),
        ("cycle/nsecond", 1.0, "cycle/nsecond"),  # unknown rate: kept as printed
    ],
)
def test_unit_scale(unit, factor, base):
    f, b = unit_scale(unit)
    assert f == pytest.approx(factor) and b == base


def test_parse_fixture_values_and_units():
    long = parse_ncu_csv(FIX)
    assert set(long["launch"]) == {0, 1, 2}
    v = long.set_index(["launch", "metric"])["value_si"]
    assert v[(0, "gpu__time_duration.sum")] == pytest.approx(1234.5e-6)  # "1,234.5" usecond
    assert v[(1, "gpu__time_duration.sum")] == pytest.approx(45678e-9)  # "45,678" nsecond
    assert v[(2, "gpu__time_duration.sum")] == pytest.approx(1.2655e-3)  # msecond
    assert v[(0, "dram__bytes_read.sum")] == pytest.approx(4100.25e6)  # Mbyte
    assert v[(1, "dram__bytes_read.sum")] == pytest.approx(123456789.0)  # byte with separators
    assert v[(0, "dram__bytes_read.sum.per_second")] == pytest.approx(3.32e12)  # Tbyte/second
    assert v[(1, "dram__bytes_read.sum.per_second")] == pytest.approx(2702.7e9)  # Gbyte/second
    assert v[(0, "lts__t_sector_hit_rate.pct")] == pytest.approx(5.9)
    assert math.isnan(v[(2, "lts__t_sector_hit_rate.pct")])  # "n/a"
    raw = long.set_index(["launch", "metric"])["value"]
    assert raw[(0, "dram__bytes.sum")] == pytest.approx(4.2)  # as printed, before scaling
    assert long["kernel_name"].iloc[0].startswith("void flash::flash_fwd_splitkv_kernel<")


def test_parse_text_equals_parse_path():
    a = parse_ncu_csv(FIX)
    b = parse_ncu_csv(FIX.read_text())
    assert a.equals(b)


def test_wide_table_and_derived_columns():
    wide = counters_wide(parse_ncu_csv(FIX))
    assert list(wide["launch"]) == [0, 1, 2]
    w0 = wide.iloc[0]
    flop0 = 2 * 1_000_000 + 500_000 + 250_000 + 2_000_000_000
    assert w0["flop"] == pytest.approx(flop0)
    assert w0["duration_s"] == pytest.approx(1234.5e-6)
    assert w0["achieved_flop_s"] == pytest.approx(flop0 / 1234.5e-6)
    assert w0["arithmetic_intensity"] == pytest.approx(flop0 / 4.2e9)
    assert w0["long_scoreboard_pct"] == pytest.approx(52.3)
    assert w0["occupancy_pct"] == pytest.approx(17.9)
    assert w0["l1_hit_pct"] == pytest.approx(0.61)
    assert wide.iloc[1]["flop"] == pytest.approx(9e9)
    assert np.isnan(wide.iloc[2]["occupancy_pct"])  # not collected for that launch
    for short in [*METRICS, *HOPPER_METRICS]:
        assert short in wide.columns


def test_duration_weighted_means():
    wide = counters_wide(parse_ncu_csv(FIX))
    dw = duration_weighted(wide)
    d = np.array([1234.5e-6, 45678e-9, 1.2655e-3])
    assert dw.loc[0, "duration_s"] == pytest.approx(d.sum())
    assert dw.loc[0, "dram_throughput_pct"] == pytest.approx(np.dot(d, [88.4, 71.0, 90.0]) / d.sum())
    # a metric missing for one launch is averaged over the launches that have it
    assert dw.loc[0, "occupancy_pct"] == pytest.approx(np.dot(d[:2], [17.9, 12.4]) / d[:2].sum())
    by = duration_weighted(wide, by=["kernel_name"])
    assert len(by) == 2 and by["n_launches"].sum() == 3


def test_parse_errors_name_the_problem(tmp_path):
    with pytest.raises(DataError, match="no ncu CSV header"):
        parse_ncu_csv("==PROF== Connected\n==ERROR== ERR_NVGPUCTRPERM - no permission\n")
    with pytest.raises(DataError, match="line 3: metric 'm' has non-numeric value 'fast'"):
        parse_ncu_csv(
            "\n".join([HEADER, _row(0, "gpu__time_duration.sum", "ns", "1,000"), _row(0, "m", "", "fast")])
        )
    with pytest.raises(DataError, match="line 2: 3 fields"):
        parse_ncu_csv(HEADER + '\n"0","1","py"\n')
    with pytest.raises(DataError, match="no metric rows"):
        parse_ncu_csv(HEADER + "\n")
    bad = HEADER.replace('"Metric Value"', '"Value"')
    with pytest.raises(DataError, match="lacks column"):
        parse_ncu_csv(bad + "\n" + _row(0, "m", "", "1"))
    f = tmp_path / "empty.csv"
    f.write_text("\n")
    with pytest.raises(DataError, match=str(f)):
        parse_ncu_csv(f)


def test_ncu_command_targets():
    cmd = ncu_command(
        "mistral-7b", 64, 512, 256, target="attention", n_layers=32, log_file="a.csv", python="py"
    )
    assert cmd[:2] == ["ncu", "--csv"]
    assert cmd[cmd.index("--page") + 1] == "details"
    assert cmd[cmd.index("--nvtx-include") + 1] == "slim_attn/"
    assert cmd[cmd.index("--kernel-name") + 1].startswith("regex:")
    assert cmd[cmd.index("--launch-count") + 1] == "32"  # one attention kernel per layer, one step
    metrics = cmd[cmd.index("--metrics") + 1].split(",")
    assert metrics == list(METRICS.values())
    assert cmd[cmd.index("--nvtx-steps") + 1] == "255:1"  # the last decode step by default
    assert "--no-cuda-graphs" in cmd and cmd[cmd.index("py") + 1 : cmd.index("py") + 3] == [
        "-m",
        "slimlib.kit.harness",
    ]
    step = ncu_command("m", 8, 16, 32, target="step", steps=(10, 2), compute_capability="9.0")
    assert "--kernel-name" not in step and "--launch-count" not in step
    assert HOPPER_METRICS["tensor_gmma_active_pct"] in step[step.index("--metrics") + 1]
    assert step[step.index("--nvtx-steps") + 1] == "10:2"
    with pytest.raises(DataError, match="unknown ncu target"):
        ncu_command("m", 1, 1, 1, target="everything")
    with pytest.raises(DataError, match="outside the decode"):
        ncu_command("m", 1, 1, 4, steps=(3, 2))
