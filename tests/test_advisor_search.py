"""SLIM-BCA deployment search: TTFT/TPOT/E2E limits, TP x precision on a node, frontier, launch settings, refusals."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from synthetic import SLIM_TRUE_PARAMS, TRUE_PARAMS, grid, synthesize

from slimlib.advisor import capacity as A
from slimlib.advisor import deploy as D
from slimlib.advisor.launch import launch_settings
from slimlib.advisor.slo import SPLIT_SOURCE, LazyGrid, Slo, percentile_label, serving_grid
from slimlib.cli.main import main
from slimlib.errors import DataError
from slimlib.model import PaperModel, SlimModel
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture

GPU_H100 = "h100-sxm-80gb"
WL = pd.DataFrame({"model": ["llama-2-13b"], "input_len": [512.0], "output_len": [256.0]})


def _model(gpu="h100-sxm-80gb"):
    return PaperModel.with_params(TRUE_PARAMS, gpu=gpu)


def test_split_latencies_add_up_to_e2e():
    g = serving_grid(_model(), WL, np.array([1.0, 8.0, 64.0]))
    assert g["latency_source"][0] == SPLIT_SOURCE
    np.testing.assert_allclose(g["ttft"] + (256 - 1) * g["tpot"], g["e2e"], rtol=1e-12)
    assert (np.diff(g["tpot"][0]) > 0).all()


def test_search_matches_bruteforce_and_ranks_by_throughput_per_gpu():
    m, slo = _model(), Slo(ttft_s=0.5, tpot_s=0.03)
    b = np.arange(1, 129)
    res = D.search(m, WL, 8, slo, 0.3, batch_sizes=b)
    r = res.ranked
    assert list(r["throughput_per_gpu_tok_s"]) == sorted(r["throughput_per_gpu_tok_s"], reverse=True)
    assert set(r["tensor_parallel"]) == {1, 2, 4, 8} and set(r["precision"]) == {"bf16", "fp8"}
    assert (r["replicas"] * r["tensor_parallel"] == 8).all()
    for _, row in r.iterrows():  # brute force over the same predictions
        base = WL.assign(tensor_parallel=row["tensor_parallel"], quantization=D.PRECISIONS[row["precision"]][0] or "",
                         kv_cache_dtype=D.PRECISIONS[row["precision"]][1] or "auto")  # fmt: skip
        g = serving_grid(m, base, b)
        eff = g["throughput"][0] / (b * g["throughput"][0][0])
        ok = (g["ttft"][0] <= 0.5) & (g["tpot"][0] <= 0.03) & (eff > 0.3) & (b <= row["max_batch_memory"])
        best = int(b[ok][np.argmax(g["throughput"][0][ok])]) if ok.any() else 0
        assert row["b_cap"] == best
        assert row["throughput_per_gpu_tok_s"] == pytest.approx(
            g["throughput"][0][best - 1] * row["replicas"] / 8
        )


def test_binding_names_the_limit():
    res = D.search(_model(), WL, 1, Slo(tpot_s=0.012), 0.05, batch_sizes=np.arange(1, 257))
    row = res.ranked.iloc[0]
    assert row["binding"] == "TPOT SLO" and 0 < row["pred_tpot_s"] <= 0.012
    res = D.search(_model(), WL, 1, Slo(), 0.01, batch_sizes=np.arange(1, 9))
    assert res.ranked.iloc[0]["binding"].startswith("max-num-seqs")
    res = D.search(_model(), WL, 1, Slo(), 0.001, batch_sizes=np.arange(1, 1025), precisions=["bf16"])
    assert res.ranked.iloc[0]["binding"].startswith("KV capacity")
    assert res.ranked.iloc[0]["b_cap"] == res.ranked.iloc[0]["max_batch_memory"]


def test_skips_are_listed_with_reasons():
    # llama-2-70b: 64 heads, 8 KV heads; on 3 GPUs no TP splits the heads but 1, whose weights do not fit at bf16
    deps, skipped = D.deployments("llama-2-70b", "h100-sxm-80gb", 3)
    reasons = {(r.tensor_parallel, r.precision): r.reason for r in skipped.itertuples()}
    assert "does not split" in reasons[(3, "bf16")]
    assert reasons[(1, "fp4")].startswith(
        "the checkpoint of llama-2-70b is 16-bit: fp4 weights are served from an fp4 checkpoint"
    )
    assert reasons[(1, "bf16")].startswith("weights do not fit")
    assert [(d.tensor_parallel, d.precision) for d in deps] == [(1, "fp8")]
    deps, skipped = D.deployments("llama-2-13b", "b200-sxm-180gb", 8)
    assert {d.precision for d in deps} == {"bf16", "fp8"} and set(skipped["precision"]) == {"fp4"}


def test_precisions_follow_the_checkpoint_and_the_gpu():
    """A 16-bit checkpoint in 16 bits and fp8 (weight-only without fp8 tensor cores); a quantized one in its own
    method only, labelled as such."""
    deps, skipped = D.deployments("llama-2-13b", "a100-sxm-80gb", 1)
    assert [(d.precision, d.weight_only, d.config.quantization) for d in deps] == [
        ("bf16", False, ""), ("fp8", True, "fp8")]  # fmt: skip
    arch = get_architecture("llama-2-13b")
    mx = dataclasses.replace(arch, name="llama-2-13b-mxfp4", quantization="mxfp4")
    deps, skipped = D.deployments(mx, "b200-sxm-180gb", 1)
    assert [(d.precision, d.weight_only, d.config.quantization) for d in deps] == [("mxfp4", False, "mxfp4")]
    assert set(skipped["precision"]) == {"bf16", "fp8"}
    assert all("quantized as 'mxfp4' (fp4 weights)" in r for r in skipped["reason"])
    nv = dataclasses.replace(arch, name="llama-2-13b-nvfp4", quantization="modelopt_fp4")
    deps, _ = D.deployments(nv, "h100-sxm-80gb", 1)
    assert [(d.precision, d.weight_only, d.config.quantization) for d in deps] == [
        ("fp4", True, "modelopt_fp4")
    ]
    ct = dataclasses.replace(arch, name="llama-2-13b-ct", quantization="compressed-tensors")
    deps, skipped = D.deployments(ct, "h100-sxm-80gb", 1)
    assert not deps and all("does not price" in r for r in skipped["reason"])
    w4 = dataclasses.replace(
        arch, name="llama-2-13b-w4a16", quantization="w4a16"
    )  # int4 weights, 16-bit math
    deps, _ = D.deployments(w4, "b200-sxm-180gb", 1)
    assert [(d.precision, d.weight_only, d.config.quantization) for d in deps] == [("w4a16", True, "w4a16")]
    line = launch_settings(deps[0].config, 8, 512, 128).command("x")
    assert "--quantization compressed-tensors" in line


def test_infeasible_slo_names_the_closest_configuration():
    res = D.search(_model(), WL, 2, Slo(ttft_s=0.001), 0.3, batch_sizes=np.arange(1, 65))
    assert (res.ranked["b_cap"] == 0).all()
    line = D.closest(res)
    assert "closest is TP2 fp8 at B = 1, where the TTFT SLO binds" in line


def test_frontier_is_pareto_optimal():
    res = D.search(_model(), WL, 8, Slo(tpot_s=0.05), 0.3, batch_sizes=np.arange(1, 257))
    f = D.pareto_front(res)
    x, y = f["per_user_tok_s"].to_numpy(), f["throughput_per_gpu_tok_s"].to_numpy()
    assert len(f) > 3 and (np.diff(x) < 0).all() and (np.diff(y) > 0).all()
    # the best-ranked pick is on (or under) the frontier and the frontier's top equals it
    assert y.max() == pytest.approx(res.ranked.iloc[0]["throughput_per_gpu_tok_s"])


def test_frontier_points_carry_their_intervals():
    """With the search's model and a level, every frontier point has the model's own intervals around it: throughput
    per GPU and per user, and the mean TTFT, TPOT and E2E; the points are the ones without."""
    truth = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=GPU_H100)
    runs = synthesize(truth, grid(models=("llama-2-7b", "llama-2-13b"), gpu=GPU_H100), noise=0.05, seed=1)
    m = SlimModel(n_starts=1).fit(runs)  # parameter covariance: intervals of some width
    res = D.search(m, WL, 4, Slo(tpot_s=0.05), 0.3, batch_sizes=np.arange(1, 129))
    plain, f = D.pareto_front(res), D.pareto_front(res, model=m, level=0.9)
    pd.testing.assert_frame_equal(f[plain.columns], plain)
    for point, low, high in (("throughput_per_gpu_tok_s", "throughput_per_gpu_low_tok_s", "throughput_per_gpu_high_tok_s"),
                             ("per_user_tok_s", "per_user_low_tok_s", "per_user_high_tok_s"),
                             ("pred_ttft_s", "pred_ttft_low_s", "pred_ttft_high_s"),
                             ("pred_tpot_s", "pred_tpot_low_s", "pred_tpot_high_s"),
                             ("pred_e2e_s", "pred_e2e_low_s", "pred_e2e_high_s")):  # fmt: skip
        assert (f[low] < f[point] * (1 + 1e-9)).all() and (f[point] < f[high] * (1 + 1e-9)).all(), point
        assert (f[high] > f[low]).all(), point


def test_percentile_refusals_and_label():
    assert percentile_label(0.9) == "p90" and percentile_label(0.99) == "p99"
    with pytest.raises(DataError, match=r"percentile 0.4: the model predicts the 0.5, 0.9, 0.99 percentiles"):
        Slo(e2e_s=1.0, percentile=0.4)
    with pytest.raises(DataError, match="predicts no per-request TTFT percentiles"):
        D.search(_model(), WL, 1, Slo(ttft_s=1.0, percentile=0.9), batch_sizes=[1, 2])
    with pytest.raises(DataError, match="SLO tpot_s = -1"):
        Slo(tpot_s=-1.0)


def test_a_percentile_slo_binds_on_the_served_requests_percentile():
    """The recommended model's per-request P99 TTFT is above its mean: the same limit at P99 allows a smaller cap,
    and the pick's P99 TTFT, not its mean, is within the limit."""
    m = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=GPU_H100)
    wl = WL.assign(chunked_prefill=True, max_num_batched_tokens=2048)
    b = np.arange(1, 129)
    g = serving_grid(m, wl, b)
    limit = float(np.quantile(g["ttft"][0], 0.6))
    p99 = D.search(m, wl, 1, Slo(ttft_s=limit, percentile=0.99), 0.05, batch_sizes=b, precisions=["bf16"])
    mean = D.search(m, wl, 1, Slo(ttft_s=limit), 0.05, batch_sizes=b, precisions=["bf16"])
    r99, r = p99.ranked.iloc[0], mean.ranked.iloc[0]
    assert r99["binding"] == r["binding"] == "TTFT SLO" and 0 < r99["b_cap"] < r["b_cap"]
    at = serving_grid(m, wl, [r99["b_cap"]], Slo(ttft_s=limit, percentile=0.99))
    assert (
        at["ttft"][0, 0]
        <= limit
        < serving_grid(m, wl, [r99["b_cap"] + 1], Slo(ttft_s=limit, percentile=0.99))["ttft"][0, 0]
    )


