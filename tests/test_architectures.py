"""Architecture registry, parameter counts, config.json parsing (one fixture per style) and `slim models`.

Fixtures in tests/fixtures/configs/ are hand-written copies of real Hugging Face config.json files:
facebook/opt-125m, facebook/opt-350m, meta-llama/Llama-2-7b-hf, mistralai/Mistral-7B-v0.1, Qwen/Qwen2-7B,
EleutherAI/gpt-j-6b, bigscience/bloom-560m, tiiuae/falcon-7b, tiiuae/falcon-40b, and (written from the public config
format, field names as published) Qwen/Qwen3-8B, Qwen/Qwen3-0.6B, meta-llama/Llama-3.1-8B, google/gemma-7b,
google/gemma-2-9b, google/gemma-3-1b-it, microsoft/Phi-3-mini-4k-instruct, microsoft/phi-2, allenai/OLMo-2-1124-7B.
"""

from __future__ import annotations

import dataclasses
import io
import json
import shutil
from math import prod
from pathlib import Path

import pandas as pd
import pytest

from slimlib.cli.main import main
from slimlib.errors import DataError, UnknownNameError
from slimlib.model import model_features
from slimlib.registry.architectures import (
    Architecture,
    UnknownStyleWarning,
    architecture_from_config,
    architecture_names,
    count_parameters,
    get_architecture,
    list_architectures,
)
from slimlib.registry.engine_models import ALL_ENGINE_MODELS

CONFIGS = Path(__file__).resolve().parent / "fixtures" / "configs"


REQUIRED = [
    "opt-125m",
    "opt-350m",
    "opt-1.3b",
    "opt-2.7b",
    "opt-6.7b",
    "opt-13b",
    "opt-30b",
    "opt-66b",
    "llama-2-7b",
    "llama-2-13b",
    "llama-2-70b",
    "llama-3-8b",
    "llama-3-70b",
    "mistral-7b",
    "granite-8b",
    "qwen2-7b",
    "qwen2-72b",
    "mixtral-8x7b",
    "llama-3.1-8b",
    "llama-3.1-70b",
    "qwen3-32b",
    "qwen3-235b-a22b",
    "qwen3-30b-a3b",
    "deepseek-v3",
    "deepseek-v3.2",
    "glm-5",
    "deepseek-v4-flash",
    "deepseek-v4-pro",
    "qwen3.5-27b",
    "qwen3.5-35b-a3b",
    "nemotron-3-nano-30b-a3b",
    "gpt-oss-120b",
]

