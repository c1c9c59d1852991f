"""Nemotron-NAS (DeciLM) heterogeneous blocks: layers without attention, per-layer FFN widths, exact parameters,
KV in the attention layers only, and refusals naming the block and key."""

from __future__ import annotations

import pytest
from config_files import write_config as _write

from slimlib.errors import DataError
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_from_config


def _block(group, mult):
    return {"attention": {"n_heads_in_group": group, "no_op": group is None, "replace_with_linear": False,
                          "sparsify": None, "window_length": None, "num_sink_tokens": None},
            "ffn": {"ffn_mult": mult, "no_op": mult is None, "replace_with_linear": False, "sparsify": None}}  # fmt: skip


def _nas(blocks) -> dict:
    """Llama-3.3-Nemotron-Super-49B's shape keys with the given blocks."""
    return {"model_type": "nemotron-nas", "architectures": ["DeciLMForCausalLM"], "hidden_size": 8192,
            "num_hidden_layers": len(blocks), "num_attention_heads": 64, "num_key_value_heads": None,
            "intermediate_size": None, "vocab_size": 128256, "max_position_embeddings": 131072,
            "torch_dtype": "bfloat16", "tie_word_embeddings": False, "block_configs": blocks}  # fmt: skip


def test_blocks_without_attention_and_with_their_own_widths(tmp_path):
    blocks = [_block(8, 5.25), _block(None, 1.3125), _block(8, 2.625), _block(None, 0.5), _block(8, None)]
    a = architecture_from_config(_write(tmp_path, _nas(blocks)))
    assert (a.n_layers, a.n_attention_layers, a.n_mixerless_layers, a.n_ffnless_layers) == (5, 3, 2, 1)
    # DeciLM's width: int(2 mult D / 3) rounded up to a multiple of 256
    widths = [28672, 7168, 14336, 2816]
    assert a.ffn_width_sum == sum(widths) and a.mean_ffn_width == sum(widths) / 5
    d, v, hd = 8192, 128256, 128
    attention = d * 64 * hd + 2 * d * 8 * hd + 64 * hd * d
    norms = 3 + 4  # one before each attention and each FFN
    total = 2 * v * d + d + 3 * attention + sum(3 * d * w for w in widths) + norms * d
    assert a.n_params == total == a.active_params
    s = serving_config(a, "h200")
    assert s.kv_bytes_full == 3 * 2 * 8 * hd * 2  # keys and values of the three attention layers, bf16
    assert s.linear_flops_per_token == pytest.approx(2 * (total - 2 * v * d), rel=1e-3)


@pytest.mark.parametrize(
    "change, words",
    [
        (
            lambda b: b[1]["attention"].update(replace_with_linear=True),
            "'block_configs[1].attention.replace_with_linear'",
        ),
        (
            lambda b: b[0]["attention"].update(window_length=4096),
            "'block_configs[0].attention.window_length'",
        ),
        (
            lambda b: b[0]["attention"].update(n_heads_in_group=7),
            "n_heads_in_group' must be a positive divisor",
        ),
        (lambda b: b[2]["attention"].update(n_heads_in_group=4), "different KV head counts"),
        (lambda b: b[0]["ffn"].update(ffn_mult=-1), "'block_configs[0].ffn.ffn_mult'"),
        (
            lambda b: b[0]["ffn"].update(ffn_mult=float("inf")),
            "'block_configs[0].ffn.ffn_mult' must be a positive",
        ),
        (lambda b: b.pop(), "must list one block for each of the 3 layers"),
        (
            lambda b: b[0]["ffn"].update(moe={"num_experts": 8}),
            "'block_configs[0].ffn.moe'",
        ),
        (
            lambda b: b[2]["attention"].update(num_key_value_heads=4),
            "'block_configs[2].attention.num_key_value_heads'",
        ),
    ],
)
def test_variants_not_modelled_are_refused_naming_the_block(tmp_path, change, words):
    blocks = [_block(8, 5.25), _block(None, 1.0), _block(8, 2.625)]
    cfg = _nas(blocks)
    change(blocks)
    with pytest.raises(DataError) as err:
        architecture_from_config(_write(tmp_path, cfg))
    assert words in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("method", ["paper", "imai-ood-lr"])
def test_methods_that_price_kv_in_every_layer_refuse_attention_free_layers(tmp_path, method):
    import pandas as pd

    from slimlib.model.methods import make_model

    path = _write(tmp_path, _nas([_block(8, 5.25), _block(None, 1.0)] * 8))
    rows = pd.DataFrame({"model": [str(path)] * 4, "batch_size": [1, 2, 4, 8], "input_len": 512, "output_len": 128,
                         "gpu": "h200", "throughput_tok_s": [50.0, 95, 180, 330], "e2e_s": [2.6, 2.7, 2.8, 3.1]})  # fmt: skip
    with pytest.raises(DataError, match="row 0: the model has layers without attention"):
        make_model(method, gpu="h200").fit(rows)


def test_models_lists_the_attention_free_layers(tmp_path, capsys):
    from slimlib.cli.main import main

    path = _write(tmp_path, _nas([_block(8, 5.25), _block(None, 1.0), _block(8, 2.625)]))
    assert main(["models", str(path)]) == 0
    assert "2 full + 1 ffn-only" in capsys.readouterr().out