def test_launch_settings_follow_the_device():
    arch = get_architecture("opt-125m")
    cpu = serving_config(arch, "cpu")
    big, small = (launch_settings(cpu, b, 4096, 4096, cpu_threads=2) for b in (23, 5))
    for s in (big, small):
        assert "--gpu-memory-utilization" not in s.flags and s.env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert int(big.env["VLLM_CPU_KVCACHE_SPACE"]) > int(small.env["VLLM_CPU_KVCACHE_SPACE"])
    assert big.flags[:2] == ["--max-num-seqs", "23"]
    gpu = serving_config(get_architecture("llama-2-13b"), "h100-sxm-80gb", tensor_parallel=2, quantization="fp8",
                         kv_cache_dtype="fp8")  # fmt: skip
    s = launch_settings(gpu, 64, 512, 256)
    f = dict(zip(s.flags[::2], s.flags[1::2], strict=True))
    assert f["-tp"] == "2" and f["--quantization"] == "fp8" and f["--kv-cache-dtype"] == "fp8"
    need = gpu.weights + gpu.reserve + 64 * 48 * 16 * gpu.kv_bytes_per_token
    assert float(f["--gpu-memory-utilization"]) == pytest.approx(np.ceil(need / gpu.capacity * 100) / 100)


@pytest.fixture
def params(tmp_path):
    p = tmp_path / "params.json"
    _model().to_json(p)
    return p