# Published sizes: OPT paper (Zhang et al. 2022, Table 1: 125M ... 66B; 350M is 331M on its model card's
# checkpoint), Llama 2 paper (7B, 13B, 70B; Hugging Face lists 6.74B, 13.0B, 69.0B), Llama 3 model card (8B, 70B;
# HF 8.03B, 70.6B), Mistral 7B paper (7.3B; HF 7.24B), IBM Granite 3.0 8B (HF 8.17B), Qwen2 model cards (7.62B,
# 72.7B), Mixtral of Experts paper (Jiang et al. 2024: 47B total, 13B active; HF 46.7B).
PUBLISHED = {
    "opt-125m": 125e6,
    "opt-350m": 331e6,
    "opt-1.3b": 1.3e9,
    "opt-2.7b": 2.7e9,
    "opt-6.7b": 6.7e9,
    "opt-13b": 13e9,
    "opt-30b": 30e9,
    "opt-66b": 66e9,
    "llama-2-7b": 6.74e9,
    "llama-2-13b": 13.0e9,
    "llama-2-70b": 69.0e9,
    "llama-3-8b": 8.03e9,
    "llama-3-70b": 70.6e9,
    "mistral-7b": 7.24e9,
    "granite-8b": 8.17e9,
    "qwen2-7b": 7.62e9,
    "qwen2-72b": 72.7e9,
    "mixtral-8x7b": 46.7e9,
    # Llama 3.1 model card (8B, 70B; HF 8.03B, 70.6B), Qwen3 model cards (Qwen3-32B: 32.8B; Qwen3-235B-A22B: 235B
    # total, 22B activated; Qwen3-30B-A3B: 30.5B total, 3.3B activated), DeepSeek-V3 model card (671B total, 37B activated), OpenAI gpt-oss model card Table 1
    # (gpt-oss-120b: 116.83B total, 5.13B active without the input embedding)
    "llama-3.1-8b": 8.03e9,
    "llama-3.1-70b": 70.6e9,
    "qwen3-32b": 32.8e9,
    "qwen3-235b-a22b": 235e9,
    "qwen3-30b-a3b": 30.5e9,
    "deepseek-v3": 671e9,
    # DeepSeek-V3.2 card: 685B with the 14B MTP module (V3's split); GLM-5 report (arXiv:2602.15763) Table 1: 744B
    "deepseek-v3.2": 671e9,
    "glm-5": 744e9,
    # DeepSeek-V4 card: Flash 284B, Pro 1.6T
    "deepseek-v4-flash": 284e9,
    "deepseek-v4-pro": 1.6e12,
    # Qwen3.5 cards: 27B, and 35B total with the vision encoder SLIM does not read; Nemotron 3 Nano card: 31.6B
    "qwen3.5-27b": 27e9,
    "qwen3.5-35b-a3b": 35e9,
    "nemotron-3-nano-30b-a3b": 31.6e9,
    "gpt-oss-120b": 116.83e9,
}
#: entries whose head width is the config's head_dim, not hidden / heads: those from Qwen3 on
CURRENT = tuple(REQUIRED[REQUIRED.index("qwen3-32b") :])
#: active parameters one token uses (same sources); gpt-oss's card leaves the input embedding out
PUBLISHED_ACTIVE = {
    "qwen3-235b-a22b": 22e9,
    "qwen3-30b-a3b": 3.3e9,
    "deepseek-v3": 37e9,
    "mixtral-8x7b": 12.9e9,
}


def test_mixtral_is_a_mixture_of_experts_with_active_and_total_parameters():
    a = get_architecture("mistralai/Mixtral-8x7B-v0.1")
    assert a.is_moe and (a.n_experts, a.experts_per_token) == (8, 2)
    assert a.n_params == 46_702_792_704  # Hugging Face model card: 46.7B
    assert a.active_params == pytest.approx(12.9e9, rel=0.01)  # Mixtral paper: 13B active per token
    assert a.ffn_size_active == 2 * 14336
    dense = get_architecture("mistral-7b")
    assert (
        not dense.is_moe and dense.active_params == dense.n_params and dense.ffn_size_active == dense.ffn_size
    )


def test_registry_holds_the_required_models():
    assert architecture_names() == REQUIRED + list(ALL_ENGINE_MODELS)  # + the CPU campaign's two families


@pytest.mark.parametrize("name", REQUIRED)
def test_parameter_count_within_3_percent_of_published(name):
    a = get_architecture(name)
    assert a.n_params == pytest.approx(PUBLISHED[name], rel=0.03)
    if name in PUBLISHED_ACTIVE:
        assert a.active_params == pytest.approx(PUBLISHED_ACTIVE[name], rel=0.03)


def test_current_moe_and_mla_registry_entries():
    g = get_architecture("gpt-oss-120b")
    assert g.active_params - g.vocab_size * g.hidden_size == pytest.approx(5.13e9, rel=0.01)
    assert (g.quantization, g.attention_sinks, g.sliding_window, g.n_sliding_layers) == (
        "mxfp4",
        True,
        128,
        18,
    )
    d = get_architecture("deepseek-v3")
    assert d.is_mla and d.kv_values_per_token_layer == 512 + 64 and d.quantization == "fp8"
    assert (d.n_dense_layers, d.n_moe_layers, d.n_shared_experts, d.moe_ffn_size, d.ffn_size) == (
        3,
        58,
        1,
        2048,
        18432,
    )
    assert (
        d.ffn_size_active == 8 * 2048 + 2048
    )  # 8 routed experts and the shared one, not 8 x the dense 18432
    # 576 latent values x 61 layers x 2 bytes: MLA's 70 KB per token, not the 1.75 MB of a dense reading
    assert d.kv_values_per_token_layer * d.n_layers * 2 == 70_272
    q = get_architecture("Qwen/Qwen3-235B-A22B")
    assert (q.n_experts, q.experts_per_token, q.moe_ffn_size, q.n_moe_layers) == (128, 8, 1536, 94)
    assert q.expert_params == 94 * 128 * 3 * 4096 * 1536


