"""The timing harness on tiny CPU architectures (needs the profiling extra: torch)."""

import json

import numpy as np
import pytest
from optional import requires

from slimlib.errors import DataError
from slimlib.kit.harness import ENGINE, kv_cache_bytes, main, profile_step_positions, run_point
from slimlib.registry.architectures import Architecture

pytestmark = requires("torch", "the profiling extra (torch) is not installed")


def tiny(ffn_kind="gated", n_heads=4, n_kv_heads=2, n_layers=2):
    return Architecture(name=f"tiny-{ffn_kind}-{n_kv_heads}kv", hf_id="", n_layers=n_layers, hidden_size=32,
                        n_heads=n_heads, n_kv_heads=n_kv_heads, head_dim=8, ffn_size=48, ffn_kind=ffn_kind,
                        vocab_size=64, n_params=0)  # fmt: skip


@pytest.mark.parametrize("ffn_kind,n_kv_heads", [("gated", 2), ("gated", 1), ("mlp", 4)])
def test_run_point_times_and_memory(ffn_kind, n_kv_heads):
    arch = tiny(ffn_kind, n_kv_heads=n_kv_heads)
    b, il, ol = 3, 6, 5
    r = run_point(arch, b, il, ol, device="cpu")
    assert r.prefill_s > 0 and r.decode_s > 0 and len(r.step_s) == ol and min(r.step_s) > 0
    assert r.decode_s == pytest.approx(sum(r.step_s))
    assert (
        r.kv_cache_bytes == kv_cache_bytes(arch, b, il, ol, 4) == 2 * 2 * b * (il + ol) * n_kv_heads * 8 * 4
    )
    d, f, v = 32, 48, 64
    per_layer_ffn = 3 * d * f if ffn_kind == "gated" else 2 * d * f + f + d
    attn = d * 4 * 8 + 2 * d * n_kv_heads * 8 + 4 * 8 * d
    if ffn_kind == "mlp":
        attn += 4 * 8 + 2 * n_kv_heads * 8 + d  # biases of q (4 heads x 8), k, v and o
    norms = 2 * (2 * d if ffn_kind == "mlp" else d)
    final_norm = 2 * d if ffn_kind == "mlp" else d
    assert r.weight_bytes == 4 * (v * d + 2 * (attn + per_layer_ffn + norms) + final_norm)
    row = r.to_row()
    assert row["engine"] == ENGINE and "not vLLM" in row["engine"]
    assert row["throughput_tok_s"] == pytest.approx(b * (il + ol) / (r.prefill_s + r.decode_s))
    assert row["step_min_ms"] <= row["step_median_ms"] <= row["step_max_ms"]
    assert np.isnan(row["peak_allocated_bytes"])  # not measurable on the CPU
    assert row["cuda_graphs"] is False and row["dtype"] == "fp32"


def test_engine_cache_matches_formula_and_gqa_matches_repeated_heads():
    import torch

    from slimlib.kit import engine

    arch = tiny("gated", n_heads=4, n_kv_heads=2)
    eng = engine.Engine(arch, 2, 5, 3, "cpu", torch.float32, seed=1)
    assert eng.kv_cache_nbytes == kv_cache_bytes(arch, 2, 5, 3, 4)
    eng.prefill()
    eng.step(0)
    # attention over the cache equals attention with K/V heads repeated (the GQA definition)
    layer = eng.model.layers[0]
    q = torch.randn(2, 4, 1, 8)
    keys, values = eng.k_caches[0][:, :, :6], eng.v_caches[0][:, :, :6]
    assert keys.abs().sum() > 0  # prefill and step 0 wrote positions 0..5
    ref = torch.nn.functional.scaled_dot_product_attention(
        q, keys.repeat_interleave(2, dim=1), values.repeat_interleave(2, dim=1)
    )
    got = torch.nn.functional.scaled_dot_product_attention(q, keys, values, enable_gqa=True)
    torch.testing.assert_close(got, ref)
    assert layer.hkv == 2 and eng.tokens.shape == (2, 1)
    assert int(eng.tokens.max()) < arch.vocab_size


def test_same_seed_same_tokens():
    import torch

    arch = tiny()
    from slimlib.kit import engine

    runs = []
    for _ in range(2):
        eng = engine.Engine(arch, 2, 4, 3, "cpu", torch.float32, seed=7)
        eng.prefill()
        toks = [eng.tokens.clone()]
        for t in range(3):
            eng.step(t)
            toks.append(eng.tokens.clone())
        runs.append(torch.cat(toks, dim=1))
    assert torch.equal(runs[0], runs[1])


def test_kernel_profile_on_cpu():
    r = run_point(tiny(), 2, 8, 6, device="cpu", kernel_profile_steps=3)
    k = r.kernels
    assert list(k.columns) == ["name", "duration_us", "count", "device_type"]
    assert (k["duration_us"] > 0).all() and (k["device_type"] == "CPU").all()
    assert k.attrs["profiled_steps"] == [0, 2, 5]
    assert any("scaled_dot_product" in n for n in k["name"])
    assert "aten::mm" in set(k["name"]) or "aten::addmm" in set(k["name"])


def test_profile_positions_and_bad_inputs():
    assert profile_step_positions(10, 4) == [0, 3, 6, 9]
    assert profile_step_positions(2, 8) == [0, 1]
    with pytest.raises(DataError, match="batch_size"):
        run_point(tiny(), 0, 4, 4)
    with pytest.raises(DataError, match="dtype"):
        run_point(tiny(), 1, 4, 4, dtype="fp8")
    with pytest.raises(DataError, match="lacks field"):
        run_point(object(), 1, 4, 4)


def test_module_entry_point_prints_json(tmp_path, capsys):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"model_type": "llama", "hidden_size": 32, "num_hidden_layers": 1,
                               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 48,
                               "vocab_size": 64}))  # fmt: skip
    assert main(["--model", str(cfg), "--batch-size", "2", "--input-len", "4", "--output-len", "3",
                 "--device", "cpu", "--nvtx-steps", "1:1"]) == 0  # fmt: skip
    row = json.loads(capsys.readouterr().out)
    assert row["batch_size"] == 2 and row["output_len"] == 3 and row["decode_s"] > 0
