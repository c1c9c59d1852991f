"""Tensor-parallel rows on a GPU whose all-reduce latency is another GPU's figures say so (`ProxyLatencyWarning`,
`slimlib.model.validity.check_allreduce`): the AMD GPUs' latency is NVIDIA's custom all-reduce on H100 SXM, and the
extrapolation cross-validation's TP axis (LLM-Inference-Bench, MI300X/MI250) is where the model misses most."""

from __future__ import annotations

import warnings

import pandas as pd
import pytest
from synthetic import TRUE_PARAMS

from slimlib.cli.main import main
from slimlib.model import PaperModel
from slimlib.model.validity import ProxyLatencyWarning, check_allreduce, check_table
from slimlib.registry.gpus import get_gpu, gpu_names


def _proxy_messages(df: pd.DataFrame, gpu: str | None = None) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_table(df, gpu)
    return [str(w.message) for w in caught if issubclass(w.category, ProxyLatencyWarning)]


def test_proxy_flag_follows_the_source():
    """The AMD GPUs borrow H100 SXM's latency; H100, H200, A100 and B200 SXM have their own measured tables."""
    for name in ("mi300x", "mi250-gcd", "mi250"):
        assert get_gpu(name).allreduce_proxy, name
    for name in ("h100-sxm-80gb", "h200-sxm-141gb", "a100-sxm-80gb", "b200"):
        g = get_gpu(name)
        assert (
            not g.allreduce_proxy and g.allreduce_latency_s and "custom_allreduce_perf" in g.allreduce_source
        )
    for g in map(get_gpu, gpu_names()):  # a latency table always says where it comes from
        if g.allreduce_latency_s:
            assert g.allreduce_source


def test_tp_rows_on_a_proxy_gpu_warn_once_per_degree_naming_the_row():
    df = pd.DataFrame({"model": "llama-2-7b", "gpu": "mi300x", "batch_size": [1, 8, 8, 8],
                       "input_len": 128, "output_len": 128, "tensor_parallel": [1, 4, 4, 2]})  # fmt: skip
    df.attrs["source"] = "runs.csv"
    messages = _proxy_messages(df)
    assert len(messages) == 2, messages  # TP 4 (two rows) and TP 2; none for TP 1
    assert messages[0].startswith("runs.csv line 3: tensor_parallel = 4 on mi300x")
    assert messages[1].startswith("runs.csv line 5: tensor_parallel = 2 on mi300x")
    assert "vllm-project/vllm#14125" in messages[0]  # the registry's reason, not a paraphrase
    assert _proxy_messages(df[df["tensor_parallel"] == 1]) == []


def test_measured_latency_and_one_gpu_do_not_warn():
    df = pd.DataFrame({"model": "llama-2-7b", "gpu": "h100", "batch_size": [8], "input_len": [128],
                       "output_len": [128], "tensor_parallel": [4]})  # fmt: skip
    assert _proxy_messages(df) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_allreduce(get_gpu("mi300x"), 1, "--tensor-parallel")
        check_allreduce(get_gpu("h100"), 8, "--tensor-parallel")
    with pytest.warns(ProxyLatencyWarning, match=r"^--tensor-parallel: tensor_parallel = 8 on mi300x"):
        check_allreduce(get_gpu("mi300x"), 8, "--tensor-parallel")


def test_advise_says_it_on_a_proxy_gpu(tmp_path, capsys):
    params = tmp_path / "params.json"
    params.write_text(PaperModel.with_params(TRUE_PARAMS, gpu="mi300x").to_json())
    args = ["advise", str(params), "--model", "llama-2-7b", "--input-len", "128", "--output-len", "128",
            "--slo-s", "1e9", "--epsilon", "0.001", "--format", "json"]  # fmt: skip
    with pytest.warns(ProxyLatencyWarning, match=r"^--tensor-parallel: tensor_parallel = 2 on mi300x"):
        assert main([*args, "--tensor-parallel", "2"]) == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(args) == 0
    assert not [w for w in caught if issubclass(w.category, ProxyLatencyWarning)]