def test_registry_spot_checks():
    opt = get_architecture("opt-1.3b")
    shape = (opt.n_layers, opt.hidden_size, opt.n_heads, opt.head_dim, opt.ffn_size)
    assert shape == (24, 2048, 32, 64, 8192)
    assert opt.ffn_kind == "mlp" and opt.n_ffn_matrices == 2 and opt.r_ff == 4.0 and opt.d_kv == 2048
    assert (
        opt.vocab_size == 50272 and opt.max_position == 2048 and opt.kv_bytes == 2 and opt.weight_bytes == 2
    )

    l70 = get_architecture("llama-2-70b")
    assert (l70.n_heads, l70.n_kv_heads, l70.head_dim, l70.d_kv) == (64, 8, 128, 1024)
    assert l70.ffn_kind == "gated" and l70.n_ffn_matrices == 3

    l3 = get_architecture("llama-3-8b")
    assert l3.d_kv == 1024 and l3.vocab_size == 128256 and l3.max_position == 8192

    assert (
        get_architecture("llama-2-7b").kv_values_per_token_layer == 2 * 4096
    )  # 0.5 MiB per token in 16 bits
    assert get_architecture("mistral-7b").d_kv == 1024
    assert get_architecture("qwen2-7b").d_kv == 4 * 128
    assert get_architecture("granite-8b").hf_id == "ibm-granite/granite-3.0-8b-instruct"
    for name in REQUIRED:
        a = get_architecture(name)
        if name not in CURRENT:  # their own head widths
            assert a.n_heads * a.head_dim == a.hidden_size
        assert a.source == f"https://huggingface.co/{a.hf_id}/blob/main/config.json"
        assert a.weight_bytes == 2
        assert a.ffn_kind == ("mlp" if name.startswith(("opt", "nemotron")) else "gated")


def test_opt_350m_projection_and_post_norm():
    a = get_architecture("opt-350m")
    assert a.hidden_size == 1024 and a.n_layers == 24
    # Word embeddings are 512 wide with project_in/out (512x1024 each, no bias); no final LayerNorm (post-norm).
    with_proj = a.n_params
    d, layers, v = 1024, 24, 50272
    per_layer = 4 * (d * d + d) + 2 * d * 4096 + 4096 + d + 2 * 2 * d
    expected = v * 512 + 2050 * d + 2 * 512 * d + layers * per_layer
    assert with_proj == expected == 331_196_416


# ---------------------------------------------------------------------------------------------------------------
# count_parameters against an independent state-dict shape enumeration
# ---------------------------------------------------------------------------------------------------------------
def _llama_shapes(d, layers, heads, kv, hd, ff, vocab, tie, qkv_bias=False):
    shapes = [(vocab, d)]
    for _ in range(layers):
        shapes += [(heads * hd, d), (kv * hd, d), (kv * hd, d), (d, heads * hd)]
        if qkv_bias:
            shapes += [(heads * hd,), (kv * hd,), (kv * hd,)]
        shapes += [(ff, d), (ff, d), (d, ff), (d,), (d,)]
    shapes += [(d,)] + ([] if tie else [(vocab, d)])
    return shapes


def _falcon_mqa_shapes(d, layers, heads, hd, vocab):
    shapes = [(vocab, d)]
    for _ in range(layers):
        shapes += [(d,), (d,), ((heads + 2) * hd, d), (d, d), (4 * d, d), (d, 4 * d)]
    return shapes + [(d,), (d,)]


@pytest.mark.parametrize(
    "name, shapes",
    [
        ("llama-2-70b", _llama_shapes(8192, 80, 64, 8, 128, 28672, 32000, tie=False)),
        ("qwen2-7b", _llama_shapes(3584, 28, 28, 4, 128, 18944, 152064, tie=False, qkv_bias=True)),
        ("granite-8b", _llama_shapes(4096, 40, 32, 8, 128, 12800, 49155, tie=True)),
    ],
)
def test_count_parameters_equals_shape_enumeration(name, shapes):
    assert get_architecture(name).n_params == sum(prod(s) for s in shapes)