def test_cli_search_text_json_frontier_and_refusals(params, tmp_path, capsys):
    front = tmp_path / "front.csv"
    args = ["advise", str(params), "--model", "llama-2-13b", "--input-len", "512", "--output-len", "256"]
    rc = main([*args, "--ttft-ms", "500", "--tpot-ms", "30", "--gpus", "8", "--frontier", str(front)])
    out = capsys.readouterr().out
    assert rc == 0 and "best: TP1 fp8 x 8 replica(s)" in out and "skipped TP1 fp4" in out
    assert "--quantization fp8 --kv-cache-dtype fp8" in out
    assert len(pd.read_csv(front)) > 3 and front.with_suffix(".png").exists()
    rc = main([*args, "--tpot-ms", "30", "--format", "json"])
    rec = json.loads(capsys.readouterr().out)
    assert (
        rc == 0 and rec["ranked"][0]["tensor_parallel"] == 1 and rec["vllm"]["flags"][0] == "--max-num-seqs"
    )
    rc = main([*args, "--ttft-ms", "1"])
    assert rc == 1 and "closest is TP1 fp8 at B = 1" in capsys.readouterr().out
    rc = main([*args, "--ttft-ms", "100", "--slo-s", "10"])
    assert rc == 2 and "--slo-s belongs to Eq. 13" in capsys.readouterr().err
    rc = main([*args, "--gpus", "8", "--quantization", "fp8"])
    assert rc == 2 and "--quantization belongs to Eq. 13" in capsys.readouterr().err
    with pytest.raises(DataError, match="do not divide --gpus 8"):
        D.deployments("llama-2-13b", "h100-sxm-80gb", 8, tensor_parallels=[3])


