"""The one resolved serving configuration (`slimlib.model.serving`): per-GPU weight and KV bytes (MHA, GQA with
vLLM's KV-head replication, MLA's latent, sliding-window layers, MoE with expert parallelism) against hand
arithmetic, vLLM's ``num_gpu_blocks`` arithmetic, logged blocks, fp8 weights and KV, refusals, and the precision
bugs once found (fp8 70B rows on one H200 through `slim fit`/`predict`/`advise`; fp8 KV rows and preemption)."""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

from slimlib.cli.main import main
from slimlib.errors import DataError, UnknownNameError
from slimlib.model import PaperModel, model_features
from slimlib.model import features as F
from slimlib.model.memory import gpu_total_bytes
from slimlib.model.serving import serving_config
from slimlib.model.validity import PreemptionWarning, check_table
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import GIB, get_gpu

H200 = "h200-sxm-141gb"


# ------------------------------------------------------------------------------------------ bytes by attention kind
def test_mha_bytes():
    a = get_architecture("opt-1.3b")  # MHA: 24 layers, D_kv = D = 2048, fp16
    s = serving_config(a, "h100")
    assert s.kv_bytes_per_token == 2 * 24 * 2048 * 2
    assert s.weights == 2 * a.n_params and s.expert_weights == 0
    assert s.linear_flops_per_token == 24 * (
        4 * 2048**2 + 4 * 2048 * 2048 + 2 * 2 * 2048 * 8192
    )  # Eq. 8 bracket


def test_gqa_bytes_with_kv_head_replication():
    a = get_architecture("llama-2-70b")  # 8 KV heads of width 128
    for tp, heads in ((1, 8), (2, 4), (4, 2), (8, 1), (16, 1)):  # max(1, 8 // p) heads per GPU
        s = serving_config(a, "h100", tensor_parallel=tp)
        assert s.kv_bytes_per_token == 80 * 2 * heads * 128 * 2, tp
        assert s.weights == 2 * a.n_params / tp


def _mla():
    """DeepSeek-V3's attention shapes on a hand-built architecture: 61 layers, latent 512 + RoPE 64."""
    base = get_architecture("llama-3-8b")
    return replace(base, name="mla-test", n_layers=61, n_heads=128, n_kv_heads=128, head_dim=128,
                   kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128)  # fmt: skip


def test_mla_caches_the_latent_whole_on_every_rank():
    a = _mla()
    one = serving_config(a, H200)
    assert one.kv_bytes_per_token == 61 * (512 + 64) * 2 == 70272  # the "70 KB"
    assert serving_config(a, H200, tensor_parallel=8).kv_bytes_per_token == one.kv_bytes_per_token
    assert serving_config(a, H200, kv_cache_dtype="fp8").kv_bytes_per_token == 61 * 576
    df = pd.DataFrame({"model": [a.name], "gpu": H200, "batch_size": 1, "input_len": 10, "output_len": 10,
                       "tensor_parallel": [8]})  # fmt: skip
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(F, "get_architecture", lambda name: a)
        f = model_features(df)
    assert f["attn_bytes_per_context_token"][0] == 70272  # not divided by p
    assert f["n_layers"][0] == 61 / 8


def _swa():
    """Half of OPT-1.3B's 24 layers attend to a 128-token window (gpt-oss-style alternation)."""
    return replace(get_architecture("opt-1.3b"), name="swa-test", sliding_window=128, n_sliding_layers=12)


def test_sliding_window_layers_hold_at_most_their_window():
    s = serving_config(_swa(), "h100")
    per_layer = 2 * 2048 * 2
    assert s.kv_bytes_full == s.kv_bytes_window == 12 * per_layer
    assert s.kv_bytes(1000) == 1000 * 12 * per_layer + 128 * 12 * per_layer
    assert s.kv_bytes(100) == 100 * 24 * per_layer  # inside the window: every layer holds every token
    assert s.effective_kv_bytes_per_token(1000) == pytest.approx(12 * per_layer * (1 + 128 / 1000))
    assert s.request_blocks(1000) == math.ceil((1000 + 128) / 2 / 16)
    full = serving_config(replace(_swa(), sliding_window=0, n_sliding_layers=0), "h100")
    cap = s.kv_token_capacity(1000)
    assert cap > full.kv_token_capacity(1000)  # the window frees memory for longer contexts
    assert cap == pytest.approx(s.kv_pool / s.effective_kv_bytes_per_token(1000))


def _moe(x=6):
    """Mixtral-8x7B's shapes with `x` experts, 2 per token."""
    return replace(
        get_architecture("mixtral-8x7b"), name=f"moe{x}", n_experts=x, expert_params=32 * x * 3 * 4096 * 14336
    )