def test_count_parameters_falcon_multi_query():
    a = get_architecture(CONFIGS / "falcon-7b.json")
    assert a.n_params == sum(prod(s) for s in _falcon_mqa_shapes(4544, 32, 71, 64, 65024))


def test_count_parameters_small_case_by_hand():
    # 1 layer, D=4, 2 query heads and 1 KV head of width 2, gated FFN 6, vocab 10, untied, RMS norms:
    # embed 40 + q 16 + k 8 + v 8 + o 16 + ffn 3*24 + norms 4+4 + final 4 + lm_head 40 = 212
    kw = dict(n_layers=1, hidden_size=4, n_heads=2, n_kv_heads=1, head_dim=2, ffn_size=6, vocab_size=10)
    assert count_parameters(**kw, ffn_kind="gated", tied_embeddings=False) == 212
    assert count_parameters(**kw, ffn_kind="gated", tied_embeddings=True) == 172
    # biases on q/k/v (4+2+2), LayerNorm instead of RMS (+4 per norm, 3 norms)
    assert count_parameters(**kw, ffn_kind="gated", tied_embeddings=True, qkv_bias=True, norm="layer") == 192
    # two-matrix FFN with biases (6 + 4)
    assert count_parameters(**kw, ffn_kind="mlp", tied_embeddings=True, ffn_bias=True) == 172 - 24 + 10
    with pytest.raises(ValueError, match="ffn_kind"):
        count_parameters(**kw, ffn_kind="moe", tied_embeddings=True)


# ---------------------------------------------------------------------------------------------------------------
# names
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "alias, canonical",
    [
        ("opt-1.3b", "opt-1.3b"),
        ("facebook/opt-1.3b", "opt-1.3b"),
        ("OPT-1.3B", "opt-1.3b"),
        ("meta-llama/Llama-2-7b-hf", "llama-2-7b"),
        ("llama-2-7b", "llama-2-7b"),
        ("Llama-2-7B", "llama-2-7b"),
        ("Llama-2-7b-hf", "llama-2-7b"),
        ("meta-llama/Llama-2-70b-chat-hf", "llama-2-70b"),
        ("meta-llama/Meta-Llama-3-8B", "llama-3-8b"),
        ("Meta-Llama-3-70B-Instruct", "llama-3-70b"),
        ("mistralai/Mistral-7B-v0.1", "mistral-7b"),
        ("ibm-granite/granite-3.0-8b-instruct", "granite-8b"),
        ("Qwen/Qwen2-72B", "qwen2-72b"),
        ("  qwen2_7b ", "qwen2-7b"),
    ],
)
def test_names_and_hf_ids(alias, canonical):
    assert get_architecture(alias).name == canonical


def test_unknown_model_lists_closest_names():
    with pytest.raises(UnknownNameError) as info:
        get_architecture("llama-2-7")
    msg = str(info.value)
    assert "unknown model 'llama-2-7'" in msg and "llama-2-7b" in msg
    with pytest.raises(DataError, match="no config file"):
        get_architecture("does/not/exist/config.json")


def test_architecture_passes_through_and_is_frozen():
    a = get_architecture("opt-125m")
    assert get_architecture(a) is a
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.n_layers = 1  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------------------------
# config.json parsing
# ---------------------------------------------------------------------------------------------------------------
# file -> (family, L, D, H, H_kv, d_h, D_ff, ffn_kind, vocab, max_position, published parameters)
FIXTURES = {
    "opt-125m.json": ("opt", 12, 768, 12, 12, 64, 3072, "mlp", 50272, 2048, 125e6),
    "opt-350m.json": ("opt", 24, 1024, 16, 16, 64, 4096, "mlp", 50272, 2048, 331e6),
    "llama-2-7b.json": ("llama", 32, 4096, 32, 32, 128, 11008, "gated", 32000, 4096, 6.74e9),
    "mistral-7b.json": ("mistral", 32, 4096, 32, 8, 128, 14336, "gated", 32000, 32768, 7.24e9),
    "qwen2-7b.json": ("qwen2", 28, 3584, 28, 4, 128, 18944, "gated", 152064, 131072, 7.62e9),
    # GPT-J model card: 6,053,381,344 parameters
    "gpt-j-6b.json": ("gptj", 28, 4096, 16, 16, 256, 16384, "mlp", 50400, 2048, 6.053e9),
    # BLOOM-560m model card: 559,214,592 parameters
    "bloom-560m.json": ("bloom", 24, 1024, 16, 16, 64, 4096, "mlp", 250880, 0, 559.2e6),
    # Falcon-7B model card: 7B (tied embeddings; the checkpoint also stores a duplicate lm_head)
    "falcon-7b.json": ("falcon", 32, 4544, 71, 1, 64, 18176, "mlp", 65024, 2048, 7e9),
    "falcon-40b.json": ("falcon", 60, 8192, 128, 8, 64, 32768, "mlp", 65024, 2048, None),
}


