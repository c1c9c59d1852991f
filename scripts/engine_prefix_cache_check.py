"""Does vLLM's CPU engine skip the prefill of a prompt it has prefilled before? A check, not a campaign.

Run with the engine's interpreter and environment (scripts/engine_env.sh; `slimlib.data.engine_offline.ENGINE_ENV`):

    OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=0 VLLM_CPU_KVCACHE_SPACE=4 VLLM_TARGET_DEVICE=cpu \\
        .venv-engine/bin/python scripts/engine_prefix_cache_check.py MODEL_FOLDER [--input-len 2048]

MODEL_FOLDER from `slim bench model NAME --out MODEL_FOLDER` (random weights). For prefix caching left at the
engine's default and then off, it prints the wall seconds of one-token generations: prompt 0, prompt 0 again, prompts
0 and 1 together, new prompts 2 and 3, new prompt 4. With caching on, a repeated prompt takes a fraction of a new
one's time and a batch of one seen and one new prompt about the time of one: why the offline campaign now runs with
caching off and prompts distinct per run (`slimlib.kit.offline_engine_bench`).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

#: the offline benchmark's module, loaded by path (the engine's interpreter has no slimlib installed; the module
#: needs only the standard library): its prompts are the ones checked here
_BENCH = Path(__file__).resolve().parents[1] / "slimlib" / "kit" / "offline_engine_bench.py"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--input-len", type=int, default=2048)
    a = ap.parse_args()
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    from vllm import LLM, SamplingParams

    spec = importlib.util.spec_from_file_location("offline_engine_bench", _BENCH)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    def ids(i: int, n: int) -> list[int]:
        return bench.prompt_ids(i, n, seed=0)

    sp = SamplingParams(max_tokens=1, min_tokens=1, ignore_eos=True)
    for caching in (None, False):  # None: the engine's default
        kw = {} if caching is None else {"enable_prefix_caching": False}
        llm = LLM(
            model=a.folder, load_format="dummy", max_num_seqs=16, max_model_len=a.input_len + 64, seed=0, **kw
        )
        on = llm.llm_engine.vllm_config.cache_config.enable_prefix_caching
        llm.generate([{"prompt_token_ids": ids(99, 64)}], sp, use_tqdm=False)  # warm-up
        for label, idx in (("prompt 0", [0]), ("prompt 0 again", [0]), ("prompts 0, 1", [0, 1]),
                           ("new prompts 2, 3", [2, 3]), ("new prompt 4", [4])):  # fmt: skip
            t0 = time.perf_counter()
            llm.generate([{"prompt_token_ids": ids(i, a.input_len)} for i in idx], sp, use_tqdm=False)
            print(f"prefix caching {'on ' if on else 'off'} ({'default' if caching is None else 'set'}): "
                  f"{label:<17} {time.perf_counter() - t0:.3f} s", flush=True)  # fmt: skip
        del llm


if __name__ == "__main__":
    main()
