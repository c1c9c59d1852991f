"""ROCm aiter's tuned kernel tables: which rows are kept and why the others are not (`slimlib.data.aiter`), and the
dense-GEMM term's check against measured GEMMs of any vendor (`slimlib.experiments.kernel_timing.gemm_check`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from shared_paths import SHARED

import slimlib.data as ds
from slimlib.data.aiter import build_aiter_tables
from slimlib.errors import DataError
from slimlib.experiments.kernel_timing import gemm_check as gc
from slimlib.registry.gpus import get_gpu

RAW = SHARED / "data" / "aiter"
GEMM_HEADER = "gfx,cu_num,M,N,K,libtype,kernelId,splitK,us,kernelName,tflops,bw,errRatio\n"
MOE_HEADER = (
    "cu_num,token,model_dim,inter_dim,expert,topk,act_type,dtype,q_dtype_a,q_dtype_w,q_type,use_g1u1,"
    "doweight_stage1,block_m,ksplit,us1,kernelName1,err1,us2,kernelName2,err2,us,run_1stage,tflops,bw,_tag\n"
)
FP8 = "torch.float8_e4m3fn"
GDN_HEADER = (
    "arch,dtype,state_dtype,b,sq,num_k_heads,num_v_heads,head_k_dim,head_v_dim,NUM_BLOCKS_PER_V_DIM,NUM_WARPS,"
    "WARP_THREADS_K,duration\n"
)


def _mirror(tmp_path: Path) -> Path:
    root = tmp_path / "aiter"
    (root / "configs" / "model_configs").mkdir(parents=True)
    gemm = [
        "gfx950,256,1,4096,4096,ck,1,0,20.0,kA,1,1,0",  # 0 kept
        "gfx950,256,1,4096,4096,ck,2,0,25.0,kB,1,1,0",  # 1 superseded: a faster row of the same shape
        "gfx950,256,2,4096,4096,ck,3,0,0,kC,0,0,0",  # 2 placeholder
        "gfx950,256,4,4096,4096,ck,4,0,33.0,kD,1,1,0",  # 3 repeated: same time and kernel as row 4
        "gfx950,256,8,4096,4096,ck,4,0,33.0,kD,1,1,0",  # 4 repeated
        "gfx942,80,1,4096,4096,ck,5,0,30.0,kE,1,1,0",  # 5 device: MI308X
        "gfx942,304,16,4096,4096,ck,6,0,40.0,kF,1,1,0",  # 6 kept (MI300X class)
    ]
    (root / "configs" / "a8w8_blockscale_tuned_gemm.csv").write_text(GEMM_HEADER + "\n".join(gemm) + "\n")
    # a file whose one row is faster than the fp8 peak: its whole (file, GPU) block goes
    over = ["gfx950,256,8192,8192,8192,ck,7,0,1.0,kG,1,1,0", "gfx950,256,16,8192,8192,ck,8,0,50.0,kH,1,1,0"]
    (root / "configs" / "model_configs" / "x_a8w8_blockscale_tuned_gemm.csv").write_text(
        GEMM_HEADER + "\n".join(over) + "\n"
    )
    moe = [
        f"256,16,4096,1536,128,8,ActivationType.Silu,torch.bfloat16,{FP8},{FP8},QuantType.per_1x128,1,0,32,0,"
        "30,k1,0,20,k2,0,50,0,1,1,",  # kept
        f"256,32,4096,1536,128,8,ActivationType.Silu,torch.bfloat16,{FP8},{FP8},QuantType.per_1x128,0,0,32,0,"
        "30,k1,0,25,k2,0,55,0,1,1,",  # not gated
        "256,16,4096,1536,128,8,ActivationType.Silu,torch.bfloat16,torch.int8,torch.int8,QuantType.per_Tensor,"
        "1,0,32,0,30,k1,0,26,k2,0,56,0,1,1,",  # precision
    ]
    (root / "configs" / "tuned_fmoe.csv").write_text(MOE_HEADER + "\n".join(moe) + "\n")
    (root / "configs" / "bf16_tuned_batched_gemm.csv").write_text("B,M,N,K,us\n16,1,128,128,3.0\n")
    gdn = [
        "gfx950,torch.bfloat16,torch.float32,128,1,4,8,128,128,8,4,16,40.0",  # kept
        "gfx950,torch.bfloat16,torch.float32,128,1,4,8,128,128,4,4,8,45.0",  # superseded
        "gfx942,torch.bfloat16,torch.float32,128,1,4,8,128,128,8,4,16,60.0",  # no CU count
    ]
    (root / "ops" / "flydsl").mkdir(parents=True)
    (root / "ops" / "flydsl" / "gdr_decode_tuned.csv").write_text(GDN_HEADER + "\n".join(gdn) + "\n")
    return root


def test_rows_are_kept_or_excluded_with_their_reason(tmp_path: Path) -> None:
    tables, files = build_aiter_tables(_mirror(tmp_path))
    g, m, ex = tables["aiter-gemm"], tables["aiter-moe"], tables["aiter-exclusions"]
    assert sorted(zip(g["gpu"], g["m"], g["latency_ms"], strict=True)) == [
        ("mi300x", 16, 0.04),
        ("mi355x", 1, 0.02),
    ]
    assert set(g["gemm_dtype"]) == {"fp8_block"}
    reasons = dict(zip(zip(ex["file"], ex["row"], strict=True), ex["reason"], strict=True))
    main = "configs/a8w8_blockscale_tuned_gemm.csv"
    assert [reasons.get((main, i), "") for i in range(7)] == [
        "", "superseded", "placeholder", "repeated", "repeated", "device", "",
    ]  # fmt: skip
    over = "configs/model_configs/x_a8w8_blockscale_tuned_gemm.csv"
    assert reasons[(over, 0)] == reasons[(over, 1)] == "over_peak"
    moe = "configs/tuned_fmoe.csv"
    assert [reasons.get((moe, i), "") for i in range(3)] == ["", "not_gated", "precision"]
    assert list(m["latency_ms"]) == [0.05] and list(m["moe_dtype"]) == ["fp8_block"]
    assert reasons[("configs/bf16_tuned_batched_gemm.csv", 0)] == "precision"
    d = tables["aiter-gdn"]
    assert list(zip(d["gpu"], d["state_dtype"], d["latency_ms"], strict=True)) == [
        ("mi355x", "float32", 0.04)
    ]
    gdn = "ops/flydsl/gdr_decode_tuned.csv"
    assert [reasons.get((gdn, i), "") for i in range(3)] == ["", "superseded", "no_cu_count"]
    assert len(g) + len(m) + len(d) + len(ex) == 7 + 2 + 3 + 1 + 3  # every data row accounted for
    assert len(files) == 5


def test_unknown_table_family_and_missing_columns_are_refused(tmp_path: Path) -> None:
    root = _mirror(tmp_path)
    (root / "configs" / "new_thing_tuned_gemm.csv").write_text(GEMM_HEADER)
    with pytest.raises(DataError, match="new_thing_tuned_gemm.csv: a GEMM table of no known family"):
        build_aiter_tables(root)
    (root / "configs" / "new_thing_tuned_gemm.csv").unlink()
    (root / "configs" / "a4w4_blockscale_tuned_gemm.csv").write_text("gfx,cu_num,M,N,K,us\n")
    with pytest.raises(DataError, match=r"a4w4_blockscale_tuned_gemm.csv: no column \['kernelName'\]"):
        build_aiter_tables(root)
    with pytest.raises(DataError, match="no configs/"):
        build_aiter_tables(tmp_path)


@pytest.mark.skipif(not RAW.is_dir(), reason=f"aiter mirror not found at {RAW}")
def test_every_data_row_of_the_mirror_is_kept_or_excluded() -> None:
    tables, _ = build_aiter_tables(RAW)
    # the chunked-prefill Gated DeltaNet tables (configs/*gdn*, ops/flydsl/chunk_gdn_*) are not read here
    read = [
        *(p for p in (RAW / "configs").rglob("*.csv") if "gdn" not in p.name),
        RAW / "ops/flydsl/gdr_decode_tuned.csv",
    ]
    total = sum(len(pd.read_csv(p)) for p in read)
    assert sum(len(tables[n]) for n in ("aiter-gemm", "aiter-moe", "aiter-gdn", "aiter-exclusions")) == total
    ex = tables["aiter-exclusions"]
    assert (ex[ex["reason"] == "device"]["gfx"].isin(["gfx942", "gfx1250"])).all()
    g = tables["aiter-gemm"]
    peak = np.array([get_gpu(x).peak_for("fp8" if "fp8" in d else "fp4" if "fp4" in d else "fp16")
                     for x, d in zip(g["gpu"], g["gemm_dtype"], strict=True)])  # fmt: skip
    achieved = 2.0 * g["m"] * g["n"] * g["k"] / (g["latency_ms"] / 1e3)
    assert (achieved <= peak).all()


def _exact_roofline(hw: str, eta_w: float, eta_c: float, floor_ms: float) -> pd.DataFrame:
    g = get_gpu(hw)
    rows = []
    for n, k in ((4096, 4096), (8192, 8192)):
        for m in (1, 2, 4, 8, 16, 64, 256, 1024, 4096, 8192):
            t = floor_ms + 1e3 * max(2 * m * n * k / (eta_c * g.peak_flops), 2 * n * k / (eta_w * g.mem_bw))
            rows.append({"gpu": g.name, "gemm_dtype": "bfloat16", "m": m, "n": n, "k": k, "latency_ms": t})
    return pd.DataFrame(rows)


def test_corner_check_recovers_an_exact_roofline() -> None:
    pts = gc.gemm_points(_exact_roofline("mi355x", 0.7, 0.5, 0.004), "test")
    fit = gc.fitted_corner(pts, n_boot=50).set_index("form")
    assert fit.loc["max", "eta_w"] == pytest.approx(0.7, rel=1e-6)
    assert fit.loc["max", "floor_us"] == pytest.approx(4.0, rel=1e-6)
    assert fit.loc["max", "eta_c"] == pytest.approx(0.5, rel=1e-6)  # fitted on top of the floor
    assert fit.loc["max", "mape_pct"] < 1.0 < fit.loc["sum", "mape_pct"]
    assert int(fit.loc["max", "n_scored"]) == 2 * 3  # m = 64, 256, 1024 of each shape
    ratios = gc.prior_ratios(pts)
    assert list(ratios["band"]) == ["1-16", "17-128", "129-1024", ">=4096"]
    assert ratios["n"].sum() == len(pts)


def test_gemm_points_need_their_columns() -> None:
    with pytest.raises(DataError, match="no column"):
        gc.gemm_points(pd.DataFrame({"gpu": ["mi355x"]}), "test")


def test_committed_tables_load_with_their_schema() -> None:
    g = ds.load("aiter-gemm")
    assert list(g.columns) == list(ds.SCHEMA["aiter-gemm"][1])
    assert set(g["gpu"]) == {"mi300x", "mi355x"}
    assert set(ds.load("aiter-exclusions")["reason"]) <= {
        "placeholder", "repeated", "over_peak", "device", "precision", "not_gated", "superseded", "no_cu_count",
    }  # fmt: skip


def test_amd_gated_deltanet_state_traffic() -> None:
    """The recurrent state is read and written once per step: 2 B H_v d_k d_v elements of the state's dtype."""
    from slimlib.experiments.kernel_timing import linear_check as lc

    t = pd.DataFrame({"gpu": ["mi355x"] * 2, "state_dtype": ["bfloat16", "float32"], "batch_size": [256, 256],
                      "key_heads": [4, 4], "value_heads": [8, 8], "key_head_dim": [128, 128],
                      "value_head_dim": [128, 128], "latency_ms": [0.1, 0.1]})  # fmt: skip
    pts = lc.aiter_gdn_points(t)
    assert list(pts["state_bytes"]) == [2 * 256 * 8 * 128 * 128 * 2.0, 2 * 256 * 8 * 128 * 128 * 4.0]
    bw = get_gpu("mi355x").mem_bw * lc.device_efficiency("mi355x")
    assert pts["modelled_ms"].iloc[1] == pytest.approx(1e3 * pts["state_bytes"].iloc[1] / bw)
    with pytest.raises(DataError, match="state dtype 'float8'"):
        lc.aiter_gdn_points(t.assign(state_dtype="float8"))