@pytest.mark.parametrize("fname", sorted(FIXTURES))
def test_config_fixture(fname):
    family, layers, d, h, kv, hd, ff, kind, vocab, max_pos, published = FIXTURES[fname]
    a = architecture_from_config(CONFIGS / fname)
    assert a.family == family
    got = (a.n_layers, a.hidden_size, a.n_heads, a.n_kv_heads, a.head_dim, a.ffn_size)
    assert got == (layers, d, h, kv, hd, ff)
    assert (a.ffn_kind, a.vocab_size) == (kind, vocab)
    assert a.max_position == max_pos
    assert a.kv_bytes == a.weight_bytes == 2  # float16 / bfloat16
    assert a.source.endswith(fname)
    if published is not None:
        assert a.n_params == pytest.approx(published, rel=0.03)


def test_exact_counts_from_model_cards():
    assert architecture_from_config(CONFIGS / "bloom-560m.json").n_params == 559_214_592
    assert architecture_from_config(CONFIGS / "opt-125m.json").n_params == 125_239_296


@pytest.mark.parametrize(
    "fname, registry_name",
    [
        ("opt-125m.json", "opt-125m"),
        ("opt-350m.json", "opt-350m"),
        ("llama-2-7b.json", "llama-2-7b"),
        ("mistral-7b.json", "mistral-7b"),
        ("qwen2-7b.json", "qwen2-7b"),
    ],
)
def test_fixture_agrees_with_registry(fname, registry_name):
    parsed = architecture_from_config(CONFIGS / fname)
    reg = get_architecture(registry_name)
    skip = {"name", "hf_id", "source", "aliases"}
    for f in dataclasses.fields(Architecture):
        if f.name not in skip:
            assert getattr(parsed, f.name) == getattr(reg, f.name), f.name


def test_get_architecture_reads_files_and_folders(tmp_path):
    a = get_architecture(str(CONFIGS / "opt-125m.json"))
    assert a.name == "opt-125m" and a.hf_id == "facebook/opt-125m"
    folder = tmp_path / "my-model"
    folder.mkdir()
    shutil.copy(CONFIGS / "mistral-7b.json", folder / "config.json")
    b = get_architecture(folder)
    assert b.name == "my-model" and b.hf_id == "" and b.n_kv_heads == 8
    assert get_architecture(folder / "config.json") == b


def _write(tmp_path, data, name="config.json"):
    p = tmp_path / name
    p.write_text(json.dumps(data), encoding="utf-8")
    return p


def _load(fname):
    return json.loads((CONFIGS / fname).read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    "fname, key",
    [
        ("llama-2-7b.json", "intermediate_size"),
        ("opt-125m.json", "ffn_dim"),
        ("gpt-j-6b.json", "n_embd"),
        ("falcon-7b.json", "num_attention_heads"),
        ("qwen2-7b.json", "vocab_size"),
    ],
)
def test_missing_key_names_file_and_key(tmp_path, fname, key):
    data = _load(fname)
    del data[key]
    p = _write(tmp_path, data)
    with pytest.raises(DataError) as info:
        architecture_from_config(p)
    msg = str(info.value)
    assert str(p) in msg and repr(key) in msg