def test_moe_expert_parallel_places_whole_experts():
    a = _moe(6)
    experts = 32 * 6 * 3 * 4096 * 14336  # n_moe_layers X m D F
    dense = 2 * (a.n_params - experts)
    tp4 = serving_config(a, "h100", tensor_parallel=4)
    assert tp4.expert_weights == 2 * experts / 4 and tp4.dense_weights == dense / 4
    assert tp4.n_experts_per_gpu == 6
    ep4 = serving_config(a, "h100", tensor_parallel=4, expert_parallel=4)
    assert ep4.n_experts_per_gpu == 2  # ceil(6 / 4) whole experts on the fullest GPU
    assert ep4.expert_weights == 2 * experts * 2 / 6 and ep4.dense_weights == dense / 4
    df = pd.DataFrame({"model": ["mixtral-8x7b"] * 2, "gpu": "h100", "batch_size": 1, "input_len": 8,
                       "output_len": 8, "tensor_parallel": 4, "expert_parallel": [1, 4]})  # fmt: skip
    f = model_features(df)
    assert list(f["n_experts_per_gpu"]) == [8, 2] and list(f["expert_parallel"]) == [1, 4]
    assert list(f["n_moe_layers"]) == [8, 8]  # 32 layers, per rank of 4


# ------------------------------------------------------------------------------------------ vLLM's block arithmetic
def _vllm_num_gpu_blocks(arch, gpu, tp, util=0.9, reserve_gib=1.5, block=16, dtype_size=2):
    """vLLM 0.5/0.6 ``Worker.determine_num_available_blocks`` with ``CacheEngine.get_cache_block_size``."""
    num_heads = max(1, arch.n_kv_heads // tp)
    cache_block_size = dtype_size * arch.n_layers * 2 * block * num_heads * arch.head_dim
    peak_memory = 2 * arch.n_params / tp + reserve_gib * 2**30
    return int((gpu_total_bytes(gpu) * util - peak_memory) // cache_block_size)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_num_gpu_blocks_is_vllms(tp):
    a, hw = get_architecture("llama-2-13b"), get_gpu("h100")
    s = serving_config(a, hw, tensor_parallel=tp)
    assert s.num_gpu_blocks == _vllm_num_gpu_blocks(a, hw, tp) > 0
    assert s.kv_tokens == 16 * s.num_gpu_blocks
    low = serving_config(a, hw, tensor_parallel=tp, gpu_memory_utilization=0.5, block_size=32)
    assert low.num_gpu_blocks == _vllm_num_gpu_blocks(a, hw, tp, util=0.5, block=32)


def test_logged_blocks_set_the_capacity():
    s = serving_config(get_architecture("llama-3-8b"), "h100", gpu_blocks=1000, block_size=16)
    assert s.num_gpu_blocks == 1000 and s.kv_tokens == 16000
    assert s.kv_pool == 1000 * 16 * s.kv_bytes_per_token
    assert s.kv_token_capacity(5000) == 16000
    df = pd.DataFrame({"model": "llama-3-8b", "gpu": "h100", "batch_size": [1, 1], "input_len": 100,
                       "output_len": 100, "gpu_blocks": [1000, np.nan]})  # fmt: skip
    f = model_features(df)
    assert f["kv_token_capacity"][0] == 16000
    assert f["kv_token_capacity"][1] == pytest.approx(serving_config(get_architecture("llama-3-8b"), "h100").kv_pool
                                                      / f["kv_bytes_per_token"][1])  # fmt: skip


def test_gpu_memory_utilization_column_sets_the_model_capacity():
    df = pd.DataFrame({"model": "llama-3-8b", "gpu": "h100", "batch_size": [1, 1], "input_len": 100,
                       "output_len": 100, "gpu_memory_utilization": [0.9, 0.5]})  # fmt: skip
    f = model_features(df)
    kv = f["kv_bytes_per_token"][0]
    total = gpu_total_bytes(get_gpu("h100"))
    np.testing.assert_allclose(f["kv_token_capacity"][0] - f["kv_token_capacity"][1], total * 0.4 / kv)


def test_one_config_per_distinct_row(monkeypatch):
    calls = []
    real = F.serving_config
    monkeypatch.setattr(F, "serving_config", lambda *a, **k: calls.append(1) or real(*a, **k))
    df = grid(models=("opt-125m", "opt-1.3b"), batch=(1, 4, 16))
    df = pd.concat([df.assign(kv_cache_dtype="fp8"), df], ignore_index=True)
    model_features(df)
    assert len(calls) == 4  # 2 models x 2 KV dtypes, for 48 rows


# ------------------------------------------------------------------------------------------ precision
def test_fp8_weights_and_kv():
    a = get_architecture("llama-3-70b")
    bf16 = serving_config(a, H200)
    assert not bf16.fits and bf16.num_gpu_blocks == 0
    fp8 = serving_config(a, H200, quantization="fp8")
    emb = a.embedding_params
    assert fp8.weights == 2 * emb + (a.n_params - emb) and fp8.fits
    kv8 = serving_config(a, H200, quantization="fp8", kv_cache_dtype="fp8")
    assert kv8.kv_bytes_per_token == fp8.kv_bytes_per_token / 2
    assert kv8.num_gpu_blocks in (2 * fp8.num_gpu_blocks, 2 * fp8.num_gpu_blocks + 1)


def test_explain_shows_the_arithmetic_in_gib():
    s = serving_config(get_architecture("llama-3-70b"), H200, quantization="fp8")
    text = s.explain()
    assert f"{gpu_total_bytes(get_gpu(H200)) / GIB:.1f} GiB x 0.9" in text
    assert f"weights {s.weights / GIB:.1f} GiB" in text and f"KV pool {s.kv_pool / GIB:.2f} GiB" in text
    assert f"{s.num_gpu_blocks} blocks of 16" in text


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"tensor_parallel": 8}, r"does not split qwen2-7b as vLLM requires \(its 28 attention heads"),
        ({"quantization": "int3"}, r"unknown quantization 'int3': vLLM accepts none, fp8, fp4"),
        ({"kv_cache_dtype": "fp4"}, r"unknown kv_cache_dtype 'fp4': vLLM accepts auto, fp8"),
        ({"dtype": "float8"}, r"unknown dtype 'float8': vLLM accepts auto, float16"),
        ({"expert_parallel": 2, "tensor_parallel": 2}, r"expert_parallel = 2 but qwen2-7b has no experts"),
        ({"gpu_memory_utilization": 1.5}, r"gpu_memory_utilization = 1.5 must be in \(0, 1\]"),
        ({"block_size": 7.5}, r"block_size = 7.5 must be a whole number"),
    ],
)
def test_refusals(kwargs, message):
    with pytest.raises((DataError, UnknownNameError), match=message):
        serving_config(get_architecture("qwen2-7b"), "h100", **kwargs)


