"""Bad config.json input: an unknown model_type is read with a warning only when it has nothing the reader
does not understand; structure keys a style does not read, unrepresentable features and SSM models are refused in
one line naming the file and the key; quantization blocks are named as vLLM names them."""

from __future__ import annotations

import dataclasses
import json
import warnings
from pathlib import Path

import pytest

from slimlib.errors import DataError
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import UnknownStyleWarning, architecture_from_config
from slimlib.registry.param_count import (
    attention_params,
    count_decoder,
    ffn_params,
    mla_params,
    router_params,
)

CONFIGS = Path(__file__).resolve().parent / "fixtures" / "configs"


def _write(tmp_path: Path, data: dict, name: str = "config.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def _olmo(**extra) -> dict:
    data = json.loads((CONFIGS / "olmo2-7b.json").read_text())
    data.pop("_name_or_path")
    return {**data, **extra}


@pytest.mark.parametrize(
    "extra, key",
    [
        ({"num_local_experts": 8, "num_experts_per_tok": 2}, "num_local_experts"),
        ({"n_routed_experts": 64}, "n_routed_experts"),
        ({"kv_lora_rank": 512}, "kv_lora_rank"),
        ({"sliding_window": 4096}, "sliding_window"),
        ({"layer_types": ["sliding_attention"] * 32}, "layer_types"),
    ],
)
def test_unknown_model_type_with_a_structure_key_is_refused(tmp_path, extra, key):
    p = _write(tmp_path, _olmo(**extra), "olmo.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # refused, not read with a warning
        with pytest.raises(DataError) as err:
            architecture_from_config(p)
    msg = str(err.value)
    assert "olmo.json" in msg and f"key {key!r}" in msg and "\n" not in msg
    assert "model_type 'olmo2' is not a known style" in msg


@pytest.mark.parametrize(
    "extra, key, feature",
    [
        ({"layer_types": ["linear_attention", "full_attention"] * 16}, "'layer_types'", "linear attention"),
        ({"ssm_state_size": 128}, "'ssm_state_size'", "state-space (Mamba)"),
        ({"mamba_num_heads": 64}, "'mamba_num_heads'", "state-space (Mamba)"),
        ({"mamba_expand": 2}, "'mamba_expand'", "state-space (Mamba)"),
        ({"hybrid_override_pattern": "M-M*-"}, "'hybrid_override_pattern'", "Mamba"),
        ({"index_topk": 2048}, "'index_topk'", "lightning indexer"),
        ({"block_configs": [{}]}, "'block_configs'", "heterogeneous blocks"),
    ],
)
def test_unrepresentable_features_are_refused_in_known_and_unknown_types(tmp_path, extra, key, feature):
    for base in (_olmo(), json.loads((CONFIGS / "llama-3.1-8b.json").read_text())):
        with pytest.raises(DataError) as err:
            architecture_from_config(_write(tmp_path, {**base, **extra}, "m.json"))
        msg = str(err.value)
        assert "m.json" in msg and key in msg and feature in msg and "\n" not in msg


@pytest.mark.parametrize("model_type", ["mamba", "mamba2", "falcon_mamba", "rwkv"])
def test_state_space_model_types_are_refused(tmp_path, model_type):
    data = {"model_type": model_type, "hidden_size": 768, "num_hidden_layers": 24, "vocab_size": 50280}
    with pytest.raises(DataError, match=f"s.json': model_type '{model_type}' is a state-space"):
        architecture_from_config(_write(tmp_path, data, "s.json"))


def test_a_known_style_refuses_a_structure_key_it_does_not_read(tmp_path):
    data = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    with pytest.raises(DataError, match=r"l.json': key 'num_local_experts' \(mixture-of-experts expert count\) is "
                       "not part of a llama-style config"):  # fmt: skip
        architecture_from_config(_write(tmp_path, {**data, "num_local_experts": 8}, "l.json"))
    with pytest.raises(DataError, match="key 'moe_intermediate_size'"):
        architecture_from_config(_write(tmp_path, {**data, "moe_intermediate_size": 512}, "l.json"))


def test_unknown_model_type_with_only_standard_keys_warns_what_was_assumed(tmp_path):
    with pytest.warns(
        UnknownStyleWarning, match=r"o.json.*read as a Llama-style decoder \(gated FFN, RMSNorm"
    ):
        a = architecture_from_config(_write(tmp_path, _olmo(), "o.json"))
    assert a.family == "olmo2" and not a.is_moe and a.n_sliding_layers == 0


def test_errors_name_the_file_and_the_field(tmp_path):
    data = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    cases = [
        ({**data, "quantization_config": {"quant_method": "int3"}}, "key 'quantization_config.quant_method'"),
        ({**data, "quantization_config": {"quant_method": "modelopt", "quant_algo": "W2"}}, "'quantization_config.quant_algo'"),
        ({**data, "num_hidden_layers": -1}, "key 'num_hidden_layers' must be a non-negative integer"),
        ({**data, "layer_types": ["full_attention"]}, "key 'layer_types' must list one type for each of the 32"),
        ({"model_type": "llama4", "text_config": {"model_type": "llama4_text", "hidden_size": 8}}, "text_config: missing key"),
    ]  # fmt: skip
    for config, needle in cases:
        with pytest.raises(DataError) as err:
            architecture_from_config(_write(tmp_path, config, "e.json"))
        assert "e.json" in str(err.value) and needle in str(err.value), str(err.value)


def test_quantization_from_the_config_or_its_hf_quant_config(tmp_path):
    data = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    folder = tmp_path / "m"
    folder.mkdir()
    _write(folder, data)
    assert architecture_from_config(folder).quantization == ""
    _write(
        folder,
        {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4"}},
        "hf_quant_config.json",
    )
    assert architecture_from_config(folder).quantization == "modelopt_fp4"
    _write(folder, {**data, "quantization_config": {"quant_method": "fp8"}})
    with pytest.raises(DataError, match="says 'fp8' but its hf_quant_config.json says 'modelopt_fp4'"):
        architecture_from_config(folder)
    _write(folder, {"quantization": {"quant_algo": "FP8"}}, "hf_quant_config.json")
    assert architecture_from_config(folder).quantization == "fp8"


def test_compressed_tensors_schemes(tmp_path):
    """4-bit integer weights with 16-bit activations are W4A16 (the routed experts only where the attention is left
    out); another scheme stays compressed-tensors, which the serving configuration refuses by name."""
    data = json.loads((CONFIGS / "llama-3.1-8b.json").read_text())
    w4 = {
        "weights": {"num_bits": 4, "type": "int", "group_size": 128, "strategy": "group"},
        "input_activations": None,
    }
    fp8 = {"weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8, "type": "float"}}
    for groups, ignore, want in (({"group_0": w4}, ["lm_head"], "w4a16"),
                                 ({"group_0": w4}, ["lm_head", "re:.*self_attn.*"], "w4a16-experts"),
                                 ({"group_0": fp8}, ["lm_head"], "compressed-tensors")):  # fmt: skip
        qc = {"quant_method": "compressed-tensors", "config_groups": groups, "ignore": ignore}
        assert (
            architecture_from_config(_write(tmp_path, {**data, "quantization_config": qc})).quantization
            == want
        )
    a = architecture_from_config(_write(tmp_path, {**data, "quantization_config": {
        "quant_method": "compressed-tensors", "config_groups": {"group_0": w4}, "ignore": ["lm_head"]}}))  # fmt: skip
    s = serving_config(a, "h100-sxm-80gb")
    assert (s.weight_precision, s.bytes_per_weight) == ("int4", 0.5)
    assert (
        s.dense_weights
        < 0.4 * serving_config(dataclasses.replace(a, quantization=""), "h100-sxm-80gb").weights
    )
    with pytest.raises(DataError, match="compute capability >= 7.5"):
        serving_config(a, "mi300x")
    bad = {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": 4}}}
    with pytest.raises(
        DataError, match=r"e.json': key 'quantization_config.config_groups.g.weights' must be an object"
    ):
        architecture_from_config(_write(tmp_path, {**data, "quantization_config": bad}, "e.json"))


def test_sliding_window_layouts(tmp_path):
    assert (
        architecture_from_config(CONFIGS / "mistral-7b.json").n_sliding_layers == 32
    )  # one window everywhere
    g2 = architecture_from_config(CONFIGS / "gemma-2-9b.json")
    assert (g2.sliding_window, g2.n_sliding_layers) == (4096, 21)  # every other layer
    g3 = architecture_from_config(CONFIGS / "gemma-3-1b.json")
    assert (g3.sliding_window, g3.n_sliding_layers) == (512, 26 - 4)  # all but every 6th
    assert (
        architecture_from_config(CONFIGS / "qwen2-7b.json").n_sliding_layers == 0
    )  # use_sliding_window false
    data = json.loads((CONFIGS / "qwen3-8b.json").read_text())
    data.update(use_sliding_window=True, sliding_window=4096, max_window_layers=28)
    q = architecture_from_config(_write(tmp_path, data))
    assert (q.sliding_window, q.n_sliding_layers) == (4096, 36 - 28)


def test_block_helpers_by_hand():
    # D=4, 2 heads of 2, 1 KV head: q 16 + k 8 + v 8 + o 16 = 48; biases 4+2+2 = 8, o bias 4, q/k norms 4, sinks 2
    assert attention_params(4, 2, 1, 2) == 48
    assert (
        attention_params(4, 2, 1, 2, qkv_bias=True, out_bias=True, qk_norm=4, sinks=True)
        == 48 + 8 + 4 + 4 + 2
    )
    # MLA, D=4, H=2, r_q=3, r_kv=2, d_nope=2, d_rope=1, d_v=2:
    # q 4*3 + 3 + 3*2*3 = 33; kv 4*(2+1) + 2 + 2*2*(2+2) = 30; o 2*2*4 = 16
    assert (
        mla_params(4, 2, q_lora_rank=3, kv_lora_rank=2, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2)
        == 79
    )
    assert mla_params(4, 2, q_lora_rank=0, kv_lora_rank=2, qk_nope_head_dim=2, qk_rope_head_dim=1, v_head_dim=2) == (
        4 * 2 * 3 + 30 + 16)  # fmt: skip
    assert ffn_params(4, 6) == 72 and ffn_params(4, 6, "mlp", bias=True) == 48 + 10
    assert router_params(4, 8) == 32 and router_params(4, 8, bias=True) == 40
    # 2 layers, 1 dense, 1 MoE of 4 experts (top 2) of 10 parameters, router 5, shared 7; V=3, D=4, untied
    c = count_decoder(n_layers=2, hidden_size=4, vocab_size=3, tied_embeddings=False, attention=20, dense_ffn=30,
                      n_dense_layers=1, expert=10, n_experts=4, experts_per_token=2, router=5, shared=7)  # fmt: skip
    assert c.embedding == 24 and c.experts == 40
    assert c.total == 24 + 4 + 2 * (20 + 8) + 30 + (5 + 7 + 40)
    assert c.active == c.total - 2 * 10
