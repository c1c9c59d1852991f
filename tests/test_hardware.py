"""GPU registry: data-sheet numbers, aliases, errors, the 64 GB H100 against the raw measurements, `slim gpus`."""

from __future__ import annotations

import dataclasses
import io
import json

import pandas as pd
import pytest
from shared_paths import MEMGAP

from slimlib.cli.main import main
from slimlib.errors import DataError, UnknownNameError
from slimlib.registry.gpus import GPU, get_gpu, gpu_label, gpu_names, list_gpus
from slimlib.registry.host_cpu import CPU_DEVICES

REQUIRED = [
    "h100-sxm-80gb",
    "h100-sxm-64gb",
    "h100-pcie-80gb",
    "h200-sxm-141gb",
    "gh200-96gb",
    "a100-sxm-80gb",
    "a100-sxm-40gb",
    "l40s",
    "mi250",
    "mi250-gcd",
    "mi300x",
    "mi355x",
    "b200-sxm-180gb",
]


def test_registry_holds_the_required_gpus():
    assert sorted([*REQUIRED, *CPU_DEVICES]) == gpu_names()  # + the host CPUs (slimlib.registry.host_cpu)


@pytest.mark.parametrize(
    "name, tflops, tb_s, gb",
    [
        ("h100-sxm-80gb", 989.4, 3.35, 80),
        ("a100-sxm-80gb", 312.0, 2.039, 80),
        ("a100-sxm-40gb", 312.0, 1.555, 40),
        ("h100-pcie-80gb", 756.5, 2.0, 80),
        ("h200-sxm-141gb", 989.4, 4.8, 141),
        ("l40s", 362.05, 0.864, 48),
        ("mi300x", 1307.4, 5.3, 192),
        ("mi355x", 2516.6, 8.0, 288),
        ("b200-sxm-180gb", 2250.0, 8.0, 180),
    ],
)
def test_data_sheet_numbers(name, tflops, tb_s, gb):
    g = get_gpu(name)
    assert g.peak_flops == pytest.approx(tflops * 1e12, rel=1e-9)
    assert g.mem_bw == pytest.approx(tb_s * 1e12, rel=1e-9)
    assert g.mem_gb == gb
    assert g.mem_bytes == gb * 2**30


def test_a100_80gb_bandwidth_about_2_04_tb_s():
    assert get_gpu("a100").mem_bw == pytest.approx(2.04e12, rel=0.01)


def test_peaks_are_dense_and_ridge_points_plausible():
    # Sparse figures (twice the dense ones) would put H100 at 1979 TFLOP/s; dense Hopper tensor peak is 989.4.
    for name in REQUIRED:
        g = get_gpu(name)
        top = 2600e12 if name.startswith(("b200", "mi355x")) else 1500e12  # Blackwell 2.25 P, MI355X 2.52 P
        assert 100e12 < g.peak_flops < top, name
        assert 0.5e12 < g.mem_bw < 8.5e12, name
        assert 100 < g.ridge_point < 700, name  # FLOP/byte: decode attention (~1 FLOP/byte) is far below
    assert get_gpu("h100-sxm-80gb").peak_flops == get_gpu("h100-sxm-64gb").peak_flops


def test_every_number_has_a_source():
    for name in REQUIRED:
        g = get_gpu(name)
        assert len(g.source) > 40, name
        assert ("datasheet" in g.source.lower()) or ("data sheet" in g.source.lower()), name
    assert "1593" in get_gpu("h100-sxm-64gb").source  # the derivation of its bandwidth is stated
    assert "uncertain" in get_gpu("h100-sxm-64gb").notes


def test_h100_64gb_memory_as_reported_by_the_driver():
    g = get_gpu("h100-sxm-64gb")
    assert g.mem_gb == 64
    assert g.mem_bytes_reported == 65247 * 2**20
    assert g.mem_bytes_reported < g.mem_bytes
    assert g.mem_bw < get_gpu("h100-pcie-80gb").mem_bw < get_gpu("h100-sxm-80gb").mem_bw


@pytest.mark.skipif(not MEMGAP.is_dir(), reason=f"raw vLLM measurements not found at {MEMGAP}")
def test_h100_64gb_matches_the_raw_measurements():
    """The registry's derivation uses the memory clock and memory.total that nvidia-smi logged in the runs."""
    dmon = sorted(MEMGAP.rglob("metrics_gpu_device_nvidia_smi_dom_*.csv"))
    smi = sorted(p for p in MEMGAP.rglob("metrics_gpu_device_nvidia_smi_*.csv") if "_dom_" not in p.name)
    assert dmon and smi
    clocks = set()
    for p in dmon:
        df = pd.read_csv(p, skiprows=[1])  # second line holds units
        clocks |= set(pd.to_numeric(df["mclk"], errors="coerce").dropna().astype(int))
    assert clocks == {1593}
    totals = set()
    for p in smi:
        df = pd.read_csv(p, skipinitialspace=True)
        totals |= {int(str(v).split()[0]) for v in df["memory.total [MiB]"].dropna()}
    assert totals == {65247}

    g = get_gpu("h100-sxm-64gb")
    mclk_hz = clocks.pop() * 1e6
    assert g.mem_bw == pytest.approx(mclk_hz * 2 * 4096 / 8, rel=1e-12)  # DDR, 4 HBM2e stacks x 1024 bit
    assert g.mem_bytes_reported == totals.pop() * 2**20