def test_refusals_of_quantization():
    with pytest.raises(DataError, match=r"quantization 'fp8' \(fp8 weights\) on mi250: vLLM runs fp8"):
        serving_config(get_architecture("llama-3-8b"), "mi250", quantization="fp8")
    assert serving_config(
        get_architecture("llama-3-8b"), "a100", quantization="fp8"
    ).fits  # Marlin, weight-only
    with pytest.raises(DataError, match=r"expert_parallel = 2 with tensor_parallel = 4"):
        serving_config(_moe(8), "h100", tensor_parallel=4, expert_parallel=2)
    own = replace(get_architecture("llama-3-8b"), quantization="fp8")
    assert serving_config(own, "h100").weight_precision == "fp8"  # the checkpoint's own method
    with pytest.raises(DataError, match=r"checkpoint of llama-3-8b is quantized as 'fp8'"):
        serving_config(own, "h100", quantization="nvfp4")
    with pytest.raises(DataError, match=r"\(2 bytes per weight\) does not fit on h200-sxm-141gb"):
        serving_config(get_architecture("llama-3-70b"), H200).check_fits()


# ------------------------------------------------------------------------------------------ the CLI, the bugs it had
def _fp8_70b(tmp_path, **cols):
    df = grid(
        models=("llama-3-70b",), gpu=H200, batch=(1, 4, 16, 32), input_len=(128, 512), output_len=(64, 256)
    )
    df["quantization"] = "fp8"
    for k, v in cols.items():
        df[k] = v
    return df


