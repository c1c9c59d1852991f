"""Serving precision (vLLM's --dtype, --quantization, --kv-cache-dtype): Eq. 11's KV bytes, the KV capacity, Eq. 7's
peak, the weight bytes, clear errors for unknown names, and the default (no precision columns) unchanged."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS

from slimlib.advisor import capacity as A
from slimlib.cli.main import main
from slimlib.errors import UnknownNameError
from slimlib.model import PaperModel, model_features
from slimlib.model import equations as eq
from slimlib.model.features import prefill_peak_flops
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu


def _rows(**cols):
    df = pd.DataFrame({"model": ["llama-3-8b"] * 2, "gpu": "h100-sxm-80gb", "batch_size": [16, 64],
                       "input_len": [512, 2048], "output_len": [256, 512]})  # fmt: skip
    for k, v in cols.items():
        df[k] = v
    return df


def test_fp8_kv_halves_eq11_traffic_and_doubles_capacity():
    base, fp8 = model_features(_rows()), model_features(_rows(kv_cache_dtype="fp8"))
    assert (fp8["kv_bytes"] == 1).all() and (base["kv_bytes"] == 2).all()
    c = eq.kv_scan_tokens(base["input_len"], base["output_len"])
    t16 = eq.decode_kv_bytes(base["n_layers"], base["d_kv"], base["kv_bytes"], c)
    t8 = eq.decode_kv_bytes(fp8["n_layers"], fp8["d_kv"], fp8["kv_bytes"], c)
    np.testing.assert_allclose(t8, t16 / 2, rtol=0)
    np.testing.assert_array_equal(fp8["weight_bytes_total"], base["weight_bytes_total"])  # weights untouched
    arch = get_architecture("llama-3-8b")
    m16, m8 = (
        serving_config(arch, "h100", kv_cache_dtype="auto"),
        serving_config(arch, "h100", kv_cache_dtype="fp8"),
    )
    assert m8.kv_bytes_per_token == m16.kv_bytes_per_token / 2
    assert m8.num_gpu_blocks in (2 * m16.num_gpu_blocks, 2 * m16.num_gpu_blocks + 1)
    # the advisor's memory cap doubles with it
    model = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    wl = pd.DataFrame({"model": ["llama-3-8b"] * 2, "input_len": [4096.0] * 2, "output_len": [4096.0] * 2,
                       "kv_cache_dtype": ["auto", "fp8"]})  # fmt: skip
    cap = A.advise_many(model, wl, batch_sizes=np.arange(1, 257))["max_batch_memory"].to_numpy()
    assert cap[1] in (2 * cap[0], 2 * cap[0] + 1)


def test_fp8_weights_use_the_fp8_peak_in_eq7():
    m = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    p16 = m.predict(_rows())["pred_prefill_s"].to_numpy()
    p8 = m.predict(_rows(quantization="fp8"))["pred_prefill_s"].to_numpy()
    f = model_features(_rows(quantization="fp8"))
    np.testing.assert_allclose(prefill_peak_flops(f, get_gpu("h100")), 1978.9e12)
    flops = eq.prefill_flops(f["batch_size"], f["input_len"], f["n_layers"], f["hidden_size"], f["d_kv"],
                             f["ffn_size"], f["n_ffn_matrices"])  # fmt: skip
    np.testing.assert_allclose(p8, flops / (TRUE_PARAMS["eta_c"] * 1978.9e12), rtol=1e-12)
    np.testing.assert_allclose(p8, p16 * 989.4 / 1978.9, rtol=1e-12)
    # a GPU without fp8 tensor cores runs fp8 weights weight-only, at its 16-bit peak
    np.testing.assert_allclose(prefill_peak_flops(f, get_gpu("a100")), 312e12)
    np.testing.assert_allclose(
        prefill_peak_flops(model_features(_rows(quantization="nvfp4")), get_gpu("b200")), 9e15
    )


def test_fp8_weights_keep_embeddings_in_the_serving_dtype():
    arch = get_architecture("llama-3-8b")
    emb = 2 * 128256 * 4096  # untied input embedding and LM head
    assert arch.embedding_params == emb
    f = model_features(_rows(quantization="fp8"))
    assert f["weight_bytes_total"][0] == 2 * emb + (arch.n_params - emb)
    assert (
        model_features(_rows(quantization="fp4"))["weight_bytes_total"][0]
        == 2 * emb + (arch.n_params - emb) / 2
    )


def test_default_precision_is_bit_identical():
    """No precision columns, empty cells, and the explicit defaults all give today's features exactly."""
    base = model_features(_rows())
    arch = get_architecture("llama-3-8b")
    assert (base["weight_bytes_total"] == 2.0 * arch.n_params).all()
    assert (base["kv_bytes_per_token"] == 2.0 * 2 * arch.n_layers * arch.d_kv).all()
    for cols in ({"dtype": "", "quantization": "", "kv_cache_dtype": ""},
                 {"dtype": "auto", "quantization": "none", "kv_cache_dtype": "auto"},
                 {"dtype": "bfloat16", "quantization": None, "kv_cache_dtype": np.nan}):  # fmt: skip
        other = model_features(_rows(**cols))
        for k in base:
            np.testing.assert_array_equal(other[k], base[k], err_msg=f"{cols} {k}")


@pytest.mark.parametrize(
    "col, value, message",
    [("quantization", "int3", "unknown quantization 'int3'"), ("kv_cache_dtype", "fp4", "unknown kv_cache_dtype"),
     ("dtype", "float8", "unknown dtype 'float8'")],
)  # fmt: skip
def test_unknown_precision_is_a_clear_error(col, value, message):
    df = _rows(**{col: ["auto" if col != "quantization" else "", value]})
    df.attrs["source"] = "runs.csv"
    with pytest.raises(UnknownNameError, match=rf"runs.csv line 3: {message}"):
        model_features(df)


def test_cli_advise_prints_the_precision(tmp_path, capsys):
    params = tmp_path / "params.json"
    params.write_text(PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb").to_json())
    args = ["advise", str(params), "--model", "llama-3-8b", "--input-len", "512", "--output-len", "512"]
    assert main([*args, "--quantization", "fp8", "--kv-cache-dtype", "fp8"]) == 0
    out = capsys.readouterr().out
    assert all(flag in out for flag in ("--kv-cache-dtype fp8", "--quantization fp8"))
    assert main([*args, "--kv-cache-dtype", "fp8", "--format", "json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["vllm"]["kv_cache_dtype"] == "fp8" and "quantization" not in rec["vllm"]
    assert main([*args, "--format", "json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert rec["max_batch_memory"] in (2 * plain["max_batch_memory"], 2 * plain["max_batch_memory"] + 1)
    with pytest.raises(SystemExit):
        main([*args, "--kv-cache-dtype", "int3"])
