"""Adapters that run the peer estimators (optional extra ``peers``) on the evaluation rows of `slimlib.experiments.transfer_study.peer_comparison`.

Each adapter takes rows (scenario layout with ``tensor_parallel``) and returns predictions in
`slimlib.experiments.transfer_study.peer_comparison.PREDICTION_COLUMNS`: the tool, its installed version, the exact call and a note on any
hardware or model mismatch. Uncalibrated, defaults as a user would run them. A row the tool cannot run (model or
GPU unsupported) gets no prediction. Static batch: E2E = prefill of B x IL tokens + OL decode steps.

* GenZ (`genz-llm`): ``prefill_moddeling`` + ``OL x decode_moddeling`` at the mean context ``IL + OL/2``;
  MI300X is GenZ's own system ``'MI300X'``, the others a dict with the registry's peak FLOP/s, bandwidth and memory.
* llm-analysis: ``infer(...)["total_latency"]``; GPUs from its own list (MI250 is its 128 GB card, so TP = cards;
  the 64 GB H100 is run as its nearest, ``h100-sxm-80gb``); models from its bundled configs only (no network).
* AIConfigurator (``aiconfigurator cli estimate --estimate-mode static --backend vllm``): NVIDIA systems only; the
  64 GB H100 rows are run on its ``h100_sxm`` (80 GB, 3.35 TB/s: a hardware mismatch, stated in each row); the
  model is given as a local folder holding a config.json written from the architecture registry.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import io
import json
import re
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.errors import SlimError
from slimlib.experiments.transfer_study.peer_comparison import PREDICTION_COLUMNS
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu

GENZ_MODELS = {
    "llama-2-7b": "meta-llama/Llama-2-7B", "llama-2-13b": "meta-llama/Llama-2-13B",
    "llama-2-70b": "meta-llama/Llama-2-70B", "mistral-7b": "mistralai/Mistral-7B",
    "mixtral-8x7b": "mistralai/Mixtral-8x7B", "llama-3-8b": "meta-llama/meta-llama-3.1-8b",
    "llama-3-70b": "meta-llama/meta-llama-3.1-70b", "qwen2-7b": "Qwen/Qwen2.5-7B", "qwen2-72b": "Qwen/Qwen2.5-72B",
    "opt-1.3b": "facebook/opt-1.3b", "opt-2.7b": None,
}  # fmt: skip
GENZ_NEAREST = {"llama-3-8b": "Llama-3.1-8B (same shapes)", "llama-3-70b": "Llama-3.1-70B (same shapes)",
                "qwen2-7b": "Qwen2.5-7B (same shapes)", "qwen2-72b": "Qwen2.5-72B (same shapes)"}  # fmt: skip
LLMA_MODELS = {"llama-2-7b": "NousResearch_Llama-2-7b-hf", "llama-2-70b": "upstage_Llama-2-70b-instruct-v2",
               "opt-1.3b": "facebook_opt-1.3b"}  # fmt: skip
LLMA_GPUS = {"mi250-gcd": ("mi250-128gb", 2, "MI250 card (its 128 GB config); TP counted in cards"),
             "h100-sxm-64gb": ("h100-sxm-80gb", 1, "run as h100-sxm-80gb (no 64 GB H100 config)")}  # fmt: skip
AIC_SYSTEMS = {
    "h100-sxm-64gb": ("h100_sxm", "run on AIConfigurator's h100_sxm (80 GB, 3.35 TB/s); data: 64 GB H100")
}


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError as exc:
        raise SlimError(
            f"{dist} is not installed; install the optional extra: pip install 'slimlib[peers]'"
        ) from exc


def _row(dataset, tool, version, call, r, e2e, note) -> dict:
    thr = (
        r.batch_size * (r.input_len + r.output_len) / e2e if e2e and np.isfinite(e2e) and e2e > 0 else np.nan
    )
    return {"dataset": dataset, "tool": tool, "tool_version": version, "call": call, "model": r.model, "gpu": r.gpu,
            "tensor_parallel": r.tensor_parallel, "batch_size": r.batch_size, "input_len": r.input_len,
            "output_len": r.output_len, "pred_throughput_tok_s": thr, "pred_e2e_s": e2e, "note": note}  # fmt: skip


def _genz_system(gpu: str):
    if get_gpu(gpu).name == "mi300x":
        return "MI300X", "'MI300X'"
    g = get_gpu(gpu)
    d = {"Flops": g.peak_flops / 1e12, "Memory_size": g.mem_gb, "Memory_BW": g.mem_bw / 1e9,
         "ICN": (g.link_bw or 450e9) / 1e9, "real_values": True}  # fmt: skip
    return d, repr(d)


def genz_predict(dataset: str, rows: pd.DataFrame) -> pd.DataFrame:
    """GenZ predictions (see the module docstring)."""
    version = _version("genz-llm")
    from GenZ import decode_moddeling, prefill_moddeling

    out = []
    for r in rows.itertuples(index=False):
        name = GENZ_MODELS.get(r.model)
        if name is None:
            continue
        system, sys_text = _genz_system(r.gpu)
        tp, b, il, ol = int(r.tensor_parallel), int(r.batch_size), int(r.input_len), int(r.output_len)
        ctx = il + ol // 2
        call = (f"prefill_moddeling(model={name!r}, batch_size={b}, input_tokens={il}, system_name={sys_text}, "
                f"bits='bf16', tensor_parallel={tp})['Latency'] + {ol} * decode_moddeling(model={name!r}, "
                f"batch_size={b}, Bb=1, input_tokens={ctx}, output_tokens=0, system_name={sys_text}, bits='bf16', "
                f"tensor_parallel={tp})['Latency']  # ms")  # fmt: skip
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                pre = prefill_moddeling(model=name, batch_size=b, input_tokens=il, system_name=system, bits="bf16",
                                        tensor_parallel=tp)["Latency"]  # fmt: skip
                dec = decode_moddeling(model=name, batch_size=b, Bb=1, input_tokens=ctx, output_tokens=0,
                                       system_name=system, bits="bf16", tensor_parallel=tp)["Latency"]  # fmt: skip
            e2e = (pre + ol * dec) / 1000.0
        except Exception as exc:  # a tool failure is recorded, not hidden
            out.append(
                _row(dataset, "genz", version, call, r, np.nan, f"failed: {type(exc).__name__}: {exc}"[:200])
            )
            continue
        out.append(_row(dataset, "genz", version, call, r, e2e, GENZ_NEAREST.get(r.model, "")))
    return pd.DataFrame(out)


def llm_analysis_predict(dataset: str, rows: pd.DataFrame) -> pd.DataFrame:
    """llm-analysis predictions (see the module docstring)."""
    version = _version("llm-analysis")
    import logging

    from llm_analysis.analysis import infer

    logging.getLogger("llm_analysis").setLevel(logging.ERROR)
    out = []
    for r in rows.itertuples(index=False):
        name, gpu = LLMA_MODELS.get(r.model), LLMA_GPUS.get(get_gpu(r.gpu).name)
        if name is None or gpu is None:
            continue
        gname, per, note = gpu
        tp = max(int(r.tensor_parallel) // per, 1)
        kw = dict(model_name=name, gpu_name=gname, dtype_name="w16a16e16", log_level="ERROR",
                  batch_size_per_gpu=int(r.batch_size), tp_size=tp, seq_len=int(r.input_len),
                  num_tokens_to_generate=int(r.output_len))  # fmt: skip
        call = "infer(" + ", ".join(f"{k}={v!r}" for k, v in kw.items()) + ")['total_latency']"
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
                warnings.simplefilter("ignore")
                e2e = float(infer(**kw)["total_latency"])
        except Exception as exc:
            out.append(_row(dataset, "llm-analysis", version, call, r, np.nan,
                            f"failed: {type(exc).__name__}: {exc}"[:200]))  # fmt: skip
            continue
        out.append(_row(dataset, "llm-analysis", version, call, r, e2e, note))
    return pd.DataFrame(out)


def hf_config(model: str) -> dict:
    """A Hugging Face style config.json for a Llama-family registry model (for tools that read one)."""

    a = get_architecture(model)
    if a.family not in ("llama", "mistral"):
        raise SlimError(f"{model}: only Llama-style configs are written for AIConfigurator")
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": a.hidden_size,
            "num_hidden_layers": a.n_layers, "num_attention_heads": a.n_heads, "num_key_value_heads": a.n_kv_heads,
            "intermediate_size": a.ffn_size, "vocab_size": a.vocab_size, "max_position_embeddings": a.max_position,
            "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": False,
            "torch_dtype": "float16"}  # fmt: skip


def aiconfigurator_predict(dataset: str, rows: pd.DataFrame) -> pd.DataFrame:
    """AIConfigurator static-batch estimates with the vLLM backend (NVIDIA rows only; see the module docstring)."""
    version = _version("aiconfigurator")
    from aiconfigurator.main import main as aic_main

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in rows.itertuples(index=False):
            system = AIC_SYSTEMS.get(get_gpu(r.gpu).name)
            if system is None or r.model.startswith("opt"):
                continue
            folder = Path(tmp) / r.model
            folder.mkdir(exist_ok=True)
            (folder / "config.json").write_text(json.dumps(hf_config(r.model)))
            args = ["estimate", "--model-path", f"<config.json of {r.model}>", "--system", system[0], "--backend",
                    "vllm", "--estimate-mode", "static", "--isl", str(int(r.input_len)), "--osl",
                    str(int(r.output_len)), "--batch-size", str(int(r.batch_size)), "--tp-size",
                    str(int(r.tensor_parallel))]  # fmt: skip
            call = "aiconfigurator cli " + " ".join(args)
            argv = ["aiconfigurator", "cli", *args]
            argv[argv.index(f"<config.json of {r.model}>")] = str(folder)
            buf = io.StringIO()
            old = sys.argv
            try:
                sys.argv = argv
                with (
                    warnings.catch_warnings(),
                    contextlib.redirect_stdout(buf),
                    contextlib.redirect_stderr(io.StringIO()),
                ):
                    warnings.simplefilter("ignore")
                    aic_main()
            except SystemExit:
                pass
            finally:
                sys.argv = old
            m = re.search(r"Request Latency:\s*([0-9.,]+)\s*ms", buf.getvalue())
            e2e = float(m.group(1).replace(",", "")) / 1000.0 if m else np.nan
            out.append(_row(dataset, "aiconfigurator", version, call, r, e2e,
                            system[1] if m else "failed: no estimate printed"))  # fmt: skip
    return pd.DataFrame(out)


ADAPTERS = {
    "genz": genz_predict,
    "llm-analysis": llm_analysis_predict,
    "aiconfigurator": aiconfigurator_predict,
}


def run_peers(data: dict[str, pd.DataFrame], tools: list[str] | None = None) -> pd.DataFrame:
    """Predictions of every installed tool on every dataset's rows; a tool that is not installed raises SlimError."""

    parts = []
    for tool in tools or list(ADAPTERS):
        for name, rows in data.items():
            p = ADAPTERS[tool](name, rows)
            if len(p):
                parts.append(p)
    out = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    return out[list(PREDICTION_COLUMNS)].sort_values(["dataset", "tool", "model", "gpu", "tensor_parallel",
                                                       "input_len", "batch_size"], kind="mergesort")  # fmt: skip
