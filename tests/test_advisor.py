"""SLIM-BCA (paper Eq. 13): hand-built curves, memory arithmetic, monotonicity, bad input, CLI, evaluation."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS

from slimlib.advisor import capacity as A
from slimlib.cli.main import main
from slimlib.errors import DataError
from slimlib.experiments.bca import advisor_eval as AE
from slimlib.model import PaperModel
from slimlib.model import memory as M
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu

B = np.array([1, 2, 4, 8, 16])
# hand-built curve: throughput rises then saturates, E2E grows
THR = np.array([100.0, 190.0, 340.0, 500.0, 560.0])
E2E = np.array([1.0, 1.1, 1.3, 1.8, 3.2])


def _model(gpu="h100-sxm-80gb"):
    return PaperModel.with_params(TRUE_PARAMS, gpu=gpu)


# --------------------------------------------------------------------------------------------- Eq. 13 on arrays
def test_no_constraint_binds_gives_largest_candidate():
    idx, code, eff = A.batch_capacity(B, THR, E2E, slo_s=10.0, epsilon=0.01)
    assert B[idx[0]] == 16 and A.BINDING[int(code[0])] == "none"
    np.testing.assert_allclose(eff[0], THR / (B * 100.0))


def test_slo_binds():
    idx, code, _ = A.batch_capacity(B, THR, E2E, slo_s=1.5, epsilon=0.01)
    assert B[idx[0]] == 4 and A.BINDING[int(code[0])] == "slo"
    # the bound is inclusive: E2E == SLO is allowed
    idx, _, _ = A.batch_capacity(B, THR, E2E, slo_s=1.8, epsilon=0.01)
    assert B[idx[0]] == 8


def test_efficiency_binds_strictly():
    # efficiencies: 1, .95, .85, .625, .35
    idx, code, _ = A.batch_capacity(B, THR, E2E, slo_s=10.0, epsilon=0.5)
    assert B[idx[0]] == 8 and A.BINDING[int(code[0])] == "efficiency"
    idx, _, _ = A.batch_capacity(B, THR, E2E, slo_s=10.0, epsilon=0.625)  # strict '>' excludes B = 8
    assert B[idx[0]] == 4


def test_memory_binds():
    fits = B <= 2
    idx, code, _ = A.batch_capacity(B, THR, E2E, slo_s=10.0, epsilon=0.01, fits=fits)
    assert B[idx[0]] == 2 and A.BINDING[int(code[0])] == "memory"


def test_peak_inside_feasible_set_and_ties_go_to_smaller_batch():
    thr = np.array([100.0, 190.0, 400.0, 400.0, 300.0])
    idx, code, _ = A.batch_capacity(B, thr, E2E, slo_s=10.0, epsilon=0.01)
    assert B[idx[0]] == 4 and A.BINDING[int(code[0])] == "peak"


def test_infeasible_and_vectorized_rows():
    thr = np.vstack([THR, THR])
    e2e = np.vstack([E2E, E2E])
    idx, code, _ = A.batch_capacity(B, thr, e2e, slo_s=np.array([0.5, 1.5]), epsilon=0.01)
    assert idx[0] == -1 and A.BINDING[int(code[0])] == "infeasible"
    assert B[idx[1]] == 4


@pytest.mark.parametrize("eps", [0.0, -0.1, 1.01, float("nan")])
def test_epsilon_outside_range_is_an_error(eps):
    with pytest.raises(DataError, match="epsilon"):
        A.batch_capacity(B, THR, E2E, slo_s=1.0, epsilon=eps)


def test_bad_slo_is_an_error():
    with pytest.raises(DataError, match="SLO"):
        A.batch_capacity(B, THR, E2E, slo_s=-1.0, epsilon=0.5)


# --------------------------------------------------------------------------------------------- memory arithmetic
def test_kv_memory_mha_opt():
    arch = get_architecture("opt-1.3b")  # MHA: 24 layers, D_kv = D = 2048
    config = serving_config(arch)
    assert config.kv_bytes_per_token == 2 * 24 * 2048 * 2
    # 250 + 260 = 510 tokens -> 32 blocks of 16 -> 512 token slots
    assert config.request_blocks(250 + 260) == 32
    assert config.request_blocks(256 + 256) == 32  # exact multiple: no extra block


def test_kv_memory_gqa_is_smaller_by_head_ratio():
    gqa = get_architecture("mistral-7b")  # 8 KV heads of 32 query heads
    assert gqa.n_kv_heads * 4 == gqa.n_heads
    config = serving_config(gqa)
    assert config.kv_bytes_per_token == 2 * gqa.n_layers * gqa.n_kv_heads * gqa.head_dim * 2
    mha_like = 2 * gqa.n_layers * gqa.hidden_size * 2
    assert config.kv_bytes_per_token * 4 == mha_like


def test_default_allocation_and_vllm_settings():
    arch, gpu = get_architecture("llama-2-7b"), get_gpu("h100-sxm-64gb")
    total = gpu.mem_bytes_reported or gpu.mem_bytes
    kv = serving_config(arch, gpu, gpu_memory_utilization=0.9, reserve_gib=1.0).kv_pool
    assert kv == pytest.approx(total * 0.9 - 2 * arch.n_params - 2**30)
    s = A.vllm_settings(arch, gpu, 64, 250, 260, block_size=16, reserve_gib=1.0)
    assert s["max_num_seqs"] == 64 and s["num_gpu_blocks_override"] == 64 * 32
    need = 2 * arch.n_params + 2**30 + 64 * 32 * 16 * (2 * arch.n_layers * arch.d_kv * 2)
    assert s["gpu_memory_utilization"] == math.ceil(need / total * 100) / 100
    assert s["gpu_memory_utilization"] * total >= need
    with pytest.raises(DataError, match="no feasible"):
        A.vllm_settings(arch, gpu, 0, 250, 260)


# --------------------------------------------------------------------------------------------- advisor on a model
def _wl(model="opt-1.3b", il=512, ol=256):
    return pd.DataFrame({"model": [model], "input_len": [float(il)], "output_len": [float(ol)]})


def test_advise_matches_bruteforce_predict():
    m = _model()
    adv = A.advise(m, "opt-1.3b", 512, 256, slo_s=20.0, epsilon=0.4, batch_sizes=np.arange(1, 257))
    grid = pd.DataFrame({"model": "opt-1.3b", "batch_size": np.arange(1, 257, dtype=float),
                         "input_len": 512.0, "output_len": 256.0})  # fmt: skip
    pred = m.predict(grid)
    np.testing.assert_allclose(adv.curve["pred_throughput_tok_s"], pred["pred_throughput_tok_s"], rtol=1e-12)
    t1 = pred["pred_throughput_tok_s"].iloc[0]
    ok = (pred["pred_e2e_s"] <= 20.0) & (pred["pred_throughput_tok_s"] / (grid["batch_size"] * t1) > 0.4)
    best = grid["batch_size"][ok][pred["pred_throughput_tok_s"][ok].idxmax()]
    assert adv.b_cap == int(best) and adv.feasible
    assert adv.summary["binding"] in ("slo", "efficiency")


def test_monotone_in_slo_and_epsilon():
    m = _model()
    wl = pd.concat([_wl()] * 12, ignore_index=True)
    wl["slo_s"] = np.geomspace(2, 200, 12)
    caps = A.advise_many(m, wl, epsilon=0.05)["b_cap"].to_numpy()
    assert np.all(np.diff(caps) >= 0) and caps[-1] > caps[0]
    wl = pd.concat([_wl()] * 10, ignore_index=True)
    wl["epsilon"] = np.linspace(0.05, 0.95, 10)
    caps = A.advise_many(m, wl, slo_s=np.inf)["b_cap"].to_numpy()
    assert np.all(np.diff(caps) <= 0) and caps[0] > caps[-1]


def test_memory_and_infeasible_workloads():
    m = _model()
    out = A.advise_many(m, _wl("opt-1.3b", 1000, 1000), slo_s=np.inf, epsilon=0.01)
    row = out.iloc[0]
    assert row["binding"] == "memory" and row["b_cap"] == row["max_batch_memory"]
    assert row["kv_needed_gib"] <= row["kv_default_gib"]
    out = A.advise_many(m, _wl("opt-1.3b", 1000, 1000), slo_s=np.inf, epsilon=0.01, gpu_blocks=100)
    assert out.iloc[0]["b_cap"] == 0 and "does not fit" in out.iloc[0]["reason"]
    out = A.advise_many(m, _wl(), slo_s=1e-3, epsilon=0.5)
    assert out.iloc[0]["b_cap"] == 0 and "below the smallest predicted E2E" in out.iloc[0]["reason"]


def test_parameters_of_another_gpu_are_rejected():
    with pytest.raises(DataError, match="calibrated on h100-sxm-80gb"):
        A.advise_many(_model(), _wl(), 10.0, 0.5, gpu="a100-sxm-80gb")


# --------------------------------------------------------------------------------------------- CLI
@pytest.fixture
def params_file(tmp_path):
    p = tmp_path / "params.json"
    _model().to_json(p)
    return p


def test_cli_advise_text(params_file, tmp_path, capsys):
    curve = tmp_path / "curve.csv"
    rc = main(["advise", str(params_file), "--model", "opt-1.3b", "--input-len", "512", "--output-len", "256",
               "--slo-s", "20", "--epsilon", "0.4", "--max-batch", "256", "--curve", str(curve)])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    adv = A.advise(_model(), "opt-1.3b", 512, 256, 20.0, 0.4, batch_sizes=np.arange(1, 257))
    assert f"B_cap = {adv.b_cap} " in out
    assert f"--max-num-seqs {adv.b_cap} --gpu-memory-utilization" in out
    assert f"--num-gpu-blocks-override {adv.b_cap * 48}" in out  # 768 tokens = 48 blocks
    assert f"saved {adv.summary['kv_saved_gib']:.2f} GiB" in out
    assert len(pd.read_csv(curve)) == 256


def test_cli_advise_json_and_errors(params_file, capsys):
    rc = main(["advise", str(params_file), "--model", "opt-1.3b", "--input-len", "512", "--output-len", "256",
               "--slo-s", "20", "--format", "json"])  # fmt: skip
    rec = json.loads(capsys.readouterr().out)
    assert rc == 0 and rec["vllm"]["max_num_seqs"] == rec["b_cap"] > 0
    rc = main(["advise", str(params_file), "--model", "opt-1.3b", "--input-len", "512", "--output-len", "256",
               "--slo-s", "0.001"])  # fmt: skip
    assert rc == 1 and "no feasible batch size" in capsys.readouterr().out
    rc = main(["advise", str(params_file), "--model", "opt-1.3b", "--input-len", "5", "--output-len", "5",
               "--epsilon", "2"])  # fmt: skip
    assert rc == 2 and "epsilon 2 is outside (0, 1]" in capsys.readouterr().err
    rc = main(["advise", str(params_file), "--model", "opt-1.3b", "--input-len", "5", "--output-len", "5",
               "--gpu", "a100-sxm-80gb"])  # fmt: skip
    assert rc == 2 and "calibrated on h100-sxm-80gb" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------- evaluation on real data
def _online():
    from slimlib.data import load

    try:
        return load("memgap-online")
    except Exception as exc:  # pragma: no cover - data/ is committed
        pytest.skip(f"memgap-online table not available: {exc}")


def test_measured_curves_and_evaluation_on_public_data():
    cur = AE.measured_curves(_online())
    assert cur.groupby(AE.CURVE_KEYS).ngroups == 16
    one = cur[(cur["model"] == "opt-1.3b") & (cur["output_len"] == 260) & (cur["batch_size"] == 1)].iloc[0]
    assert one["efficiency"] == pytest.approx(1.0)
    assert one["measured_e2e_s"] == pytest.approx(one["mean_running_batch"] / one["request_throughput_req_s"])
    cal = AE.calibration_subset(cur, 3)
    assert (cal.groupby(AE.CURVE_KEYS).size() == 3).all() and not cal["preempted"].any()
    slos = AE.slo_table(cur)
    assert set(slos["slo"]) == {"tight", "loose"}
    fits = AE.fit_per_model(cal[cal["model"] == "opt-2.7b"], n_starts=2)
    ev = AE.evaluate_recommendations(cur[cur["model"] == "opt-2.7b"], fits, slos, epsilon=0.3)
    assert len(ev) == 8 and (ev["b_cap"] > 0).all()
    # quality is measured throughput at B_cap over the best constrained measured configuration, or 0 (a miss)
    # when B_cap breaks one of the measured constraints
    for r in ev.itertuples():
        ratio = r.measured_throughput_tok_s / r.true_throughput_tok_s * 100
        assert r.quality_pct == pytest.approx(ratio if r.feasible else 0.0)
    eff = AE.profiling_effort(cur, cal)
    assert 0 < eff["gpu_s_calibration"] < eff["gpu_s_full"] and eff["runs_calibration"] == 48


def test_tensor_parallel_memory_is_per_gpu():
    """On 2 GPUs each holds half the weights and half the KV heads: a larger KV pool and twice the tokens per byte."""
    wl = pd.DataFrame({"model": ["llama-2-13b"] * 2, "input_len": [512.0] * 2, "output_len": [512.0] * 2,
                       "tensor_parallel": [1, 2]})  # fmt: skip
    out = A.advise_many(_model("mi300x"), wl, epsilon=0.05, batch_sizes=np.arange(1, 2049))
    arch, hw = get_architecture("llama-2-13b"), get_gpu("mi300x")
    one, two = out.iloc[0], out.iloc[1]
    assert one["kv_default_gib"] * M.GIB == pytest.approx(serving_config(arch, hw).kv_pool)
    assert (two["kv_default_gib"] - one["kv_default_gib"]) * M.GIB == pytest.approx(2 * arch.n_params / 2)
    per_req_1 = one["kv_default_gib"] / one["max_batch_memory"]
    assert two["max_batch_memory"] >= 2 * two["kv_default_gib"] / per_req_1 - 2
    assert list(out["tensor_parallel"]) == [1, 2]