@pytest.mark.parametrize(
    "alias, canonical",
    [
        ("h100", "h100-sxm-80gb"),
        ("H100-SXM", "h100-sxm-80gb"),
        ("h100-80gb", "h100-sxm-80gb"),
        ("NVIDIA H100 80GB HBM3", "h100-sxm-80gb"),
        ("  H100_SXM_80GB ", "h100-sxm-80gb"),
        ("h100-64gb", "h100-sxm-64gb"),
        ("H100-SXM-64GB", "h100-sxm-64gb"),
        ("h100-pcie", "h100-pcie-80gb"),
        ("a100", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("A100-SXM4-40GB", "a100-sxm-40gb"),
        ("h200", "h200-sxm-141gb"),
        ("gh200", "gh200-96gb"),
        ("MI300X", "mi300x"),
        ("AMD Instinct MI300X", "mi300x"),
        ("L40S", "l40s"),
    ],
)
def test_aliases_and_case(alias, canonical):
    assert get_gpu(alias).name == canonical


def test_gpu_instance_passes_through_and_is_frozen():
    g = get_gpu("h100")
    assert get_gpu(g) is g
    with pytest.raises(dataclasses.FrozenInstanceError):
        g.mem_bw = 1.0  # type: ignore[misc]


def test_unknown_gpu_lists_closest_names():
    with pytest.raises(UnknownNameError) as info:
        get_gpu("h100-sxm-81gb")
    msg = str(info.value)
    assert "unknown GPU 'h100-sxm-81gb'" in msg and "h100-sxm-80gb" in msg
    assert isinstance(info.value, KeyError)
    with pytest.raises(UnknownNameError, match="mi300x"):
        get_gpu("v100")  # no close match: the message lists the known names


def test_list_gpus_table():
    df = list_gpus()
    assert list(df.columns) == [
        "name", "label", "peak_tflops", "peak_fp8_tflops", "peak_fp4_tflops", "mem_bw_tb_s", "mem_gib", "link_gb_s",
        "link_kind", "attn_eff", "layer_floor_us", "aliases", "source", "notes",
    ]  # fmt: skip
    assert list(df["name"]) == sorted([*REQUIRED, *CPU_DEVICES])
    row = df.set_index("name").loc["h100-sxm-80gb"]
    assert row["peak_tflops"] == pytest.approx(989.4)
    assert row["mem_bw_tb_s"] == pytest.approx(3.35)
    assert row["attn_eff"] == get_gpu("h100").decode_attention_eff
    assert row["layer_floor_us"] == pytest.approx(get_gpu("h100").layer_floor_s * 1e6)
    assert pd.isna(df.set_index("name").loc["mi300x", "layer_floor_us"])
    assert "h100" in row["aliases"].split(", ")
    sub = list_gpus(["a100", "h100"])
    assert list(sub["name"]) == ["a100-sxm-80gb", "h100-sxm-80gb"]


@pytest.mark.parametrize(
    "name, fp8, fp4",
    [
        ("h100-sxm-80gb", 1978.9, None),  # H100 SXM datasheet: FP8 3,958 TFLOPS with sparsity
        ("h100-pcie-80gb", 1513.0, None),  # H100 PCIe: 3,026 with sparsity
        ("l40s", 733.0, None),  # L40S: 1,466 with sparsity
        ("mi300x", 2614.9, None),  # MI300X: 2,614.9 dense
        ("b200-sxm-180gb", 4500.0, 9000.0),  # HGX B200: 72 / 144 PFLOPS sparse for 8 GPUs
        ("a100-sxm-80gb", None, None),  # Ampere: no fp8 tensor cores
    ],
)
def test_precision_peaks(name, fp8, fp4):
    g = get_gpu(name)
    assert g.peak_for("fp16") == g.peak_flops
    for prec, tflops in (("fp8", fp8), ("fp4", fp4)):
        if tflops is None:
            with pytest.raises(DataError, match=f"no {prec} tensor peak"):
                g.peak_for(prec)
        else:
            assert g.peak_for(prec) == pytest.approx(tflops * 1e12, rel=1e-9)
    with pytest.raises(UnknownNameError, match="unknown precision 'int3'"):
        g.peak_for("int3")


def test_b200_and_labels_resolve_in_the_registry():
    assert get_gpu("b200").name == get_gpu("NVIDIA B200").name == "b200-sxm-180gb"
    assert gpu_label("b200") == "B200" and gpu_label("h100-sxm-80gb") == "H100 SXM"
    assert all(gpu_label(n) for n in gpu_names())
    assert len({gpu_label(n) for n in gpu_names()}) == len(gpu_names())  # labels tell GPUs apart


def test_gpu_is_a_plain_dataclass():
    g = GPU(name="x", peak_flops=2e12, mem_bw=1e12, mem_bytes=2**30)
    assert g.mem_gb == 1 and g.ridge_point == 2.0 and g.aliases == ()


# ---------------------------------------------------------------------------------------------------------------
# slim gpus
# ---------------------------------------------------------------------------------------------------------------
def test_cli_gpus_table(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    for name in REQUIRED:
        assert name in out
    assert "sources:" in out and "989.4" in out and "https://www.nvidia.com/en-us/data-center/h100/" in out


def test_cli_gpus_csv_round_trips(capsys):
    assert main(["gpus", "--format", "csv"]) == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False)
    expected = list_gpus()
    assert list(df.columns) == list(expected.columns)
    assert list(df["name"]) == list(expected["name"])
    assert df["peak_tflops"].tolist() == pytest.approx(expected["peak_tflops"].tolist())
    assert df["source"].tolist() == expected["source"].tolist()


def test_cli_gpus_json_selected(capsys):
    assert main(["gpus", "H100", "mi300x", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in records] == ["h100-sxm-80gb", "mi300x"]
    assert records[1]["mem_bw_tb_s"] == 5.3 and records[1]["mem_gib"] == 192


def test_cli_gpus_unknown_name(capsys):
    assert main(["gpus", "h1000"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slim gpus: error: unknown GPU 'h1000'") and "h100-sxm-80gb" in err


def test_cli_gpus_help_has_examples(capsys):
    with pytest.raises(SystemExit) as info:
        main(["gpus", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "slim gpus h100 a100" in out


def test_a_decode_gemm_curve_that_cannot_be_followed_is_a_registry_error(monkeypatch):
    import slimlib.registry.gpus as gpus

    one_point = dataclasses.replace(get_gpu("cpu"), name="x", aliases=(), decode_gemm_curve=((4, 1e-10),))
    monkeypatch.setattr(gpus, "_GPUS", (one_point,))
    with pytest.raises(RuntimeError, match="GPU x: decode_gemm_curve needs 2\\+ increasing token counts"):
        gpus._build_index()


def test_measured_decode_attention_efficiencies_are_the_kernel_tables():
    """Each GPU with AIConfigurator kernel tables holds its own decode attention's median bandwidth efficiency (the
    H100 one is the attention prior); same-die parts hold it as a labelled proxy; AMD and the CPU hold none."""
    import numpy as np

    from slimlib.data.aiconfigurator import SYSTEMS
    from slimlib.experiments.kernel_timing.composition import kernel_set
    from slimlib.experiments.kernel_timing.composition_figures import kernel_attention_roofline
    from slimlib.model.priors import ATTENTION_BANDWIDTH

    measured = {}
    for system, spec in SYSTEMS.items():
        mem = kernel_attention_roofline(kernel_set("mistral-7b", system), [1, 2, 4, 8, 16, 32, 64, 128, 256],
                                 [127, 255, 511, 1023, 2047, 4095, 8191])  # fmt: skip
        gpu = get_gpu(spec["gpu"])
        eff = float(np.median(mem.loc[mem["active_context"] >= 65536, "bw_util"]))
        assert gpu.decode_attention_eff == pytest.approx(eff, abs=6e-4), system
        assert system in gpu.decode_attention_source and not gpu.decode_attention_source.startswith("proxy")
        measured[gpu.name] = gpu.decode_attention_eff
    assert measured["h100-sxm-80gb"] == ATTENTION_BANDWIDTH.median
    for name in gpu_names():
        g = get_gpu(name)
        if g.name in measured or g.decode_attention_eff is None:
            continue
        assert g.decode_attention_source.startswith("proxy") and g.decode_attention_eff in measured.values()
    assert {n for n in gpu_names() if get_gpu(n).decode_attention_eff is None} == {
        *CPU_DEVICES,
        "l40s",
        "mi250",
        "mi250-gcd",
        "mi300x",
        "mi355x",
    }


def test_a_decode_attention_efficiency_outside_0_1_is_a_registry_error(monkeypatch):
    import slimlib.registry.gpus as gpus

    bad = dataclasses.replace(get_gpu("h100"), name="x", aliases=(), decode_attention_eff=1.2)
    monkeypatch.setattr(gpus, "_GPUS", (bad,))
    with pytest.raises(RuntimeError, match="GPU x: decode_attention_eff must lie in"):
        gpus._build_index()
