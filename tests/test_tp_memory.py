"""One per-GPU memory rule under tensor parallelism (model, advisor, --gpu-blocks, vllm_settings, plans), checked
against vLLM's own KV-capacity arithmetic, and the breakdown that says why a configuration does not fit.

vLLM (0.5-0.6, ``vllm/worker/worker.py`` ``Worker.determine_num_available_blocks``)::

    num_gpu_blocks = int((total_gpu_memory * gpu_memory_utilization - peak_memory) // cache_block_size)

with ``cache_block_size`` from ``vllm/worker/cache_engine.py`` ``CacheEngine.get_cache_block_size``::

    num_heads = model_config.get_num_kv_heads(parallel_config)   # max(1, total_num_kv_heads // tp)
    key_cache_block = block_size * num_heads * head_size
    total = num_layers * (key_cache_block + value_cache_block)
    return dtype_size * total

``ModelConfig.get_num_kv_heads`` (``vllm/config.py``) returns ``max(1, total_num_kv_heads // tensor_parallel_size)``:
KV heads are replicated when TP exceeds them. ``peak_memory`` is the profiled weights + activations of one GPU:
here its weight share plus the package's activation reserve.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS

from slimlib.advisor import capacity as A
from slimlib.advisor.plan import make_plan
from slimlib.cli.main import main
from slimlib.errors import DataError
from slimlib.model import PaperModel, model_features
from slimlib.model import memory as M
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_from_config, get_architecture
from slimlib.registry.gpus import get_gpu

CONFIGS = Path(__file__).resolve().parent / "fixtures" / "configs"


def _config(arch, gpu, tp, **kw):
    return serving_config(arch, gpu, tensor_parallel=tp, **kw)


def _weights(arch):
    """Bytes of all weights served in 16 bits."""
    return 2 * arch.n_params


def _kv_per_token(arch):
    """KV bytes of one token over all layers in 16 bits: ``2 L D_kv 2``."""
    return 2 * arch.n_layers * arch.d_kv * 2


def _vllm_num_gpu_blocks(arch, gpu, tp, util=0.9, reserve_gib=M.DEFAULT_RESERVE_GIB, block=16, dtype_size=2):
    """vLLM's formula, written out as vLLM writes it (see the module docstring)."""
    num_heads = max(1, arch.n_kv_heads // tp)
    key_cache_block = block * num_heads * arch.head_dim
    cache_block_size = dtype_size * arch.n_layers * (key_cache_block + key_cache_block)
    peak_memory = _weights(arch) / tp + reserve_gib * 2**30
    return int((M.gpu_total_bytes(gpu) * util - peak_memory) // cache_block_size)


@pytest.mark.parametrize(
    "model, gpu, tp",
    [("llama-2-70b", "h100-sxm-80gb", 2), ("llama-2-13b", "h100-sxm-80gb", 2), ("llama-2-70b", "h100-sxm-80gb", 16),
     ("qwen2-7b", "mi300x", 4), ("llama-3-70b", "mi300x", 4)],
)  # fmt: skip
def test_num_gpu_blocks_is_vllms(model, gpu, tp):
    arch, hw = get_architecture(model), get_gpu(gpu)
    mem = _config(arch, hw, tp)
    assert mem.num_gpu_blocks == _vllm_num_gpu_blocks(arch, hw, tp) > 0
    # the model's features (split_features) hold the same per-GPU bytes
    f = model_features(
        pd.DataFrame(
            {
                "model": [model],
                "batch_size": [1],
                "input_len": [1],
                "output_len": [1],
                "tensor_parallel": [tp],
            }
        )
    )
    assert f["kv_bytes_per_token"][0] == mem.kv_bytes_per_token
    assert f["weight_bytes_total"][0] == mem.weights


def test_kv_heads_are_replicated_beyond_tp():
    """Llama-2-70B has 8 KV heads: at TP 16 each GPU holds one, not half of one; Gemma-3-1B (1 KV head) holds it
    whole on every GPU; a size vLLM refuses is a clear error."""
    arch = get_architecture("llama-2-70b")
    at8, at16 = _config(arch, "h100", 8), _config(arch, "h100", 16)
    assert at8.kv_bytes_per_token == _kv_per_token(arch) / 8
    assert at16.kv_bytes_per_token == at8.kv_bytes_per_token  # replicated: one head per GPU either way
    assert at16.num_gpu_blocks == _vllm_num_gpu_blocks(arch, get_gpu("h100"), 16)
    gemma = architecture_from_config(CONFIGS / "gemma-3-1b.json")
    assert _config(gemma, "h100", 4).kv_bytes_per_token == _kv_per_token(gemma)
    with pytest.raises(
        DataError,
        match=r"tensor_parallel = 8 does not split qwen2-7b as vLLM requires \(its 28 attention heads",
    ):
        _config(get_architecture("qwen2-7b"), "mi300x", 8)


def _params(tmp_path, gpu):
    p = tmp_path / "params.json"
    p.write_text(PaperModel.with_params(TRUE_PARAMS, gpu=gpu).to_json())
    return p


def test_cli_gpu_blocks_counts_per_gpu_blocks(tmp_path, capsys):
    """`--gpu-blocks N` is vLLM's num_gpu_blocks of one GPU: at TP 2 the capacity is N // blocks per request, not
    twice that (the old arithmetic multiplied by the whole model's KV bytes)."""
    params = _params(tmp_path, "h100-sxm-80gb")
    rc = main(["advise", str(params), "--model", "llama-2-13b", "--input-len", "1000", "--output-len", "1000",
               "--tensor-parallel", "2", "--gpu-blocks", "9800", "--max-batch", "1024", "--format", "json"])  # fmt: skip
    rec = json.loads(capsys.readouterr().out)
    blocks_per_req = int(np.ceil(2000 / 16))
    assert rc == 0 and rec["max_batch_memory"] == 9800 // blocks_per_req == 78
    assert rec["b_cap"] <= 78


def test_vllm_settings_under_tensor_parallelism():
    """Llama-2-70B on 4 x MI300X: each GPU holds a quarter of the weights and of the KV cache, so the
    utilization that holds B_cap is about 0.2, not the 0.75 of a single-GPU calculation."""
    arch, hw = get_architecture("llama-2-70b"), get_gpu("mi300x")
    s = A.vllm_settings(arch, hw, 64, 512, 512, tensor_parallel=4)
    mem = _config(arch, hw, 4)
    blocks = 64 * 64
    need = _weights(arch) / 4 + 1.5 * 2**30 + blocks * 16 * _kv_per_token(arch) / 4
    assert mem.kv_bytes_per_token == _kv_per_token(arch) / 4
    assert s["gpu_memory_utilization"] == pytest.approx(np.ceil(need / M.gpu_total_bytes(hw) * 100) / 100)
    assert 0.15 < s["gpu_memory_utilization"] < 0.25
    assert s["tensor_parallel_size"] == 4 and s["num_gpu_blocks_override"] == blocks and s["fits"]
    single = A.vllm_settings(arch, hw, 64, 512, 512)
    assert single["gpu_memory_utilization"] > 0.7  # the same batch on one GPU


def test_plan_capacity_uses_the_per_gpu_rule():
    """Plans cap batch sizes with the same per-GPU rule (KV heads replicated at TP 16 for Llama-2-70B)."""
    arch = get_architecture("llama-2-70b")
    mem = _config(arch, "h100", 16)
    per_req = np.ceil((2048 + 2048) / 16) * 16 * mem.kv_bytes_per_token
    cap = int(mem.kv_pool // per_req)
    lens = ([2048], [512, 1024, 2048])
    plan = make_plan("llama-2-70b", "h100", *lens, batch_sizes=[1, 2, cap], tensor_parallel=16)
    assert list(plan["batch_size"].unique()) == [1, 2, cap]
    with pytest.raises(DataError, match=f"exceed the {cap} requests"):
        make_plan("llama-2-70b", "h100", *lens, batch_sizes=[1, 2, cap + 1], tensor_parallel=16)
    with pytest.raises(DataError, match="does not split qwen2-7b as vLLM requires"):
        make_plan("qwen2-7b", "mi300x", *lens, tensor_parallel=8)


def test_breakdown_says_why_70b_does_not_fit_one_h200():
    """Llama-3-70B (the shapes of Llama-3.1-70B) in BF16: 141 GB of weights on one 141 GB H200 leave no KV pool."""
    mem = _config(get_architecture("llama-3-70b"), "h200", 1)
    assert mem.weights == _weights(get_architecture("llama-3-70b"))
    assert 140e9 < mem.weights < 142e9
    assert mem.kv_pool < 0 and not mem.fits and mem.num_gpu_blocks == 0
    text = mem.explain()
    assert "weights 131.4 GiB" in text and "KV pool -" in text and "tensor parallel" in text
    two = _config(get_architecture("llama-3-70b"), "h200", 2)
    assert two.fits and two.kv_pool == pytest.approx(mem.usable - mem.weights / 2 - mem.reserve)
    fp8 = _config(get_architecture("llama-3-70b"), "h200", 1, quantization="fp8")
    assert fp8.fits  # fp8 weights: about 71 GB


def test_advisor_says_why_one_request_does_not_fit():
    model = PaperModel.with_params(TRUE_PARAMS, gpu="h200-sxm-141gb")
    bf16 = A.advise(model, "llama-3-70b", 1024, 1024)
    assert bf16.b_cap == 0
    assert (
        "KV pool -6.02 GiB per GPU after 131.4 GiB of weights; one request needs 0.62 GiB"
        in bf16.summary["reason"]
    )
    assert A.advise(model, "llama-3-70b", 1024, 1024, tensor_parallel=2).b_cap > 0
    assert A.advise(model, "llama-3-70b", 1024, 1024, quantization="fp8").summary["max_batch_memory"] > 0
