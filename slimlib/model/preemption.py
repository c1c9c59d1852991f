"""Preemption past the KV pool in a static batch: how many prompts vLLM recomputes (beyond the paper).

A static batch of B requests (all arriving together, as in offline batch sweeps and LLM-Inference-Bench) whose KV
cache at full length exceeds the pool does not run in clean waves of ``B_kv`` requests. vLLM's scheduler (the V0
engine of vLLM 0.5-0.6, block manager v1; `recompute_counts` replays it):

* it admits waiting requests from the front of the queue while ``max_num_seqs`` allows and the pool keeps the
  watermark (1% of the blocks) after the prompt's blocks (``BlockSpaceManager.can_allocate``); a step that admits
  any runs only prefills, so admissions continue until one does not fit, and each prefill samples a first token;
* a decode step goes through the running requests in admission order, each needing one free block before it
  appends (``can_append_slots``: at least one free block per sequence); while none is free it preempts the last
  running request by recompute (its blocks freed, it goes back to the front of the queue with the tokens it has
  generated); a request takes a new block when its stored tokens fill the last one;
* a preempted request, admitted again, recomputes its prompt and every token it had generated as one prefill.

Requests are admitted by their prompts and then grow, so past the pool the engine admits about ``N_kv / IL``
requests, preempts about half of them as they grow (for IL = OL) and recomputes them later: work a model of
clean waves does not see. The count depends only on the batch, the lengths and the pool, never on a fitted
parameter.
"""

from __future__ import annotations

import math
from collections import deque
from functools import lru_cache

import numpy as np

from slimlib.errors import DataError

#: vLLM's default ``watermark`` of the block manager: the share of the blocks an admission must leave free
WATERMARK = 0.01


def _blocks(tokens: int, block: int) -> int:
    return -(-int(tokens) // block)


@lru_cache(maxsize=4096)
def recompute_counts(
    batch: int, input_len: int, output_len: int, kv_tokens: int, block_size: int = 16, max_num_seqs: int = 256,
    watermark: float = WATERMARK,
) -> tuple[int, int]:  # fmt: skip
    """(preemptions, recomputed tokens) of a static batch of `batch` requests of `input_len` prompt tokens that
    each generate `output_len`, on a pool of `kv_tokens` KV token slots (module docstring); (0, 0) when the batch
    fits the pool at full length. A request the pool cannot hold at full length is a DataError
    (`slimlib.model.validity` refuses such a row first)."""
    b, il, ol, block = int(batch), int(input_len), int(output_len), int(block_size)
    n_blocks = int(kv_tokens) // block
    reserve = watermark * n_blocks
    if b <= 0 or ol <= 0:
        return 0, 0
    if min(b, int(max_num_seqs)) * _blocks(il + ol, block) <= n_blocks - reserve:
        return 0, 0
    if n_blocks - _blocks(il + ol, block) < reserve:
        raise DataError(
            f"a request of {il} + {ol} tokens does not fit a pool of {kv_tokens} KV tokens: no batch of it can run; "
            "give a larger pool (gpu_memory_utilization, kv_cache_dtype, tensor_parallel) or shorter requests"
        )
    waiting: deque[int] = deque([0] * b)  # generated tokens of each waiting request
    g = np.zeros(0, dtype=np.int64)  # generated tokens of the running requests, in admission order
    held = np.zeros(0, dtype=np.int64)  # their blocks
    free = n_blocks
    preemptions = recomputed = 0
    while waiting or g.size:
        admitted: list[int] = []
        while waiting and g.size + len(admitted) < max_num_seqs:
            need = _blocks(il + waiting[0], block)
            if free - need < reserve:
                break
            done_before = waiting.popleft()
            free -= need
            admitted.append(done_before)
            if done_before > 0:
                recomputed += il + done_before
        if admitted:
            new = np.array(admitted, dtype=np.int64)
            g = np.concatenate([g, new + 1])  # the prefill samples a token
            held = np.concatenate(
                [held, np.array([_blocks(il + x, block) for x in admitted], dtype=np.int64)]
            )
        else:
            if not g.size:  # pragma: no cover - excluded by the fit check above
                raise RuntimeError("no request runs")
            stored = il + g - 1  # tokens whose KV is stored; the step stores the last sampled one
            to_need = (-stored) % block  # steps until a request's next token opens a block
            to_finish = ol - g
            jump = int(min(to_need.min(), to_finish.min()))
            if jump > 0:  # no block and no admission changes before then
                g = g + jump
            else:
                need = (stored % block == 0).astype(np.int64)
                i = 0
                while i < g.size:
                    if free < 1:  # preempt the last running request (recompute)
                        free += int(held[-1])
                        waiting.appendleft(int(g[-1]))
                        g, held, need = g[:-1], held[:-1], need[:-1]
                        preemptions += 1
                        continue
                    free -= int(need[i])
                    held[i] += need[i]
                    i += 1
                g = g + 1
        finished = g >= ol
        if finished.any():
            free += int(held[finished].sum())
            g, held = g[~finished], held[~finished]
    return preemptions, recomputed


def recompute_features(
    batch: np.ndarray, effective: np.ndarray, input_len: np.ndarray, output_len: np.ndarray, kv_tokens: np.ndarray,
    block_size: np.ndarray, max_num_seqs: np.ndarray, static: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Per row: the requests recomputed per wave of `effective` (``B_eff``) requests, ``preemptions B_eff / B``,
    and their mean recomputed length in tokens (0 and 0 where none, or where the row is not a static batch or has
    no pool). A row whose request the pool cannot hold at full length: DataError naming its position."""
    n = len(batch)
    seqs, length = np.zeros(n), np.zeros(n)
    for i in range(n):
        kv = float(kv_tokens[i])
        if not static[i] or not math.isfinite(kv) or kv <= 0 or effective[i] >= batch[i]:
            continue
        try:
            pre, tokens = recompute_counts(int(round(batch[i])), int(round(input_len[i])), int(round(output_len[i])),
                                           int(kv), int(block_size[i]), int(max_num_seqs[i]))  # fmt: skip
        except DataError as exc:
            raise DataError(f"row {i + 1} of the table: {exc}") from None
        if pre:
            seqs[i] = pre * effective[i] / batch[i]
            length[i] = tokens / pre
    return seqs, length
