"""MoE and MLA term arithmetic (kernel_timing.moe_mla_terms) and their checks on the committed aic-moe / aic-mla /
aic-moe-a2a tables (kernel_timing.moe_mla_check): the functions notebook 09's MoE/MLA section calls."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from slimlib.data import available  # noqa: E402
from slimlib.errors import DataError, UnknownNameError  # noqa: E402
from slimlib.experiments.kernel_timing import moe_mla_check as mc  # noqa: E402
from slimlib.experiments.kernel_timing import moe_mla_terms as mt  # noqa: E402
from slimlib.experiments.outputs.plotting import new_figure  # noqa: E402
from slimlib.registry.gpus import get_gpu  # noqa: E402
from slimlib.registry.precision import kernel_peak, kernel_weight_bytes  # noqa: E402

needs_tables = pytest.mark.skipif(
    not all(available(n) for n in ("aic-moe", "aic-mla", "aic-moe-a2a")),
    reason="aic-moe / aic-mla / aic-moe-a2a not built (slim data build --raw ../shared/data)",
)
N_BOOT = 400


# ------------------------------------------------------------------------------------------- term arithmetic
def test_moe_weight_bytes_from_top_k_experts_to_all_experts():
    hidden, inter = 7168, 2048
    per_expert = 3 * hidden * inter
    one = mt.moe_weight_bytes_touched(1, 256, 8, hidden, inter, 1.0)
    assert one == pytest.approx(8 * per_expert)  # one token touches its top-k experts
    many = mt.moe_weight_bytes_touched(1e6, 256, 8, hidden, inter, 2.0)
    assert many == pytest.approx(256 * per_expert * 2)  # the plateau: every expert
    split = mt.moe_weight_bytes_touched([1, 64], 256, 8, hidden, inter, 1.0, tp=2, ep=4)
    assert split == pytest.approx(mt.moe_weight_bytes_touched([1, 64], 256, 8, hidden, inter, 1.0) / 8)
    assert mt.moe_flops(16, 8, hidden, inter) == pytest.approx(2 * 16 * 8 * per_expert)
    assert mt.moe_flops(16, 8, hidden, inter, tp=2, ep=4) == pytest.approx(2 * 16 * 8 * per_expert / 8)
    assert mt.expert_touch_knee(256, 8) == 32


def test_dtype_bytes_and_peaks():
    h100, a100, b200 = get_gpu("h100-sxm-80gb"), get_gpu("a100-sxm-80gb"), get_gpu("b200-sxm-180gb")
    assert [kernel_weight_bytes(d) for d in ("bfloat16", "fp8", "fp8_block", "int4_wo", "nvfp4")] == [
        2,
        1,
        1,
        0.5,
        0.5,
    ]
    assert kernel_peak(h100, "fp8_block") == h100.peak_flops_fp8
    assert kernel_peak(h100, "w4a16_mxfp4") == h100.peak_flops  # weight-only: 16-bit compute
    assert kernel_peak(b200, "nvfp4") == b200.peak_flops_fp4
    with pytest.raises(DataError, match="no fp8 tensor peak"):
        kernel_peak(a100, "fp8")
    with pytest.raises(UnknownNameError):
        kernel_weight_bytes("fp7")


def test_mla_latent_bytes_and_flops():
    # DeepSeek-V3: (512 + 64) latent values per token and layer, 2 bytes: 1152 bytes (x 61 layers = 70 KB)
    assert mt.mla_latent_bytes(1, 1, 2) == 1152
    assert mt.mla_latent_bytes(4, 1000, 1) == 4 * 1000 * 576
    assert mt.mla_decode_flops(2, 100, 16) == pytest.approx(2 * 100 * 16 * 2 * (576 + 512))
    # replicated down projections, per-head up and output projections
    assert mt.mla_projection_params(0) == 7168 * 1536 + 7168 * 576
    assert mt.mla_projection_params(128) - mt.mla_projection_params(0) == 128 * (
        1536 * 192 + 512 * 256 + 128 * 7168
    )
    assert mt.mla_prefill_attention_flops(1, 4, 1) == pytest.approx(10 * 2 * (192 + 128))


def test_fit_inverse_efficiency_recovers_scale_and_floor():
    r = np.array([0.1, 0.2, 0.5, 1.0, 3.0])
    t = 0.05 + r / 0.8
    floor, scale = mc.fit_inverse_efficiency(r, t, intercept=True)
    assert floor == pytest.approx(0.05) and 1 / scale == pytest.approx(0.8)
    assert mc.fit_inverse_efficiency(r, r / 0.5)[1] == pytest.approx(2.0)
    floor, scale = mc.fit_inverse_efficiency(r, 0.3 + r * 1.5, base=0.3)
    assert floor == 0.0 and scale == pytest.approx(1.5)
    with pytest.raises(DataError, match="no rows"):
        mc.fit_inverse_efficiency([0.0], [1.0])


# ------------------------------------------------------------------------------------- checks on the tables
@pytest.fixture(scope="module")
def moe_pts():
    return mc.moe_points()


@needs_tables
def test_moe_check_fits_small_steps_and_scores_the_rest(moe_pts):
    p = moe_pts
    assert set(p["distribution"]) == {"balanced"} and set(p["moe_tp"]) == {1} and set(p["moe_ep"]) == {1}
    assert (p.loc[p["role"] == "fit", "num_tokens"] <= 16).all() and (
        p.loc[p["role"] == "score", "num_tokens"] > 16
    ).all()
    assert (p.groupby(["gpu", "moe_dtype"])["efficiency"].nunique() == 1).all()
    assert set(p["gpu"]) == {"h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb"}  # A100 has no balanced rows
    assert (p["knee_tokens"] == p["n_experts"] / p["top_k"]).all()
    s = mc.moe_check(p, n_boot=N_BOOT)
    tot = s[(s["gpu"] == "all")].iloc[0]
    assert tot["n_scored"] == (p["role"] == "score").sum()
    assert tot["mape_lo_pct"] <= tot["mape_pct"] <= tot["mape_hi_pct"]
    assert tot["mape_pct"] == pytest.approx(27.83, abs=0.1)  # the number reported in the closing note
    bf16 = s[(s["gpu"] == "h100-sxm-80gb") & (s["dtype"] == "bfloat16") & (s["group"] == "all")].iloc[0]
    assert bf16["efficiency"] == pytest.approx(0.81, abs=0.01) and bf16["mape_pct"] < 20


@needs_tables
def test_the_expert_touch_plateau_explains_the_data_better_than_either_extreme(monkeypatch, moe_pts):
    term = mc.moe_check(moe_pts, n_boot=N_BOOT).iloc[-1]["mape_pct"]

    def touched_as(fn):
        monkeypatch.setattr(
            mc, "moe_weight_bytes_touched",
            lambda t, x, k, h, i, b, tp=1, ep=1: fn(np.asarray(t, float), np.asarray(x, float), np.asarray(k, float))
            * 3 * np.asarray(h, float) * np.asarray(i, float) * b / np.asarray(tp, float) / np.asarray(ep, float),
        )  # fmt: skip
        return mc.moe_check(mc.moe_points(), n_boot=N_BOOT).iloc[-1]["mape_pct"]

    no_plateau = touched_as(lambda t, x, k: k * t)  # every routing reads a new expert
    all_experts = touched_as(lambda t, x, k: x + 0 * t)  # every step reads every expert
    assert no_plateau > 2 * term and all_experts > term + 10


@needs_tables
def test_moe_points_with_expert_parallel_layouts_and_floor():
    p = mc.moe_points(layouts=((1, 8), (8, 1)), floor=True)
    assert set(zip(p["moe_tp"], p["moe_ep"], strict=True)) == {(1, 8), (8, 1)}
    assert (p["floor_ms"] > 0).all()
    with pytest.raises(DataError, match="no rows of distribution 'uniform'"):
        mc.moe_points(distribution="uniform")


@needs_tables
def test_moe_layout_check_splits_experts_and_adds_a_floor():
    t = mc.moe_layout_check(layouts=((1, 1), (1, 8)), n_boot=N_BOOT)
    assert list(zip(t["moe_tp"], t["moe_ep"], t["floor"], strict=True)) == [
        (1, 1, False), (1, 1, True), (1, 8, False), (1, 8, True)
    ]  # fmt: skip
    assert t.loc[0, "mape_pct"] == pytest.approx(27.83, abs=0.1)
    assert t.loc[0, "median_floor_ms"] == 0 and t.loc[1, "median_floor_ms"] > 0
    # a per-step floor matters most where each GPU holds an eighth of the experts
    assert t.loc[2, "mape_pct"] - t.loc[3, "mape_pct"] > t.loc[0, "mape_pct"] - t.loc[1, "mape_pct"]


@needs_tables
def test_mla_checks():
    gen, ctx = mc.mla_generation_points(), mc.mla_context_points()
    base = gen[gen["role"] == "base"]
    assert (base["modelled_ms"] == base["latency_ms"]).all() and (base["context"] == 2).all()
    assert (gen.loc[gen["role"] == "score", "context"] > 8192).all()
    assert (ctx.loc[ctx["role"] == "fit", "tokens"] <= 4096).all()
    s = mc.mla_check(gen, ctx, n_boot=N_BOOT)
    assert set(s["check"]) == {"mla_generation", "mla_context"}
    tot = s[s["gpu"] == "all"].set_index("check")["mape_pct"]
    assert tot["mla_generation"] == pytest.approx(8.85, abs=0.1)
    assert tot["mla_context"] == pytest.approx(25.67, abs=0.1)
    eff = s[(s["check"] == "mla_generation") & (s["group"] == "all") & (s["gpu"] != "all")]["efficiency"]
    assert len(eff) == 6 and eff.between(0.6, 1.0).all()  # bandwidth efficiencies of the latent read


@needs_tables
def test_a2a_summary():
    from slimlib.data import load

    a2a = load("aic-moe-a2a")
    s = mc.a2a_summary(a2a)
    assert set(s["gpu"]) == {"h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb"} and set(s["ep_size"]) == {8}
    r = s[(s["gpu"] == "h200-sxm-141gb") & (s["comm_backend"] == "deepep_ht") & (s["phase"] == "dispatch")
          & (s["hidden_size"] == 7168) & (s["top_k"] == 8) & (s["n_experts"] == 256)].iloc[0]  # fmt: skip
    raw = a2a[(a2a["gpu"] == "h200-sxm-141gb") & (a2a["comm_backend"] == "deepep_ht") & (a2a["phase"] == "dispatch")
              & (a2a["hidden_size"] == 7168) & (a2a["top_k"] == 8) & (a2a["n_experts"] == 256)]  # fmt: skip
    assert r["floor_us"] == raw.loc[raw["num_tokens"].idxmin(), "latency_us"]
    big = raw.loc[raw["num_tokens"].idxmax()]
    assert r["bandwidth_at_max_gb_s"] == pytest.approx(
        big["num_tokens"] * 7168 * 2 / (big["latency_us"] * 1e-6) / 1e9
    )


@needs_tables
def test_figures_draw_and_refuse_missing_data(moe_pts):
    from slimlib.data import load

    fig, axes = new_figure(1, 3)
    mc.plot_moe_check(axes[0], moe_pts, "h100-sxm-80gb", "bfloat16", ["4096x14336, 8e top-2"])
    assert len(axes[0].lines) == 3  # measured, term, knee
    gen = mc.mla_generation_points()
    mc.plot_mla_check(axes[1], gen, "h200-sxm-141gb", "fp8", [16, 128], 64)
    assert len(axes[1].lines) == 4
    mc.plot_a2a(axes[2], load("aic-moe-a2a"), 7168, 8, 256, "combine")
    assert len(axes[2].lines) >= 4
    with pytest.raises(DataError, match="no MoE points of shape"):
        mc.plot_moe_check(axes[0], moe_pts, "h100-sxm-80gb", "bfloat16", ["1x1, 1e top-1"])
    with pytest.raises(DataError, match="no MLA decode points with 3 heads"):
        mc.plot_mla_check(axes[1], gen, "h200-sxm-141gb", "fp8", [3], 64)
    import matplotlib.pyplot as plt

    plt.close(fig)
    assert isinstance(mc.shape_label(7168, 2048, 256, 8), str) and pd.notna(moe_pts["shape"]).all()
