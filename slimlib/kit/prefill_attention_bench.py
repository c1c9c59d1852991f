"""The CPU engine's prefill attention, timed as the engine runs it: one prompt's causal self-attention per layer.

A prefill of a prompt of ``L`` tokens runs, in every layer, the attention of its ``L`` queries over its own ``L`` keys
and values. This times that call with vLLM's own CPU attention kernel (``cpu_attention_with_kv_cache``, the op the
``CPU_ATTN`` backend calls; bf16, the ISA the backend picks, one 128-token KV block size as the engine uses) on random
bf16 tensors of the model's shapes (`attention_shape`: query heads, KV heads, head width), once with the causal
mask the engine uses and once without it, at `threads` torch threads (the engine's worker runs one OMP thread on a
2-core host). Causal over non-causal near 0.5 says the kernel skips the masked half. Each call is repeated after a
warm-up; the best repeat is kept (STREAM's rule), the median beside it.

Run it with the engine's interpreter (it needs torch and vLLM, not slimlib): ``python prefill_attention_bench.py
SPEC``, ``SPEC`` a JSON file ``{"models": {name: config}, "lengths": [...], "repeats": n, "threads": t}``; it prints
one JSON object per (model, length). ``slim bench attention`` runs it and writes the table and its manifest
(`slimlib.data.prefill_attention`).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

#: the KV-cache block size of the engine's runs (vLLM's CPU default)
BLOCK_SIZE = 128


def attention_shape(config: dict[str, Any]) -> tuple[int, int, int]:
    """(query heads, KV heads, head width) of a model config (OPT: as many KV heads as query heads)."""
    heads = int(config["num_attention_heads"])
    head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
    kv = int(config.get("num_key_value_heads") or heads)
    return heads, kv, head_dim


def _time_model(model: str, config: dict[str, Any], lengths: list[int], repeats: int) -> list[dict[str, Any]]:
    import torch
    from vllm import _custom_ops as ops
    from vllm.v1.attention.backends.cpu_attn import _get_attn_isa

    heads, kv_heads, head_dim = attention_shape(config)
    dtype = torch.bfloat16
    isa = _get_attn_isa(dtype, BLOCK_SIZE, head_dim)
    out = []
    for length in lengths:
        blocks = (length + BLOCK_SIZE - 1) // BLOCK_SIZE
        q = torch.randn(length, heads, head_dim).to(dtype)
        k = torch.randn(length, kv_heads, head_dim).to(dtype)
        v = torch.randn(length, kv_heads, head_dim).to(dtype)
        cache = torch.zeros(blocks, kv_heads, BLOCK_SIZE, 2 * head_dim, dtype=dtype)
        key_cache, value_cache = cache.view(blocks, kv_heads, 2 * BLOCK_SIZE, head_dim).chunk(2, dim=2)
        ops.cpu_attn_reshape_and_cache(k, v, key_cache, value_cache, torch.arange(length), isa)
        start = torch.tensor([0, length], dtype=torch.int32)
        seq_lens = torch.tensor([length], dtype=torch.int32)
        table = torch.arange(blocks, dtype=torch.int32).view(1, blocks)
        row: dict[str, Any] = {"model": model, "input_len": length, "n_heads": heads, "n_kv_heads": kv_heads,
                               "head_dim": head_dim, "isa": isa}  # fmt: skip
        for causal in (True, False):
            meta = ops.cpu_attn_get_scheduler_metadata(
                num_reqs=1, num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim, seq_lens=seq_lens,
                dtype=dtype, query_start_loc=start, causal=causal, sliding_window_size=-1, isa=isa,
                enable_kv_split=False,
            )  # fmt: skip
            call = {"query": q, "key_cache": key_cache, "value_cache": value_cache,
                    "output": torch.empty(length, heads, head_dim, dtype=dtype), "query_start_loc": start,
                    "seq_lens": seq_lens, "scale": head_dim**-0.5, "causal": causal, "alibi_slopes": None,
                    "sliding_window": -1, "block_table": table, "softcap": 0.0, "scheduler_metadata": meta,
                    "s_aux": None}  # fmt: skip

            def run(call: dict[str, Any] = call) -> None:
                ops.cpu_attention_with_kv_cache(**call)

            run()
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                run()
                times.append(time.perf_counter() - t0)
            times.sort()
            kind = "causal" if causal else "full"
            row[f"best_{kind}_s"], row[f"median_{kind}_s"] = times[0], times[len(times) // 2]
        row["repeats"] = repeats
        out.append(row)
    return out


#: Linux x86-64: the ``arch_prctl`` system call, its request for an extended state component, AMX's tile data
ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18


def allow_amx_tiles() -> None:
    """Ask Linux for the AMX tile state, as oneDNN does before its first AMX kernel. In the engine a GEMM has asked
    before the attention runs; called alone, the attention kernel's AMX path stops with an illegal instruction. A
    machine without AMX refuses the request, and the backend then picks another ISA; a CPU with AMX whose Linux
    refuses it is named on stderr."""
    import ctypes
    import platform

    if platform.system() != "Linux" or platform.machine() != "x86_64" or ctypes.sizeof(ctypes.c_void_p) != 8:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    args = (ctypes.c_long(ARCH_PRCTL), ctypes.c_long(ARCH_REQ_XCOMP_PERM), ctypes.c_long(XFEATURE_XTILEDATA))
    if libc.syscall(*args) != 0 and "amx_tile" in open("/proc/cpuinfo", encoding="utf-8").read():
        print(f"this Linux refused the AMX tile state (arch_prctl errno {ctypes.get_errno()}): the attention "
              "kernel's AMX path may stop with an illegal instruction (Linux 5.16 or newer grants it)",
              file=sys.stderr)  # fmt: skip


def main(argv: list[str]) -> int:
    import torch

    allow_amx_tiles()
    spec = json.loads(open(argv[1], encoding="utf-8").read())
    torch.manual_seed(0)
    torch.set_num_threads(int(spec["threads"]))
    for model, config in spec["models"].items():
        for row in _time_model(model, config, [int(n) for n in spec["lengths"]], int(spec["repeats"])):
            row["threads"] = torch.get_num_threads()
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