def test_each_latency_column_says_which_statistic_it_is(tmp_path, capsys):
    """At --percentile 0.9 the limited TTFT and TPOT are their p90 in the table, the JSON and the frontier CSV;
    the E2E, not limited, stays the mean (and so says the header)."""
    from slimlib.model import SlimModel  # the recommended model: it predicts the percentiles

    p = tmp_path / "slim.json"
    SlimModel.with_params(
        {"eta_c": 0.6, "t_fixed": 0.02, "eta_attn": 0.8, "eta_w": 0.9, "alpha": 1e-6, "t_step": 5e-4,
         "t_layer": 0.0, "t_act": 0.0}, gpu="h100-sxm-80gb",
    ).to_json(p)  # fmt: skip
    front = tmp_path / "front.csv"
    args = ["advise", str(p), "--model", "llama-2-13b", "--input-len", "512", "--output-len", "256",
            "--ttft-ms", "5000", "--tpot-ms", "200", "--percentile", "0.9", "--gpus", "2",
            "--batch-sizes", "8", "32", "128"]  # fmt: skip
    assert main([*args, "--frontier", str(front)]) == 0, capsys.readouterr().err
    header = next(ln for ln in capsys.readouterr().out.splitlines() if ln.lstrip().startswith("rank"))
    assert (
        "TTFT p90 ms" in header and "TPOT p90 ms" in header and "E2E s" in header and "E2E p90" not in header
    )
    cols = [c for c in pd.read_csv(front).columns if c.startswith("pred_")]
    # the points, then the intervals of the mean only (the model's intervals are the means')
    assert cols == ["pred_ttft_p90_s", "pred_tpot_p90_s", "pred_e2e_s", "pred_e2e_low_s", "pred_e2e_high_s"]
    assert main([*args, "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["latency_statistic"] == {"ttft": "p90", "tpot": "p90", "e2e": "mean"}


def test_cli_cpu_engine_gets_kv_space_not_gpu_utilization(tmp_path, capsys):
    p = tmp_path / "cpu.json"
    _model("cpu").to_json(p)
    rc = main(
        [
            "advise",
            str(p),
            "--model",
            "opt-125m",
            "--input-len",
            "512",
            "--output-len",
            "256",
            "--slo-s",
            "60",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "VLLM_CPU_KVCACHE_SPACE=" in out and "--gpu-memory-utilization" not in out
    rc = main(["advise", str(p), "--model", "opt-125m", "--input-len", "512", "--output-len", "256", "--e2e-s", "60",
               "--batch-sizes", "1", "4", "16"])  # fmt: skip
    header = next(ln for ln in capsys.readouterr().out.splitlines() if ln.lstrip().startswith("rank"))
    assert rc == 0 and "tok/s/CPU" in header and "GPU" not in header  # the search on the host's CPU


def test_search_on_one_16_bit_gpu_with_an_e2e_limit_is_eq13():
    """One deployment, an E2E limit: the search's cap is `advise_many`'s (Eq. 13 with the KV constraint)."""
    m, b = _model(), np.arange(1, 513)
    names = {"slo": "E2E SLO", "efficiency": "efficiency floor", "memory": "KV capacity (preemption beyond)"}
    for slo, eps in ((3.0, 0.3), (10.0, 0.3), (60.0, 0.05)):
        row = D.search(m, WL, 1, Slo(e2e_s=slo), eps, batch_sizes=b, precisions=["bf16"]).ranked.iloc[0]
        adv = A.advise_many(m, WL, slo, eps, batch_sizes=b).iloc[0]
        assert row["b_cap"] == adv["b_cap"] > 0
        assert row["binding"] == names.get(adv["binding"], row["binding"])
        assert row["pred_e2e_s"] == pytest.approx(adv["pred_e2e_s"])


def test_cli_json_gives_the_cpu_engine_its_launch_settings(tmp_path, capsys):
    p = tmp_path / "cpu.json"
    _model("cpu").to_json(p)
    rc = main(["advise", str(p), "--model", "opt-125m", "--input-len", "512", "--output-len", "256", "--slo-s", "60",
               "--cpu-threads", "2", "--format", "json"])  # fmt: skip
    rec = json.loads(capsys.readouterr().out)
    assert rc == 0 and rec["launch"]["env"]["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert "--gpu-memory-utilization" not in rec["launch"]["flags"]
    assert rec["launch"]["flags"][:2] == ["--max-num-seqs", str(rec["b_cap"])]


def test_every_deployment_skipped_or_no_request_fits_is_one_line():
    with pytest.raises(DataError, match="no deployment to search: .*TP1 bf16: weights do not fit"):
        D.search(_model(), WL.assign(model="llama-2-70b"), 1, precisions=["bf16"], batch_sizes=[1, 2])
    with pytest.raises(DataError, match=r"unknown precision\(s\) \['int4'\]"):
        D.deployments("llama-2-13b", GPU_H100, 8, ["int4"])
    long = WL.assign(
        input_len=3584.0, output_len=512.0
    )  # 4,096 tokens: 3.1 GiB of KV, more than the pool holds
    res = D.search(_model(), long, 1, Slo(e2e_s=10.0), precisions=["bf16"], gpu_memory_utilization=0.35)
    assert res.ranked.iloc[0]["max_batch_memory"] == 0 and res.ranked.iloc[0]["b_cap"] == 0
    assert D.closest(res).startswith("no deployment fits one request of 4096 tokens in its KV pool")


def test_a_long_frontier_title_is_wrapped_within_the_axes():
    from slimlib.experiments.bca.advisor_figures import TITLE_CHARS, bca_frontier

    front = pd.DataFrame({"tensor_parallel": [1, 2], "precision": ["fp8", "fp8"], "replicas": [8, 4],
                          "batch_size": [64, 32], "throughput_per_gpu_tok_s": [9000.0, 6000.0],
                          "per_user_tok_s": [40.0, 80.0]})  # fmt: skip
    title = "llama-2-7b on 8 x h100-sxm-64gb\nTTFT <= 2000 ms, TPOT <= 60 ms, E2E <= 30 s at p90"
    lines = bca_frontier(front, {}, title).axes[0].get_title().splitlines()
    assert lines[0] == "llama-2-7b on 8 x h100-sxm-64gb" and len(lines) == 3
    assert max(len(ln) for ln in lines) <= TITLE_CHARS


def test_the_launch_line_serves_the_model_asked_about(tmp_path, capsys):
    """An Instruct repository is served as named, not as its base model; a local config as its folder; a registry
    name as the registry's repository."""
    from slimlib.advisor.launch import served_model
    from slimlib.advisor.plan import make_plan

    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert (
        served_model("meta-llama/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-hf")
        == "meta-llama/Llama-2-7b-chat-hf"
    )
    assert served_model(str(folder / "config.json"), "") == str(folder)
    assert served_model(str(folder), "") == str(folder)
    assert served_model("llama-2-7b", "meta-llama/Llama-2-7b-hf") == "meta-llama/Llama-2-7b-hf"
    p = tmp_path / "params.json"
    _model().to_json(p)
    assert main(["advise", str(p), "--model", "meta-llama/Llama-2-7b-chat-hf", "--input-len", "250",
                 "--output-len", "260"]) == 0  # fmt: skip
    assert "vllm serve meta-llama/Llama-2-7b-chat-hf " in capsys.readouterr().out
    plan = make_plan("meta-llama/Llama-2-7b-chat-hf", "h100-sxm-80gb", [250], [130, 520])
    assert set(plan["hf_id"]) == {"meta-llama/Llama-2-7b-chat-hf"} and set(plan["model"]) == {"llama-2-7b"}


def _full(model):
    """`model` with its served latencies predicted over the whole grid at once (no `LazyGrid`)."""
    full = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=model.gpu_)
    full.replays_scheduler = False
    return full


@pytest.mark.parametrize(
    "slo, epsilon, batches",
    [
        (Slo(ttft_s=0.15, tpot_s=0.03), 0.3, np.arange(1, 97)),  # a latency binds
        (Slo(tpot_s=0.02), 0.05, np.arange(2, 97)),  # B = 1 not a candidate
        (Slo(ttft_s=0.4, e2e_s=20.0, percentile=0.9), 0.2, np.arange(1, 97)),
        (Slo(e2e_s=8.0), 0.3, np.arange(1, 97)),  # no TTFT or TPOT limit: predicted at the picks only
        (Slo(ttft_s=0.001), 0.3, np.arange(1, 33)),  # nothing meets it: the closest miss reads the whole grid
        (Slo(ttft_s=0.2), 0.3, np.array([1, 2, 3, 5, 8, 13, 21, 34, 55, 89])),
    ],
)
def test_the_search_predicts_latencies_only_where_needed_with_the_same_answer(slo, epsilon, batches):
    """The search predicts TTFT and TPOT where its answer reads them (`LazyGrid`): its ranking, frontier, closest
    miss and grid are exactly those of the one `predict` over the whole grid, with fewer points predicted."""
    m = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=GPU_H100)
    wl = pd.concat([WL, WL.assign(model="llama-2-7b", input_len=1024.0, output_len=64.0)], ignore_index=True)
    lazy = D.search(m, wl, 4, slo, epsilon, batch_sizes=batches)
    full = D.search(_full(m), wl, 4, slo, epsilon, batch_sizes=batches)
    assert isinstance(lazy.grid, LazyGrid) and not isinstance(full.grid, LazyGrid)
    if (
        lazy.ranked["b_cap"] > 0
    ).all():  # some points never predicted (with none feasible, every one is read)
        assert not lazy.grid._known.all()
    pd.testing.assert_frame_equal(lazy.ranked, full.ranked, check_exact=True)
    for w in (0, 1):
        front = D.pareto_front(lazy, w)
        pd.testing.assert_frame_equal(front, D.pareto_front(full, w), check_exact=True)
        assert "_col" not in front.columns
        if (lazy.ranked.loc[lazy.ranked["workload"] == w, "b_cap"] == 0).all():
            assert D.closest(lazy, w) == D.closest(full, w)
    for q in ("throughput", "e2e", "e2e_mean", "ttft", "tpot", "fits", "efficiency"):
        np.testing.assert_array_equal(lazy.grid[q], full.grid[q])


def test_the_lazy_search_gives_the_whole_grids_warnings():
    """A fit at one batch size warns of the rows at another: the search says it once, counting every row of the grid,
    as the one `predict` over the whole grid does (the probed rows' own count is not shown)."""
    import warnings

    def caught(model):
        model.fit_info_ = {"batch_sizes": [8.0]}
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            D.search(model, WL, 2, Slo(ttft_s=0.2), 0.3, batch_sizes=np.arange(1, 33))
        return [(w.category, str(w.message)) for w in got if "another batch size" in str(w.message)]

    lazy = caught(SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=GPU_H100))
    assert lazy == caught(_full(SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=GPU_H100))) and len(lazy) == 1


def test_the_lazy_search_refuses_what_the_whole_grid_refuses():
    """A token budget below the running sequences of the larger batches: the search refuses it as the one `predict`
    over the whole grid does, naming the budget, though the answer would read only smaller batches."""
    m = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=GPU_H100)
    for model in (m, _full(m)):
        with pytest.raises(DataError, match="max_num_batched_tokens 32 is below the 33 sequences"):
            D.search(
                model, WL, 1, Slo(ttft_s=0.2), 0.3, batch_sizes=np.arange(1, 65), max_num_batched_tokens=32
            )


def test_a_lazy_grid_reads_as_a_mapping_of_every_quantity():
    res = D.search(SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=GPU_H100), WL, 1, Slo(e2e_s=8.0), 0.3,
                   batch_sizes=np.arange(1, 17))  # fmt: skip
    assert isinstance(res.grid, LazyGrid) and res.grid.lazy("ttft")
    assert "ttft" in res.grid and "nope" not in res.grid and res.grid.get("nope") is None
    np.testing.assert_array_equal(res.grid.get("ttft"), res.grid["ttft"])
    assert np.isfinite(res.grid["ttft"]).all()