def test_bad_cells_and_files_are_refused_naming_file_row_and_column(tmp_path: Path) -> None:
    root = _mirror(tmp_path)
    table = root / "configs" / "a8w8_blockscale_tuned_gemm.csv"
    good = table.read_text()
    for cell, message in (("abc", "row 0: M 'abc' is not a positive number"), ("-4", "row 0: M -4 is not")):
        table.write_text(good.replace("gfx950,256,1,4096,", f"gfx950,256,{cell},4096,", 1))
        with pytest.raises(DataError, match=message):
            build_aiter_tables(root)
    table.write_text(good.replace(",20.0,kA,", ",fast,kA,"))
    with pytest.raises(DataError, match="row 0: us 'fast' is not a time"):
        build_aiter_tables(root)
    table.write_text(good)
    (root / "ops" / "flydsl" / "gdr_decode_tuned.csv").unlink()
    with pytest.raises(DataError, match="gdr_decode_tuned.csv: missing"):
        build_aiter_tables(root)


def test_moe_rows_checked_by_the_layers_flops_and_scaling_kind(tmp_path: Path) -> None:
    """A fused-MoE row faster than the peak at 2 k T D (2 F + F) FLOPs is excluded; MXFP8 (1x32 scales) is its own
    dtype, never merged with the 128-block fp8 rows of the same shape."""
    root = _mirror(tmp_path)
    fp8, mx = "QuantType.per_1x128", "QuantType.per_1x32"
    row = (f"256,{{t}},4096,1536,128,8,ActivationType.Silu,torch.bfloat16,{FP8},{FP8},{{q}},1,0,32,0,"
           "{us},k1,0,1,k2,0,{us},0,1,1,")  # fmt: skip
    flops = 2 * 65536 * 8 * 4096 * 3 * 1536  # 2 T k D (2 F + F)
    fast = flops / get_gpu("mi355x").peak_for("fp8") * 1e6 * 0.5  # twice the peak
    lines = [row.format(t=65536, q=fp8, us=f"{fast:.6f}"), row.format(t=16, q=fp8, us="31.0"),
             row.format(t=16, q=mx, us="32.0")]  # fmt: skip
    (root / "configs" / "tuned_fmoe.csv").write_text(MOE_HEADER + "\n".join(lines) + "\n")
    tables, _ = build_aiter_tables(root)
    m, ex = tables["aiter-moe"], tables["aiter-exclusions"]
    assert sorted(m["moe_dtype"]) == ["fp8_block", "mxfp8"] and (m["num_tokens"] == 16).all()
    reasons = ex[ex["file"] == "configs/tuned_fmoe.csv"].set_index("row")["reason"]
    assert reasons.to_dict() == {0: "over_peak"}