def test_defaults_and_alternative_keys(tmp_path):
    data = _load("llama-2-7b.json")
    del data["num_key_value_heads"]  # defaults to the query heads
    data["torch_dtype"] = "float32"
    a = architecture_from_config(_write(tmp_path, data, "a.json"))
    assert a.n_kv_heads == 32 and a.kv_bytes == 4 and a.weight_bytes == 4

    data = _load("mistral-7b.json")
    del data["torch_dtype"]
    data["dtype"] = "bfloat16"  # newer transformers write `dtype`
    data["head_dim"] = 128
    assert architecture_from_config(_write(tmp_path, data, "b.json")).d_kv == 1024

    data = _load("bloom-560m.json")
    data["n_embed"] = data.pop("hidden_size")  # older BLOOM configs
    assert architecture_from_config(_write(tmp_path, data, "c.json")).hidden_size == 1024

    data = _load("gpt-j-6b.json")
    data["n_inner"] = 8192
    assert architecture_from_config(_write(tmp_path, data, "d.json")).ffn_size == 8192


def test_old_refinedweb_falcon_config(tmp_path):
    """The first tiiuae/falcon-7b config (model_type RefinedWebModel, n_head/n_layer) gives the same model."""
    old = {
        "architectures": ["RWForCausalLM"],
        "bias": False,
        "hidden_size": 4544,
        "model_type": "RefinedWebModel",
        "multi_query": True,
        "n_head": 71,
        "n_layer": 32,
        "parallel_attn": True,
        "torch_dtype": "bfloat16",
        "vocab_size": 65024,
    }
    a = architecture_from_config(_write(tmp_path, old))
    b = architecture_from_config(CONFIGS / "falcon-7b.json")
    assert (a.n_kv_heads, a.n_params, a.family) == (b.n_kv_heads, b.n_params, "falcon")


def test_style_from_architectures_when_model_type_missing(tmp_path):
    data = _load("mistral-7b.json")
    del data["model_type"]
    a = architecture_from_config(_write(tmp_path, data))
    assert a.family == "mistral" and a.ffn_kind == "gated" and a.n_kv_heads == 8  # MistralForCausalLM


def test_bad_configs(tmp_path):
    with pytest.raises(DataError, match="a.json': model_type 'mamba' is a state-space"):
        architecture_from_config(_write(tmp_path, {"model_type": "mamba", "hidden_size": 768}, "a.json"))
    with pytest.raises(DataError, match="not a supported style"):
        architecture_from_config(_write(tmp_path, {"model_type": "t5", "hidden_size": 768}, "a2.json"))
    bad = tmp_path / "b.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(DataError, match="not a readable JSON"):
        architecture_from_config(bad)
    data = _load("llama-2-7b.json")
    data["torch_dtype"] = "int4"
    with pytest.raises(DataError, match="torch_dtype"):
        architecture_from_config(_write(tmp_path, data, "c.json"))
    data = _load("llama-2-7b.json")
    data["num_key_value_heads"] = 5
    with pytest.raises(DataError, match="not a multiple"):
        architecture_from_config(_write(tmp_path, data, "d.json"))
    with pytest.raises(DataError, match="no config file"):
        architecture_from_config(tmp_path / "empty-folder")


def test_list_architectures():
    df = list_architectures()
    assert list(df["name"]) == REQUIRED + list(ALL_ENGINE_MODELS)
    assert {"hf_id", "d_kv", "n_params", "source"} <= set(df.columns)
    row = df.set_index("name").loc["llama-3-8b"]
    assert row["d_kv"] == 1024
    sub = list_architectures(["Qwen/Qwen2-7B", CONFIGS / "gpt-j-6b.json"])
    assert list(sub["name"]) == ["qwen2-7b", "gpt-j-6b"]


# ---------------------------------------------------------------------------------------------------------------
# slim models
# ---------------------------------------------------------------------------------------------------------------
def test_cli_models_table(capsys):
    assert main(["models"]) == 0
    out = capsys.readouterr().out
    for name in REQUIRED:
        assert name in out
    assert "meta-llama/Llama-2-70b-hf" in out and "kv_kib_per_token" in out


