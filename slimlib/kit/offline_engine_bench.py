"""The CPU engine without its serving front end: vLLM's offline ``LLM.generate`` on a static batch, in one process.

The served campaign (``data/engine-cpu``) times the engine behind its OpenAI server with the benchmark client on the
same 2-core host, so the API server's and the client's per-token work share the cores with the engine. This times
the same model folders, batch sizes and lengths with the engine alone: the engine core in-process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``) on one OMP thread as the served worker has (the caller's environment,
`slimlib.data.engine_offline.ENGINE_ENV`), random weights (``load_format="dummy"``), the server's ``max_num_seqs`` and
``max_model_len``, fixed lengths (``ignore_eos``, ``min_tokens = max_tokens = OL``), one static batch of B prompts
per run after a warm-up batch, prefix caching off and every run's prompts its own (vLLM 0.32 caches prefixes by
default: a prompt an earlier run prefilled would skip its prefill, and a run would time part of its work).

Run it with the engine's interpreter (it needs vLLM, not slimlib): ``python offline_engine_bench.py SPEC``, ``SPEC``
a JSON file ``{"model": name, "folder": path, "max_num_seqs": n, "max_model_len": n, "repeat": r, "runs":
[[B, IL, OL], ...]}``; it prints one JSON object per run (wall seconds, the tokens generated and prompted, the
process's CPU seconds, the torch thread count, whether the engine caches prefixes). ``slim bench offline`` runs it and writes the table and its manifest
(`slimlib.data.engine_offline`).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from typing import Any

#: vocabulary range of the synthetic prompt token ids (below every campaign model's vocabulary)
TOKEN_RANGE = (10, 6000)


def prompt_ids(i: int, input_len: int, seed: int) -> list[int]:
    """Deterministic token ids of prompt `i` (distinct per prompt and seed, so no prefix is shared)."""
    lo, hi = TOKEN_RANGE
    return [lo + (7919 * (i + 1) + 104729 * seed + 31 * j * (i + 3)) % (hi - lo) for j in range(input_len)]


def run_seed(repeat: int, run: int) -> int:
    """The prompt seed of run `run` (0 = warm-up) of repeat `repeat`: distinct for every run of a campaign."""
    return 1 + repeat * 100_003 + run


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return float(r.ru_utime + r.ru_stime)


def main(spec: dict[str, Any]) -> None:
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    import torch
    from vllm import LLM, SamplingParams

    llm = LLM(model=spec["folder"], load_format="dummy", max_num_seqs=int(spec["max_num_seqs"]),
              max_model_len=int(spec["max_model_len"]), seed=0, enable_prefix_caching=False)  # fmt: skip
    caching = bool(llm.llm_engine.vllm_config.cache_config.enable_prefix_caching)
    repeat = int(spec["repeat"])

    def batch(b: int, il: int, ol: int, run: int) -> tuple[float, float, int, int, int]:
        sp = SamplingParams(max_tokens=ol, min_tokens=ol, ignore_eos=True, temperature=1.0)
        prompts = [{"prompt_token_ids": prompt_ids(i, il, run_seed(repeat, run))} for i in range(b)]
        c0, t0 = _cpu_s(), time.perf_counter()
        outs = llm.generate(prompts, sp, use_tqdm=False)
        wall, cpu = time.perf_counter() - t0, _cpu_s() - c0
        done = sum(1 for o in outs if o.finished)
        return (
            wall,
            cpu,
            done,
            sum(len(o.outputs[0].token_ids) for o in outs),
            sum(len(o.prompt_token_ids or []) for o in outs),
        )

    batch(2, 64, 8, 0)  # warm-up: compiled graphs and caches, not kept
    for run, (b, il, ol) in enumerate(spec["runs"], start=1):
        wall, cpu, done, out_tok, in_tok = batch(int(b), int(il), int(ol), run)
        row = {"model": spec["model"], "batch_size": int(b), "input_len": int(il), "output_len": int(ol),
               "repeat": repeat, "e2e_s": wall, "process_cpu_s": cpu, "completed": done,
               "output_tokens": out_tok, "prompt_tokens": in_tok, "threads": torch.get_num_threads(),
               "prefix_caching": caching}  # fmt: skip
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as fh:
        main(json.load(fh))
