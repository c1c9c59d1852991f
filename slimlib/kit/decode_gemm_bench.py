"""The CPU engine's decode GEMMs, timed as the engine runs them: every dense weight of a model, LM head included.

A decode step of ``M`` running sequences multiplies each of the model's dense weights by ``M`` tokens. This times
that pass with vLLM's own CPU GEMM (``onednn_mm``, the path ``dispatch_cpu_unquantized_gemm`` takes for bf16
weights without AMX or zentorch) on random bf16 weights of the model's shapes (`gemm_shapes`: fused QKV, output
projection, FFN, LM head; one weight per layer, so the pass streams the whole model from memory as a step does), at
`threads` torch threads (the engine's worker runs one OMP thread on a 2-core host). Each pass is repeated after a
warm-up; the best repeat is kept (STREAM's rule), the median beside it.

Run it with the engine's interpreter (it needs torch and vLLM, not slimlib): ``python decode_gemm_bench.py SPEC``,
``SPEC`` a JSON file ``{"models": {name: config}, "tokens": [...], "repeats": n, "threads": t}``; it prints one JSON
object per (model, tokens). ``slim bench gemm`` runs it and writes the table and its manifest
(`slimlib.data.decode_gemm`).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

LLAMA_STYLE = ("llama", "mistral", "qwen2", "qwen3")


def gemm_shapes(config: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(name, K, N) of every dense GEMM of one decode pass (per layer, then the LM head) of an OPT or a
    Llama-style config; ValueError for another ``model_type``."""
    kind = config.get("model_type")
    d = int(config["hidden_size"])
    layers = int(config["num_hidden_layers"])
    vocab = int(config["vocab_size"])
    if kind == "opt":
        ffn = int(config["ffn_dim"])
        per_layer = [("qkv", d, 3 * d), ("o", d, d), ("fc1", d, ffn), ("fc2", ffn, d)]
    elif kind in LLAMA_STYLE:
        heads = int(config["num_attention_heads"])
        head_dim = int(config.get("head_dim") or d // heads)
        kv = int(config.get("num_key_value_heads") or heads)
        ffn = int(config["intermediate_size"])
        per_layer = [("qkv", d, (heads + 2 * kv) * head_dim), ("o", heads * head_dim, d),
                     ("gate_up", d, 2 * ffn), ("down", ffn, d)]  # fmt: skip
    else:
        raise ValueError(
            f"model_type {kind!r}: decode GEMM shapes are known for opt and {', '.join(LLAMA_STYLE)}"
        )
    return [(f"{n}.{i}", k, m) for i in range(layers) for n, k, m in per_layer] + [("lm_head", d, vocab)]


def _time_pass(model: str, config: dict[str, Any], tokens: list[int], repeats: int) -> list[dict[str, Any]]:
    import torch
    from vllm import _custom_ops as ops

    shapes = gemm_shapes(config)
    handles = []
    for _, k, n in shapes:
        w = torch.randn(n, k, dtype=torch.bfloat16)
        handles.append((ops.create_onednn_mm(w.t(), 32), k))
    weights = float(sum(k * n for _, k, n in shapes))  # bf16: 2 bytes and, per token, 2 FLOPs each
    out = []
    for m in tokens:
        xs = {k: torch.randn(m, k, dtype=torch.bfloat16) for _, k, _ in shapes}

        def run(xs: dict[int, Any] = xs) -> None:
            for h, k in handles:
                ops.onednn_mm(h, xs[k], None)

        run()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run()
            times.append(time.perf_counter() - t0)
        times.sort()
        best, median = times[0], times[len(times) // 2]
        out.append({"model": model, "tokens": m, "n_gemms": len(shapes), "weight_bytes": 2.0 * weights,
                    "flops": 2.0 * m * weights, "best_s": best, "median_s": median, "repeats": repeats})  # fmt: skip
    return out


def main(argv: list[str]) -> int:
    import torch

    spec = json.loads(open(argv[1], encoding="utf-8").read())
    torch.manual_seed(0)
    torch.set_num_threads(int(spec["threads"]))
    for model, config in spec["models"].items():
        for row in _time_pass(model, config, [int(t) for t in spec["tokens"]], int(spec["repeats"])):
            row["threads"] = torch.get_num_threads()
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