def test_cli_models_csv_round_trips(capsys):
    assert main(["models", "--format", "csv"]) == 0
    df = pd.read_csv(io.StringIO(capsys.readouterr().out), keep_default_na=False)
    expected = list_architectures()
    added = ("kv_bytes_per_token", "state_bytes_per_sequence")
    assert [c for c in df.columns if c not in added] == list(expected.columns)
    # a state per sequence for the hybrids (Gated DeltaNet, Mamba-2) and DeepSeek-V4 (its compressors) only
    hybrid = df["n_linear_layers"] > 0
    v4 = df["n_csa_layers"] + df["n_hca_layers"] > 0
    assert set(df.loc[hybrid, "name"]) == {"qwen3.5-27b", "qwen3.5-35b-a3b", "nemotron-3-nano-30b-a3b"}
    assert set(df.loc[v4, "name"]) == {"deepseek-v4-flash", "deepseek-v4-pro"}
    assert (df.loc[hybrid | v4, "state_bytes_per_sequence"] > 0).all()
    assert (df.loc[~hybrid & ~v4, "state_bytes_per_sequence"] == 0).all()
    # DeepSeek-V4-Flash: 584-byte entries per 128 (20 HCA) and per 4 (21 CSA) tokens, the indexer's 132-byte key
    # per 4 tokens, the window's entry in each of its 43 layers (counted whole); its compressors' float32 state
    flash = df.set_index("name").loc["deepseek-v4-flash"]
    assert flash["kv_bytes_per_token"] == round(20 * 584 / 128 + 21 * (584 + 132) / 4 + 43 * 584)
    assert flash["state_bytes_per_sequence"] == 21 * (8 * 2048 + 8 * 512) * 4 + 20 * 128 * 1024 * 4
    df, expected = df[~v4].reset_index(drop=True), expected[~v4].reset_index(drop=True)
    # KV bytes per token of vLLM's default serving configuration (16 bits, one GPU): 2 L D_kv 2 for MHA/GQA,
    # L (kv_lora_rank + qk_rope_head_dim) 2 for MLA
    per_layer = (expected["kv_lora_rank"] + expected["qk_rope_head_dim"]).where(
        expected["kv_lora_rank"] > 0, 2 * expected["d_kv"]
    )  # MLA caches its latent and RoPE key; a sparse model also each indexer's 132-byte key
    indexers = expected["n_indexer_layers"] * 132
    attention_layers = expected["n_layers"] - expected["n_linear_layers"]  # a hybrid caches KV in these only
    assert (df["kv_bytes_per_token"] == attention_layers * per_layer * 2 + indexers).all()
    assert df["n_params"].tolist() == expected["n_params"].tolist()
    assert df["source"].tolist() == expected["source"].tolist()


