"""Every published config.json of the AIConfigurator mirror: read with total and active parameters within
3% of the size its name or model card states, or refused in one line naming the unsupported feature's key."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from shared_paths import RAW, needs

from slimlib.errors import DataError
from slimlib.registry.architectures import Architecture, architecture_from_config, get_architecture
from slimlib.registry.param_table import NOMINAL, parameter_table, stated_size

CONFIGS = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "model_configs"
FILES = sorted(p.name for p in CONFIGS.glob("*_config.json") if not p.name.endswith("_hf_quant_config.json"))
QUANT_FILES = sorted(p.name for p in CONFIGS.glob("*_hf_quant_config.json"))

#: model_type (the wrapper's) -> the key the refusal must name: the feature SLIM cannot represent
REFUSED = {
    "kimi_k3": "'linear_attn_config'",
}
#: families the reader must read (never refuse)
READ = {"llama", "llama4", "qwen3", "qwen3_moe", "qwen3_vl", "qwen3_vl_moe", "deepseek_v3", "kimi_k2", "kimi_k25",
        "gpt_oss", "minimax_m2", "mixtral", "mimo", "step3p7", "qwen3_5", "qwen3_5_moe",
        "deepseek_v32", "glm_moe_dsa", "nemotron_h", "nemotron-nas", "mimo_v2_flash",
        "gemma4", "deepseek_v4", "deepseek_ref", "minimax_m3", "minimax_m3_vl"}  # fmt: skip

pytestmark = needs(CONFIGS, "AIConfigurator model_configs mirror")


def test_the_mirror_has_the_117_files():
    assert len(FILES) == 89 and len(QUANT_FILES) == 28


@pytest.mark.parametrize("fname", FILES)
def test_each_config_is_read_at_its_stated_size_or_refused_by_name(fname):
    path = CONFIGS / fname
    model_type = json.loads(path.read_text())["model_type"]
    model = fname.removesuffix("_config.json").split("--")[-1]
    if model_type in REFUSED:
        with pytest.raises(DataError) as err:
            architecture_from_config(path)
        msg = str(err.value)
        assert fname in msg and "\n" not in msg
        expected = REFUSED[model_type]
        assert any(k in msg for k in ((expected,) if isinstance(expected, str) else expected)), msg
        return
    assert model_type in READ, f"{fname}: model_type {model_type} has no expectation"
    a = architecture_from_config(path)
    total, active, no_embed, source = stated_size(model)
    if model in NOMINAL:
        assert total is None and a.n_params > 0
        return
    assert total or active or model in ("MiniMax-M2.7", "MiniMax-M2.7-NVFP4", "Kimi-K2.6-NVFP4",
                                        "Kimi-K2.7-Code-NVFP4", "Step-3.7-Flash", "Step-3.7-Flash-FP8")  # fmt: skip
    if total:
        assert a.n_params == pytest.approx(total, rel=0.03), source
    if active:
        got = a.active_params - (a.vocab_size * a.hidden_size if no_embed else 0)
        assert got == pytest.approx(active, rel=0.03), source
    if a.is_moe:
        assert (
            a.n_params - a.expert_params + a.expert_params * a.experts_per_token // a.n_experts
            == a.active_params
        )


def test_one_config_is_refused():
    """Of the 89 configs, Kimi-K3 (Kimi delta attention) only."""
    refused = []
    for fname in FILES:
        try:
            architecture_from_config(CONFIGS / fname)
        except DataError:
            refused.append(fname)
    assert len(refused) == 1 and "Kimi-K3" in refused[0], refused


def test_exact_counts_by_hand():
    """DeepSeek-V3 (MLA, 3 dense layers, 58 MoE layers of 256 + 1 shared experts, noaux_tc router bias) and
    gpt-oss-120b (biases everywhere, sinks) from their shapes, written out independently of the block helpers."""
    d, h, v = 7168, 128, 129280
    mla = (d * 1536 + 1536 + 1536 * h * 192) + (d * 576 + 512 + 512 * h * 256) + h * 128 * d
    expert = 3 * d * 2048
    moe = d * 256 + 256 + 256 * expert + expert
    total = 2 * v * d + d + 61 * (mla + 2 * d) + 3 * 3 * d * 18432 + 58 * moe
    a = architecture_from_config(CONFIGS / "deepseek-ai--DeepSeek-V3_config.json")
    assert a.n_params == total and a.expert_params == 58 * 256 * expert
    assert a.n_active_params == total - 58 * 248 * expert
    assert (a.kv_lora_rank, a.qk_rope_head_dim, a.kv_values_per_token_layer) == (512, 64, 576)
    assert (a.n_dense_layers, a.n_moe_layers, a.n_shared_experts, a.quantization) == (3, 58, 1, "fp8")

    d, hd, v = 2880, 64, 201088
    attn = (d * 64 * hd + 64 * hd) + 2 * (d * 8 * hd + 8 * hd) + (64 * hd * d + d) + 64
    expert = (d * 2 * 2880 + 2 * 2880) + (2880 * d + d)
    total = 2 * v * d + d + 36 * (attn + 2 * d + d * 128 + 128 + 128 * expert)
    g = architecture_from_config(CONFIGS / "openai--gpt-oss-120b_config.json")
    assert g.n_params == total and g.attention_sinks and g.quantization == "mxfp4"
    assert (g.sliding_window, g.n_sliding_layers) == (128, 18)


@pytest.mark.parametrize("fname", QUANT_FILES)
def test_hf_quant_config_sets_the_siblings_quantization(fname):
    quant = json.loads((CONFIGS / fname).read_text())["quantization"]["quant_algo"]
    sibling = CONFIGS / fname.replace("_hf_quant_config.json", "_config.json")
    try:
        a = architecture_from_config(sibling)
    except DataError:
        return  # a refused model (the walk above checks the reason)
    if a.is_compressed:  # DeepSeek-V4: fp8 linear layers (its config), NVFP4 experts (MIXED_PRECISION)
        assert quant == "MIXED_PRECISION" and a.quantization == "fp8-nvfp4-experts"
        return
    if a.is_block_sparse:  # MiniMax-M3: MXFP8 layers, NVFP4 routed experts (MIXED_PRECISION)
        assert quant == "MIXED_PRECISION" and a.quantization == "mxfp8-nvfp4-experts"
        return
    assert a.quantization == {"NVFP4": "modelopt_fp4", "FP8": "fp8", "MIXED_PRECISION": "modelopt"}[quant]


def test_families_and_layouts():
    scout = architecture_from_config(CONFIGS / "meta-llama--Llama-4-Scout-17B-16E-Instruct_config.json")
    maverick = architecture_from_config(
        CONFIGS / "meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json"
    )
    assert (scout.n_dense_layers, maverick.n_dense_layers, maverick.ffn_size) == (0, 24, 16384)
    assert (scout.n_shared_experts, scout.shared_ffn_size, scout.sliding_window, scout.n_sliding_layers) == (
        1, 8192, 8192, 36)  # fmt: skip
    q = architecture_from_config(CONFIGS / "Qwen--Qwen3-235B-A22B_config.json")
    assert (q.n_experts, q.experts_per_token, q.moe_ffn_size, q.n_moe_layers) == (128, 8, 1536, 94)
    vl = architecture_from_config(CONFIGS / "Qwen--Qwen3-VL-8B-Instruct_config.json")
    dense = architecture_from_config(CONFIGS / "Qwen--Qwen3-8B_config.json")
    assert vl.n_params == dense.n_params  # the language model only: the vision tower is not counted
    k = architecture_from_config(CONFIGS / "moonshotai--Kimi-K2.5_config.json")
    # compressed-tensors 4-bit integer weights, 16-bit activations, attention and shared experts left out
    assert k.quantization == "w4a16-experts" and k.is_mla and k.n_dense_layers == 1


def test_parameter_table_lists_every_config():
    t = parameter_table(CONFIGS)
    assert len(t) == len(FILES) and set(t["status"]) == {"read", "refused"}
    checked = t.dropna(subset=["total_err_pct"])
    assert (checked["total_err_pct"].abs() <= 3).all() and len(checked) >= 35


def test_identical_content_in_two_folders_is_one_model(tmp_path: Path):
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        text = (CONFIGS / "Qwen--Qwen3-8B_config.json").read_text()
        (tmp_path / folder / "config.json").write_text(text)
    a, b = (architecture_from_config(tmp_path / f) for f in ("a", "b"))
    assert a.name != b.name and a.identity == b.identity
    other = architecture_from_config(CONFIGS / "Qwen--Qwen3-32B_config.json")
    assert other.identity != a.identity


@pytest.mark.parametrize(
    "name, fname",
    [
        ("llama-3.1-8b", "meta-llama--Meta-Llama-3.1-8B_config.json"),
        ("llama-3.1-70b", "meta-llama--Meta-Llama-3.1-70B_config.json"),
        ("qwen3-32b", "Qwen--Qwen3-32B_config.json"),
        ("qwen3-235b-a22b", "Qwen--Qwen3-235B-A22B_config.json"),
        ("qwen3-30b-a3b", "Qwen--Qwen3-30B-A3B_config.json"),
        ("deepseek-v3", "deepseek-ai--DeepSeek-V3_config.json"),
        ("gpt-oss-120b", "openai--gpt-oss-120b_config.json"),
        ("deepseek-v4-flash", "deepseek-ai--DeepSeek-V4-Flash_config.json"),
        ("deepseek-v4-pro", "deepseek-ai--DeepSeek-V4-Pro_config.json"),
        ("qwen3.5-27b", "Qwen--Qwen3.5-27B_config.json"),
        ("qwen3.5-35b-a3b", "Qwen--Qwen3.5-35B-A3B_config.json"),
        ("nemotron-3-nano-30b-a3b", "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-BF16_config.json"),
        ("mixtral-8x7b", "mistralai--Mixtral-8x7B-v0.1_config.json"),
    ],
)
def test_registry_entry_equals_the_mirrored_config(name, fname):
    reg, read = get_architecture(name), architecture_from_config(CONFIGS / fname)
    skip = {"name", "hf_id", "source", "aliases"}
    for f in dataclasses.fields(Architecture):
        if f.name not in skip:
            assert getattr(reg, f.name) == getattr(read, f.name), f.name
    assert reg.identity == read.identity


def test_table_script_prints_read_and_refused_rows():
    script = Path(__file__).resolve().parents[1] / "scripts" / "model_config_table.py"
    env = {**os.environ, "PYTHONPATH": str(script.parents[1])}
    out = subprocess.run([sys.executable, str(script), str(CONFIGS), "--grouped"], capture_output=True, text=True,
                         env=env, check=True).stdout  # fmt: skip
    assert "| DeepSeek-R1 = DeepSeek-V3 = DeepSeek-V3.1-NVFP4 | deepseek_v3 | 671.03 | 37.55 |" in out
    assert "key 'linear_attn_config'" in out and "| nemotron_h |" in out and "| deepseek_v4 |" in out
