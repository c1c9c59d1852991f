"""Model terms (`slimlib.model.terms`): each term against hand arithmetic, a model is the sum of its terms, an
ablation differs from the paper model by exactly the dropped term, MoE and MLA features, and one name per quantity."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import SLIM_TRUE_PARAMS, TRUE_PARAMS, grid

from slimlib.errors import SlimError
from slimlib.model import PaperModel, SlimModel, make_model
from slimlib.model import equations as eq
from slimlib.model import terms as T
from slimlib.model.calibrated import TermModel
from slimlib.model.paper import PAPER_TERMS, VARIANTS
from slimlib.model.parallel import allreduce_latency, group_bandwidth
from slimlib.model.params import ParamSpec
from slimlib.model.terms import specs as ps
from slimlib.model.terms.rooflines import layer_floor_applies
from slimlib.registry.gpus import get_gpu

HW = get_gpu("h100-sxm-80gb")
SLIM_P = dict(SLIM_TRUE_PARAMS)
ALL = {**TRUE_PARAMS, **SLIM_P, "t_seq": 4e-6, "eta_d": 0.3}


def feats(**over: float) -> dict[str, np.ndarray]:
    """Hand-built per-GPU features of two rows (B = 4 and 256), dense GQA model unless overridden."""
    base = {
        "batch_size": [4.0, 256.0], "input_len": 500.0, "output_len": 100.0, "n_layers": 32.0,
        "n_layers_total": 32.0, "hidden_size": 4096.0, "d_kv": 1024.0, "ffn_size": 14336.0, "n_ffn_matrices": 3.0,
        "kv_bytes": 2.0, "kv_bytes_per_token": 2 * 32 * 1024 * 2.0, "n_heads": 32.0, "n_kv_heads": 8.0,
        "tensor_parallel": 1.0, "n_experts": 1.0, "experts_per_token": 1.0, "dense_weight_bytes": 14e9,
        "expert_weight_bytes": 0.0, "static_batch": 0.0, "kv_token_capacity": 1e6,
        "max_num_batched_tokens": 512.0, "chunked_prefill": 0.0, "attn_bytes_per_context_token": 2 * 32 * 1024 * 2.0,
        "attn_bytes_per_window_token": 0.0, "sliding_window": 0.0, "latent_attention": 0.0, "expert_parallel": 1.0,
        "n_moe_layers": 0.0, "n_experts_per_gpu": 1.0, "linear_flops_per_token": 32 * 2 * 7.0e9 / 32,
        "bytes_per_weight": 2.0, "lm_head_flops_per_token": 2 * 32000 * 4096.0, "state_bytes": 0.0,
        "n_linear_layers": 0.0, "linear_prefill_flops_per_token": 0.0, "linear_conv_bytes_per_token": 0.0,
        "attention_layer_share": 1.0, "attention_topk": 0.0, "attn_bytes_per_selected_token": 0.0, "indexer_width": 0.0,
        "attention_width": 4096.0, "csa_layer_share": 0.0, "hca_layer_share": 0.0, "sequence_bytes": 0.0,
        "sparse_layer_share": 0.0, "hc_bytes_per_token": 0.0,
    }  # fmt: skip
    base.update(over)
    n = len(base["batch_size"]) if np.ndim(base["batch_size"]) else 1
    return {k: np.broadcast_to(np.asarray(v, dtype=float), (n,)).copy() for k, v in base.items()}


def _times(term: T.Term, f, p=ALL) -> T.Times:
    assert term.times is not None
    return term.times(p, f, HW)


# -- each term against hand arithmetic ----------------------------------------------------------------------------
def test_paper_terms_by_hand():
    f = feats()
    b, il, ol, L, D, dkv, dff = 4.0, 500.0, 100.0, 32.0, 4096.0, 1024.0, 14336.0
    p = {**ALL, **TRUE_PARAMS}
    flops = L * (b * il * (4 * D**2 + 4 * D * dkv + 2 * 3 * D * dff) + 4 * b * il**2 * D)
    assert _times(T.PREFILL_COMPUTE, f, p).prefill[0] == pytest.approx(
        flops / (p["eta_c"] * HW.peak_flops), rel=1e-12
    )
    assert _times(T.BATCH_FIXED, f, p).fixed[0] == p["t_fixed"]
    assert _times(T.PAPER_DECODE_FACTOR, f, p).factor[0] == pytest.approx(
        (b + p["B0"]) / p["eta_m"], rel=1e-12
    )
    td = p["alpha"] * ol + p["gamma"] * L * (D / 1024) ** 2 * ol
    assert _times(T.DENSE_DECODE, f, p).request[0] == pytest.approx(td, rel=1e-12)
    scan = ol * (il + 1) + ol * (ol - 1) / 2
    assert _times(T.KV_SCAN, f, p).request[0] == pytest.approx(2 * L * dkv * 2 * scan / HW.mem_bw, rel=1e-12)


def test_engine_terms_by_hand():
    f = feats()
    b, il, ol, L, D = 4.0, 500.0, 100.0, 32.0, 4096.0
    lin = f["linear_flops_per_token"][0]
    pre = (b * il * lin + L * 2 * b * il**2 * D) / (
        ALL["eta_c"] * HW.peak_flops
    )  # causal: half Eq. 8's square
    assert HW.prefill_attention_flops is None  # no measured rate: the attention at eta_c
    assert _times(T.SERVED_PREFILL, f).prefill[0] == pytest.approx(pre, rel=1e-12)
    assert HW.decode_attention_eff is not None  # the measured kernel's efficiency, not eta_attn
    assert _times(T.ATTENTION_FACTOR, f).factor[0] == pytest.approx(b / HW.decode_attention_eff, rel=1e-12)
    amd = get_gpu("mi300x")  # no measured kernel: eta_attn
    assert T.ATTENTION_FACTOR.times(ALL, f, amd).factor[0] == pytest.approx(b / ALL["eta_attn"], rel=1e-12)
    floor = L * float(HW.layer_floor_s or 0.0) if layer_floor_applies(HW) else 0.0
    weights = 14e9 / (ALL["eta_w"] * HW.mem_bw) + floor  # B = 4: below the ridge
    assert _times(T.DECODE_GEMMS, f).step[0] == pytest.approx(weights, rel=1e-12)
    assert _times(T.PER_TOKEN_DECODE, f).request[0] == pytest.approx(ALL["alpha"] * ol, rel=1e-12)
    assert _times(T.STEP_OVERHEAD, f).step[0] == ALL["t_step"]
    assert _times(T.HOST_SEQUENCE_OVERHEAD, f).step[1] == pytest.approx(256 * 3.7478e-5, rel=1e-12)


def test_the_prefill_attention_runs_at_the_devices_measured_rate_where_it_has_one():
    """On the CPU engine (registry prefill_attention_flops) the causal attention FLOPs take FLOPs / rate whatever
    eta_c is, the linear FLOPs FLOPs / (eta_c peak); a longer prompt adds the attention at that rate."""
    cpu = get_gpu("cpu")
    assert cpu.prefill_attention_flops is not None and cpu.prefill_attention_flops < cpu.peak_flops
    f = feats()
    b, il, L, D = 4.0, 500.0, 32.0, 4096.0
    lin = f["linear_flops_per_token"][0]
    assert T.SERVED_PREFILL.times is not None
    for eta_c in (0.3, 0.9):
        got = T.SERVED_PREFILL.times({**ALL, "eta_c": eta_c}, f, cpu).prefill[0]
        want = b * il * lin / (eta_c * cpu.peak_flops) + L * 2 * b * il**2 * D / cpu.prefill_attention_flops
        assert got == pytest.approx(want, rel=1e-12)
    at_eta_c = (b * il * lin + L * 2 * b * il**2 * D) / (ALL["eta_c"] * cpu.peak_flops)  # 2-core peak: faster
    assert T.SERVED_PREFILL.times(ALL, f, cpu).prefill[0] > at_eta_c


def test_decode_attention_kernel_regime_window_and_latent():
    scan = 100 * 501 + 100 * 99 / 2
    f = feats()  # 32 heads per rank: B = 4 -> 128 pairs (KV width), B = 256 -> 8192 pairs (query width)
    amd = get_gpu("mi300x")  # vLLM's paged attention: no measured kernel
    assert T.DECODE_ATTENTION.times is not None
    got = T.DECODE_ATTENTION.times(ALL, f, amd).request * amd.mem_bw
    bpt = 2 * 32 * 1024 * 2.0
    assert got == pytest.approx([bpt * scan, bpt * 4 * scan], rel=1e-12)  # D / D_kv = 4 above the switch
    assert HW.decode_attention_eff is not None  # the measured kernel reads the KV width at every batch
    assert T.attention_bytes(f, HW) == pytest.approx([bpt * scan] * 2)
    # a sliding window of 256 tokens: every step past it reads 256 positions
    fw = feats(
        attn_bytes_per_context_token=bpt / 2, attn_bytes_per_window_token=bpt / 2, sliding_window=256.0
    )
    win = sum(min(500 + 1 + t, 256) for t in range(100))
    assert _times(T.DECODE_ATTENTION, fw).request[0] * HW.mem_bw == pytest.approx(
        bpt / 2 * scan + bpt / 2 * win, rel=1e-12
    )
    assert eq.window_scan_tokens(500, 100, 4096) == pytest.approx(scan)  # window beyond the context: Eq. 12
    # MLA (DeepSeek-V3: 576 latent values x 61 layers x 2 bytes per token): the latent, once per sequence
    latent = 576 * 61 * 2.0
    fm = feats(attn_bytes_per_context_token=latent, latent_attention=1.0, n_heads=128.0, d_kv=128.0)
    assert _times(T.DECODE_ATTENTION, fm).request * HW.mem_bw == pytest.approx([latent * scan] * 2, rel=1e-12)


def test_moe_step_weight_read_follows_the_expert_touch_curve():
    """Per step: the dense weights once plus the routed experts the step's B tokens touch, X (1 - (1 - k/X)^B)
    of X; a prefill of B IL tokens touches all of them."""
    b = np.array([1.0, 2.0, 4.0, 8.0, 32.0, 128.0, 1024.0])
    x, k, e = 128.0, 8.0, 400e9
    f = feats(batch_size=b, n_experts=x, experts_per_token=k, expert_weight_bytes=e, n_moe_layers=58.0)
    t = _times(T.MOE_EXPERTS, f)
    touched = x * (1 - (1 - k / x) ** b)
    bw = ALL["eta_w"] * HW.mem_bw
    assert t.step == pytest.approx(e * touched / x / bw, rel=1e-12)
    assert t.step[0] == pytest.approx(e * k / x / bw, rel=1e-12)  # one token: its k experts
    assert np.all(np.diff(t.step) > 0) and t.step[-1] == pytest.approx(e / bw, rel=1e-9)  # the plateau
    assert t.prefill == pytest.approx(np.full(b.size, e / bw), rel=1e-9)
    assert eq.experts_touched(b, x, k) == pytest.approx(touched)


def test_collectives_by_hand():
    gpu = get_gpu("h100-sxm-80gb")
    f = feats(
        tensor_parallel=4.0, n_layers=8.0, expert_parallel=4.0, n_moe_layers=58.0, experts_per_token=8.0
    )
    ar = T.ALLREDUCE.times(ALL, f, gpu)  # type: ignore[misc]
    msg = 4 * 4096 * 2.0
    one = allreduce_latency(4.0, gpu) + 2 * 3 / 4 * msg / group_bandwidth(4.0, gpu)
    assert ar.decode[0] == pytest.approx(100 * 2 * 32 * one, rel=1e-12)
    a2a = T.EXPERT_ALLTOALL.times(ALL, f, gpu)  # type: ignore[misc]
    one = allreduce_latency(4.0, gpu) + 3 / 4 * (4 * 8 * 4096 * 2.0) / group_bandwidth(4.0, gpu)
    assert a2a.decode[0] == pytest.approx(100 * 2 * 58 * one, rel=1e-12)
    single = feats(n_moe_layers=58.0)
    assert T.ALLREDUCE.times(ALL, single, gpu).decode == pytest.approx([0, 0])  # type: ignore[misc]
    assert T.EXPERT_ALLTOALL.times(ALL, single, gpu).prefill == pytest.approx([0, 0])  # type: ignore[misc]


def test_effective_batch_term_caps_and_keeps_the_requested_batch():
    f = feats(batch_size=[8.0, 4096.0], kv_token_capacity=30000.0, static_batch=[0.0, 1.0])
    out = T.effective_batch_term().adjust(f)  # type: ignore[misc]
    assert out["batch_cap"] == pytest.approx([8, 4096])
    assert out["batch_size"] == pytest.approx([8, 30000 / 600])  # static: kappa = 1
    assert f["batch_size"][1] == 4096  # the input features are not changed


# -- models are sums of terms; ablations -------------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["paper", "no-kv-scan", "no-dense-decode", "slim"])
def test_model_is_the_sum_of_its_terms(variant):
    df = grid(models=("opt-1.3b", "llama-2-7b"), batch=(1, 16, 512))
    df["tensor_parallel"] = np.where(df["model"] == "llama-2-7b", 2, 1)
    model = make_model(variant)
    names = [s.name for s in model.param_specs()]
    model = type(model).with_params({k: ALL[k] for k in names}, gpu="h100-sxm-80gb", **_options(variant))
    pred = model.predict(df)
    c = model.contributions(df)
    assert list(c) == [t.name for t in model.terms() if t.times is not None]
    pre = sum(v.prefill for v in c.values())
    dec = sum(v.decode for v in c.values())
    fixed = sum(v.fixed for v in c.values())
    np.testing.assert_allclose(pred["pred_prefill_s"], pre, rtol=1e-12)
    np.testing.assert_allclose(pred["pred_decode_s"], dec, rtol=1e-12)
    np.testing.assert_allclose(pred["pred_e2e_s"], pre + dec + fixed, rtol=1e-12)
    assert np.all(c["allreduce"].decode[df["tensor_parallel"].to_numpy() == 2] > 0)


def _options(variant: str) -> dict:
    return {} if variant == "slim" else {"variant": variant}


@pytest.mark.parametrize("variant,dropped", [("no-kv-scan", "kv_scan"), ("no-dense-decode", "dense_decode")])
def test_ablation_is_the_paper_model_without_one_term(variant, dropped):
    df = grid(models=("opt-1.3b", "llama-2-7b"), batch=(1, 16, 512))
    assert [t.name for t in VARIANTS[variant]] == [t.name for t in PAPER_TERMS if t.name != dropped]
    paper = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    names = [s.name for s in PaperModel(variant=variant).param_specs()]
    ablated = PaperModel.with_params({k: TRUE_PARAMS[k] for k in names}, gpu="h100-sxm-80gb", variant=variant)
    diff = paper.predict(df)["pred_decode_s"] - ablated.predict(df)["pred_decode_s"]
    np.testing.assert_allclose(diff, paper.contributions(df)[dropped].decode, rtol=1e-10)
    np.testing.assert_array_equal(paper.predict(df)["pred_prefill_s"], ablated.predict(df)["pred_prefill_s"])
    assert set(paper.param_specs()) - set(ablated.param_specs()) == {
        s for t in PAPER_TERMS if t.name == dropped for s in t.specs
    }


def test_slim_parameters_in_the_old_order():
    assert [s.name for s in SlimModel().param_specs()] == [
        "eta_c", "t_fixed", "eta_attn", "eta_w", "alpha", "t_step", "t_layer", "t_act"]  # fmt: skip
    assert [s.name for s in PaperModel().param_specs()] == [
        "eta_c",
        "t_fixed",
        "eta_m",
        "B0",
        "alpha",
        "gamma",
    ]


# -- one name, one quantity ----------------------------------------------------------------------------------------
def test_a_parameter_name_means_one_quantity():
    every = [v for v in vars(ps).values() if isinstance(v, ParamSpec)]
    assert len({s.name for s in every}) == len(every)
    assert len(T.CATALOGUE) == 20 and all(name == t.name for name, t in T.CATALOGUE.items())
    T.model_specs(T.CATALOGUE.values())  # all terms together: no name with two meanings
    for term in T.CATALOGUE.values():
        for s in term.specs:
            assert s is getattr(
                ps, {x.name: k for k, x in vars(ps).items() if isinstance(x, ParamSpec)}[s.name]
            )
    clash = T.Term(
        "other", "a different quantity under the paper's name", (ParamSpec("eta_m", 0, 1, 1, 1, "-", "x"),)
    )
    with pytest.raises(SlimError, match="'eta_m' differently"):
        T.model_specs((*PAPER_TERMS, clash))
    with pytest.raises(SlimError, match="appears twice"):
        TermModel((*PAPER_TERMS, T.KV_SCAN))
    with pytest.raises(SlimError, match="no term"):
        T.without(PAPER_TERMS, "nonexistent")


def test_two_decode_factors_are_refused():
    f = feats()
    with pytest.raises(SlimError, match="decode factor"):
        T.compose((T.PAPER_DECODE_FACTOR, T.ATTENTION_FACTOR, T.KV_SCAN), ALL, f, HW)


def test_mixtral_rows_read_the_touched_experts_per_step():
    """A registry MoE model (Mixtral 8x7B: 8 experts, top-2) through the recommended model: per decode step the
    routed-expert read is the expert bytes times 1 - (1 - 2/8)^B."""
    df = grid(
        models=("mixtral-8x7b",), gpu="mi300x", batch=(1, 2, 4, 16), input_len=(128,), output_len=(128,)
    )
    df["gpu_blocks"] = 1e6  # no KV cap
    m = SlimModel.with_params(SLIM_P, gpu="mi300x")
    hw = get_gpu("mi300x")
    f = m._features(df, hw)
    share = 1 - (1 - 2 / 8) ** df["batch_size"].to_numpy()
    per_step = m.contributions(df)["moe_experts"].decode / df["output_len"].to_numpy()
    np.testing.assert_allclose(
        per_step, f["expert_weight_bytes"] * share / (SLIM_P["eta_w"] * hw.mem_bw), rtol=1e-12
    )
    assert f["expert_weight_bytes"][0] > 10 * f["dense_weight_bytes"][0]


def test_features_supply_every_key_the_terms_read():
    """The serving features (`model_features` through `CalibratedModel._features`) hold every key any term of
    `CATALOGUE` reads, for a dense, a mixture-of-experts and a latent-attention model."""
    df = grid(models=("llama-2-7b", "mixtral-8x7b", "deepseek-v3"), gpu="h200-sxm-141gb", batch=(4,),
              input_len=(128,), output_len=(64,))  # fmt: skip
    df["tensor_parallel"] = 8
    hw = get_gpu("h200-sxm-141gb")
    f = SlimModel.with_params(SLIM_P, gpu=hw.name)._features(df, hw)
    missing = {k for t in T.CATALOGUE.values() for k in t.reads if k not in f}
    assert not missing
    np.testing.assert_array_equal(f["latent_attention"], [0.0, 0.0, 1.0])
    assert np.isfinite(f["kv_token_capacity"]).all() and (f["kv_token_capacity"] > 0).all()


def test_token_budget_caps_only_chunked_prefill_rows():
    """The chunked-prefill token budget caps B only where the row's ``chunked_prefill`` is true."""
    f = feats(batch_size=[256.0, 256.0], chunked_prefill=[0.0, 1.0])
    b = T.effective_batch(f)
    assert b[0] == 256.0 and b[1] == pytest.approx(512.0 * 100 / 600)


def test_a_fit_computes_the_parameter_free_terms_once_with_the_same_numbers():
    f = feats(tensor_parallel=4.0)
    terms = (T.BATCH_FIXED, T.ATTENTION_FACTOR, T.DECODE_ATTENTION, T.STEP_OVERHEAD,
             T.HOST_SEQUENCE_OVERHEAD, T.ALLREDUCE, T.EXPERT_ALLTOALL)  # fmt: skip
    known = T.fixed_times(terms, f, HW)
    # the all-reduces, the all-to-alls, the host work and the decode attention's traffic have no parameter
    assert set(known) == {"decode_attention", "host_sequence_overhead", "allreduce", "expert_alltoall"}
    for a, b in zip(T.compose(terms, ALL, f, HW), T.compose(terms, ALL, f, HW, known), strict=True):
        assert np.array_equal(a, b)
    reads = T.Term("reads_eta_w", "a term that reads a parameter it does not declare", (),
                   lambda p, f, hw: T.Times(step=p["eta_w"]))  # fmt: skip
    assert T.fixed_times((reads,), f, HW) == {}  # left out: computed with the parameters every time
    assert T.compose((reads,), {"eta_w": 2.0}, f, HW, {})[1].tolist() == [200.0, 200.0]