def test_cli_models_json_with_config_path(capsys):
    assert main(["models", "llama-2-7B", str(CONFIGS / "falcon-7b.json"), "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in records] == ["llama-2-7b", "falcon-7b"]
    assert records[1]["n_kv_heads"] == 1 and records[1]["d_kv"] == 64


def test_cli_models_shows_a_hybrids_layer_kinds_and_state(capsys, tmp_path):
    from test_hybrid_linear import _qwen35_27b

    cfg = tmp_path / "qwen35" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(_qwen35_27b()))
    assert main(["models", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "16 full + 48 linear" in out and "146.8" in out  # 48 layers x 3.06 MiB of state per sequence
    assert main(["models", str(cfg), "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)[0]
    assert rec["n_linear_layers"] == 48 and rec["kv_bytes_per_token"] == 16 * 2 * 4 * 256 * 2
    assert rec["state_bytes_per_sequence"] == 48 * (48 * 128 * 128 * 4 + 10240 * 3 * 2)


def test_cli_models_errors(capsys, tmp_path):
    assert main(["models", "opt-1.4b"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("slim models: error: unknown model 'opt-1.4b'") and "opt-1.3b" in err
    data = _load("opt-125m.json")
    del data["hidden_size"]
    p = _write(tmp_path, data)
    assert main(["models", str(p)]) == 2
    err = capsys.readouterr().err
    assert "'hidden_size'" in err and str(p) in err


def test_cli_models_help_has_examples(capsys):
    with pytest.raises(SystemExit) as info:
        main(["models", "--help"])
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "config.json" in out


# ---------------------------------------------------------------------------------------------------------------
# Current dense families: hand-written fixtures with the real config.json fields of each family
# ---------------------------------------------------------------------------------------------------------------
# Published parameter counts (Hugging Face model pages): Qwen3-8B 8.19B, Qwen3-0.6B 0.44B non-embedding (model
# card), Llama-3.1-8B 8.03B, gemma-7b 8.54B, gemma-2-9b 9.24B, gemma-3-1b 1.00B, Phi-3-mini-4k 3.82B, phi-2 2.78B.
@pytest.mark.parametrize(
    "fname, n_params, head_dim, d_kv, tied",
    [
        ("qwen3-8b.json", 8.19e9, 128, 8 * 128, False),
        ("llama-3.1-8b.json", 8.03e9, 128, 8 * 128, False),
        ("gemma-7b.json", 8.54e9, 256, 16 * 256, True),  # head_dim 256 != 3072 / 16
        ("gemma-2-9b.json", 9.24e9, 256, 8 * 256, True),
        ("gemma-3-1b.json", 1.00e9, 256, 1 * 256, True),
        ("phi-3-mini.json", 3.82e9, 96, 32 * 96, False),
        ("phi-2.json", 2.78e9, 80, 32 * 80, False),
    ],
)
def test_current_dense_families(fname, n_params, head_dim, d_kv, tied):
    a = architecture_from_config(CONFIGS / fname)
    assert a.n_params == pytest.approx(n_params, rel=0.005)
    assert a.head_dim == head_dim and a.d_kv == d_kv
    assert a.kv_values_per_token_layer == 2 * d_kv
    emb = a.vocab_size * a.hidden_size
    assert a.embedding_params == (emb if tied else 2 * emb)


def test_qwen3_small_is_tied_and_counts_its_qk_norms(tmp_path):
    a = architecture_from_config(CONFIGS / "qwen3-0.6b.json")
    assert a.family == "qwen3" and a.head_dim == 128 != a.hidden_size // a.n_heads
    non_embedding = a.n_params - a.embedding_params
    assert non_embedding == pytest.approx(0.44e9, rel=0.01)  # model card: 0.44B non-embedding
    untied = dict(_load("qwen3-0.6b.json"), tie_word_embeddings=False)
    b = architecture_from_config(_write(tmp_path, untied))
    assert b.n_params - a.n_params == a.vocab_size * a.hidden_size
    no_qk = count_parameters(
        n_layers=a.n_layers, hidden_size=a.hidden_size, n_heads=a.n_heads, n_kv_heads=a.n_kv_heads,
        head_dim=a.head_dim, ffn_size=a.ffn_size, ffn_kind="gated", vocab_size=a.vocab_size, tied_embeddings=True,
    )  # fmt: skip
    assert a.n_params - no_qk == a.n_layers * 2 * a.head_dim


def test_unknown_model_type_with_standard_keys_is_read_with_a_warning(tmp_path):
    with pytest.warns(
        UnknownStyleWarning, match="model_type 'olmo2' is not a known style; read as a Llama-style"
    ):
        a = architecture_from_config(CONFIGS / "olmo2-7b.json")
    assert (a.n_layers, a.hidden_size, a.n_kv_heads, a.head_dim) == (32, 4096, 32, 128)
    assert a.n_params == pytest.approx(7.3e9, rel=0.02)  # OLMo-2-7B: 7.30B
    data = _load("olmo2-7b.json")
    del data["intermediate_size"]
    with pytest.raises(DataError, match="lacks the standard key.s. intermediate_size"):
        architecture_from_config(_write(tmp_path, data))


def test_float32_checkpoint_is_served_in_16_bits():
    """gemma-2-9b's config says float32; vLLM's --dtype auto serves it in bfloat16 (2 bytes)."""
    a = architecture_from_config(CONFIGS / "gemma-2-9b.json")
    assert a.weight_bytes == 4  # the checkpoint
    f = model_features(pd.DataFrame({"model": [str(CONFIGS / "gemma-2-9b.json")], "batch_size": [1],
                                     "input_len": [1], "output_len": [1]}))  # fmt: skip
    assert f["kv_bytes"][0] == 2 and f["weight_bytes_total"][0] == 2 * a.n_params