def test_fp8_70b_on_one_h200_is_accepted_by_fit_predict_advise(tmp_path, capsys):
    true = PaperModel.with_params(TRUE_PARAMS, gpu=H200)
    runs = tmp_path / "runs.csv"
    synthesize(true, _fp8_70b(tmp_path)).to_csv(runs, index=False)
    params = tmp_path / "params.json"
    assert main(["fit", str(runs), "--out", str(params)]) == 0
    rows = tmp_path / "rows.csv"
    _fp8_70b(tmp_path).to_csv(rows, index=False)
    out = tmp_path / "pred.csv"
    assert main(["predict", str(params), str(rows), "--out", str(out)]) == 0
    assert len(pd.read_csv(out)) == 16
    capsys.readouterr()
    assert main(["advise", str(params), "--model", "llama-3-70b", "--input-len", "512", "--output-len", "256",
                 "--quantization", "fp8", "--format", "json"]) == 0  # fmt: skip
    rec = json.loads(capsys.readouterr().out)
    assert rec["b_cap"] > 0 and rec["max_batch_memory"] > 0
    # the same rows in 16 bits do not fit: one clear line with the arithmetic
    synthesize(true, _fp8_70b(tmp_path)).assign(quantization="").to_csv(runs, index=False)
    assert main(["fit", str(runs), "--out", str(tmp_path / "p2.json")]) != 0
    assert "(2 bytes per weight) does not fit on h200-sxm-141gb" in capsys.readouterr().err


def test_fp8_kv_rows_get_no_false_preemption_warning():
    """Llama-3-8B on one H100, 128 requests of 4096 tokens: 64 GiB of 16-bit KV exceeds the pool, 32 GiB of fp8
    KV does not."""
    df = pd.DataFrame({"model": ["llama-3-8b"], "gpu": "h100", "batch_size": [128], "input_len": [2048],
                       "output_len": [2048]})  # fmt: skip
    with pytest.warns(PreemptionWarning):
        check_table(df)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_table(df.assign(kv_cache_dtype="fp8"))


def test_gpu_memory_utilization_of_advise_reaches_the_model(tmp_path, capsys):
    """`slim advise --gpu-memory-utilization` moves the memory constraint: lower utilization, fewer requests."""
    params = tmp_path / "params.json"
    params.write_text(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json())
    caps = []
    for util in ("0.9", "0.5"):
        assert main(["advise", str(params), "--model", "llama-3-8b", "--input-len", "2048", "--output-len", "2048",
                     "--gpu-memory-utilization", util, "--format", "json", "--slo-s", "1e9",
                     "--epsilon", "0.001"]) == 0  # fmt: skip
        caps.append(json.loads(capsys.readouterr().out)["max_batch_memory"])
    s9 = serving_config(get_architecture("llama-3-8b"), "h100")
    s5 = serving_config(get_architecture("llama-3-8b"), "h100", gpu_memory_utilization=0.5)
    assert caps == [s9.num_gpu_blocks // 256, s5.num_gpu_blocks // 256]


def test_advisor_passes_its_engine_settings_to_the_model(monkeypatch):
    """The model's predictions see the advisor's gpu_memory_utilization, block_size and logged blocks: the KV
    token capacity its features give is the one the memory constraint uses."""
    from slimlib.advisor import capacity as A

    model = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    seen = []
    real = model.predict_grid
    monkeypatch.setattr(model, "predict_grid", lambda base, b: seen.append(base) or real(base, b))
    wl = pd.DataFrame({"model": ["llama-3-8b"], "input_len": [1000.0], "output_len": [1000.0]})
    A.advise_many(model, wl, gpu_memory_utilization=0.5, batch_sizes=[1, 2])
    A.advise_many(model, wl, gpu_blocks=500, batch_sizes=[1, 2])
    caps = [model_features(base.assign(batch_size=1.0), gpu="h100")["kv_token_capacity"][0] for base in seen]
    half = serving_config(get_architecture("llama-3-8b"), "h100", gpu_memory_utilization=0.5)
    assert caps[0] == pytest.approx(half.kv_pool / half.kv_bytes_per_token) and caps[1] == 500 * 16


def test_engine_columns_are_checked_and_part_of_a_configuration(tmp_path, capsys):
    rows = tmp_path / "rows.csv"
    rows.write_text("model,gpu,batch_size,input_len,output_len,gpu_memory_utilization\n"
                    "llama-3-8b,h100,8,100,100,0.9\nllama-3-8b,h100,8,100,100,lots\n")  # fmt: skip
    params = tmp_path / "params.json"
    params.write_text(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json())
    assert main(["predict", str(params), str(rows)]) != 0
    assert (
        "rows.csv line 3: field 'gpu_memory_utilization' is 'lots', not a number" in capsys.readouterr().err
    )
    # two runs of one workload at two utilizations are two configurations, not conflicting duplicates
    runs = tmp_path / "runs.csv"
    df = synthesize(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb"), grid(models=("opt-1.3b",)))
    pd.concat([df.assign(gpu_memory_utilization=0.9),
               df.assign(gpu_memory_utilization=0.8, throughput_tok_s=df["throughput_tok_s"] * 0.99)]
              ).to_csv(runs, index=False)  # fmt: skip
    assert main(["fit", str(runs), "--out", str(tmp_path / "fit.json")]) == 0
