"""The engine steps a served request lives through: a replay of vLLM's scheduler for a client (beyond the paper).

Which steps a request waits through, prefills in and decodes in depends only on token counts, never on how long a
step takes, so the replay is timing-free (`replay`) and the model times its steps afterwards
(`slimlib.model.served`). Each step has a budget of ``N`` tokens (``--max-num-batched-tokens``) and at most
``slots`` running requests (``--max-num-seqs``, or fewer where the KV pool holds fewer):

* **chunked** (vLLM V1, and V0 with chunked prefill): a step first gives every running request that has its prompt
  one token to decode, then continues the prompts still being prefilled, then admits waiting requests in arrival
  order while a slot is free, each prompt taking what is left of the budget (a prompt may span steps); a request
  whose prompt completes samples its first token in that step.
* **whole prompts** (V0 without chunked prefill): a step with waiting requests and free slots prefills as many of
  their prompts as the slots and the token budget take (at least one), and no decode; otherwise it decodes every
  running request.

Clients (`CLIENTS`): ``static`` (all B requests at once, none after: an offline batch), ``concurrency`` (a closed
loop of B clients, as ``vllm bench serve --max-concurrency B``: a client sends its next request when its last one
ends; that request arrives while the engine runs its next step, so it waits for that step, unless the engine is
idle, and it is scheduled in the step after) and ``burst`` (all requests at once, the server holding ``slots``:
``--request-rate inf`` without ``--max-concurrency``). A served engine that is idle when requests arrive starts
its step with the first of them alone; the others, sent a moment later, arrive during that step (measured,
`data/engine-cpu-amx-arrivals`: alone in 72% of such waves, first in 94%), so a closed loop's wave keeps a leader
one step ahead of the rest. Requests queued while the engine ran, and an offline batch (``static``), are all
there for the next step. A closed loop replays ``n_requests`` requests (the benchmark's ``--num-prompts``) and
scores them all, as the benchmark does; without a count it replays `WARM_WAVES` + `MEASURED_WAVES` waves of B and
scores the last ones, one more wave keeping the engine full while they end: the steady state.

Requests that share their whole history are replayed together (a cohort), and steps in which nothing but the same
decodes happens are replayed at once, so a replay costs a few cohorts per wave, not one loop per token.

For every scored request the replay gives three windows of steps, each as the sums ``(steps with a decode, decodes,
prefill tokens)`` over its steps (`Windows`): ``wait`` (arrival to the step before its first), ``ttft`` (its first
step to the one that samples its first token) and ``e2e`` (its first step to its last).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from slimlib.errors import DataError

#: the client modes the replay knows (module docstring)
CLIENTS = ("static", "concurrency", "burst")
#: waves of B requests replayed before and after the steady state is scored, when the closed loop's count is unknown
WARM_WAVES = 2
MEASURED_WAVES = 4
#: the most requests a replay scores (a larger benchmark is scored on its first ones and its steady state)
MAX_REQUESTS = 20000


@dataclass(frozen=True)
class Windows:
    """Per scored cohort (`weight` requests each): the ``wait``, ``ttft`` and ``e2e`` windows (module docstring),
    each an (n, 3) array of (steps with a decode, decodes, prefill tokens)."""

    weight: np.ndarray
    wait: np.ndarray
    ttft: np.ndarray
    e2e: np.ndarray
    steps: int = 0


def _need(value: float, name: str, low: int = 1) -> int:
    if not math.isfinite(value) or value < low or value != round(value):
        raise DataError(f"{name} = {value!r}: the scheduler replay needs a whole number >= {low}")
    return int(value)


@lru_cache(maxsize=4096)
def replay(
    client: str, batch: int, input_len: int, output_len: int, budget: int, slots: int, chunked: bool,
    n_requests: int = 0,
) -> Windows:  # fmt: skip
    """The windows of the scored requests of `client` at concurrency `batch` (module docstring): `slots` running at
    most, `budget` tokens a step, `chunked` prefill or whole prompts; `n_requests` the requests replayed (0: `batch`
    for ``static`` and ``burst``, the steady state for ``concurrency``)."""
    if client not in CLIENTS:
        raise DataError(f"client {client!r}: the replay knows {', '.join(CLIENTS)}")
    b = _need(batch, "batch_size")
    il = _need(input_len, "input_len")
    ol = _need(output_len, "output_len")
    n_budget = _need(budget, "max_num_batched_tokens")
    cap = _need(slots, "slots")
    if chunked and n_budget < cap:
        raise DataError(
            f"max_num_batched_tokens {n_budget} is below the {cap} sequences that run at once: vLLM refuses a token "
            "budget below --max-num-seqs; give a larger budget or a smaller batch"
        )
    if (
        client == "concurrency" and not n_requests
    ):  # the steady state: one more wave keeps the last scored full
        scored = (WARM_WAVES * b, (WARM_WAVES + MEASURED_WAVES) * b)
        total = scored[1] + b
    else:
        total = b if client == "static" else min(n_requests or b, MAX_REQUESTS)
        scored = (0, total)
    first_wave = total if client == "burst" else min(b, total)
    done, steps = _run(
        client == "concurrency", client != "static", il, ol, n_budget, cap, chunked, scored, total, first_wave
    )
    if not done:
        raise DataError("the scheduler replay scored no request")
    return _windows(done, steps)


_Counters = tuple[int, int, int]
#: the counters of an event that has not happened yet
_UNSET: _Counters = (-1, -1, -1)


class _Cohort:
    """Requests with one history: how many, prompt tokens still to prefill, the step counters (steps with a decode,
    decodes, prefill tokens) when they arrived, were first scheduled and sampled their first token (`_UNSET` until
    then), and the arrival order of the first of them."""

    __slots__ = ("size", "left", "arrived", "started", "first", "order")

    def __init__(
        self, size: int, left: int, arrived: _Counters, started: _Counters, first: _Counters, order: int,
    ) -> None:  # fmt: skip
        self.size, self.left, self.arrived, self.started, self.first, self.order = (
            size, left, arrived, started, first, order,
        )  # fmt: skip


def _split(c: _Cohort, n: int) -> _Cohort:
    """Take `n` of cohort `c`'s requests into a new cohort (the same history)."""
    c.size -= n
    return _Cohort(n, c.left, c.arrived, c.started, c.first, c.order)


def _prefill(cohorts: list[_Cohort], tokens: int) -> list[_Cohort]:
    """Give `tokens` prompt tokens to `cohorts` in order (each request all it needs, the last a part); returns the
    cohorts as they stand after the step (split where a cohort's requests end apart)."""
    out = []
    for c in cohorts:
        if tokens <= 0:
            out.append(c)
            continue
        size, left = c.size, c.left
        full = min(size, tokens // left)
        if full == size:
            tokens -= size * left
            c.left = 0
            out.append(c)
            continue
        if full:
            done = _split(c, full)
            tokens -= full * left
            done.left = 0
            out.append(done)
        if tokens > 0:  # one request gets a part of its prompt
            part = _split(c, 1) if c.size > 1 else c
            part.left -= tokens
            tokens = 0
            out.append(part)
            if part is not c:
                out.append(c)
        else:
            out.append(c)
    return out


def _run(
    closed: bool, alone: bool, il: int, ol: int, budget: int, slots: int, chunked: bool, scored: tuple[int, int],
    total: int, first_wave: int,
) -> tuple[list[tuple[_Cohort, _Counters]], int]:  # fmt: skip
    """The scheduler's run (module docstring): `first_wave` requests at once, and with `closed` (a closed loop)
    one more sent for each that ends, until `total` are sent or the `scored` ones (their arrival orders) have all
    ended; with `alone`, a step that requests arrived for while the engine was idle admits the first alone.
    Returns the scored cohorts with the counters when each ended, in the order they ended, and the steps.

    A decoding request has generated ``1 +`` (steps with a decode since its first token) tokens, so decoding
    cohorts are kept in the order of their first token and only the oldest can end. One function with local
    state: the replay is called for every batch size the advisor searches."""
    s0, s1 = scored
    target = s1 - s0
    last = ol - 1
    decoding: deque[_Cohort] = deque()  # prompt done, by first token
    n_decoding = 0
    prefilling: list[_Cohort] = []  # scheduled, prompt not done, in scheduling order
    n_prefilling = 0
    waiting: deque[_Cohort] = deque()
    future: deque[tuple[int, _Cohort]] = deque()  # (step from which schedulable, cohort), in arrival order
    done: list[tuple[_Cohort, _Counters]] = []
    a = d = p = steps = 0  # steps with a decode, decodes, prefill tokens: cumulative; steps
    n_arrived = scored_done = 0
    n, after = first_wave, 0
    while True:
        if n:  # `n` requests sent now, schedulable `after` steps from now; no cohort straddles a scored edge
            now = (a, d, p)
            end = n_arrived + n
            for edge in (s0, s1, end):
                if n_arrived < edge <= end:
                    c = _Cohort(edge - n_arrived, il, now, _UNSET, _UNSET, n_arrived)
                    if after:
                        future.append((steps + after, c))
                    else:
                        waiting.append(c)
                    n_arrived = edge
        if not (decoding or prefilling or waiting or future):
            break
        if future:  # the arrivals due by this step join the queue; an idle engine waits for the next ones
            # (`future` is in arrival order, so by due step too: those due are a head of it)
            if not decoding and not prefilling and not waiting:
                first = future[0][0]
                while future and future[0][0] == first:
                    waiting.append(future.popleft()[1])
            while future and future[0][0] <= steps:
                waiting.append(future.popleft()[1])
        free = slots - n_decoding - n_prefilling
        if (not waiting or free <= 0) and not prefilling:
            # decode-only steps until the next finish or arrival: every running request generates a token a step
            j = last - (a - decoding[0].first[0])
            if future:
                j = min(j, max(future[0][0] - steps, 1))
            a += j
            d += j * n_decoding
            steps += j
        else:
            now = (a, d, p)
            if alone and not n_decoding and not prefilling and waiting and waiting[0].arrived == now:
                free = min(free, 1)  # arrived while the engine was idle: it starts with the first
            if chunked:
                dec = n_decoding
                tokens = max(budget - dec, 0)
                need = sum(c.size * c.left for c in prefilling)
                used = min(need, tokens)
                partial = _prefill(prefilling, used) if prefilling else prefilling
                tokens -= used
            else:
                dec = 0
                partial = prefilling
                tokens = used = 0
                free = min(free, max(budget // il, 1))
            # waiting requests admitted into free slots (chunked: each takes what is left of the budget)
            admitted: list[_Cohort] = []
            took = 0
            while waiting and free > 0 and (not chunked or tokens - took > 0):
                c = waiting[0]
                take = min(c.size, free)
                if chunked:
                    # the last one may get a part of its prompt
                    take = min(take, -(-(tokens - took) // c.left))
                part = _split(c, take) if take < c.size else waiting.popleft()
                part.started = now
                admitted.append(part)
                free -= take
                took += min(take * part.left, tokens - took) if chunked else take * part.left
            if chunked:
                scheduled = partial + _prefill(admitted, took)
            else:
                for c in admitted:
                    c.left = 0
                scheduled = partial + admitted
            # the step: `dec` decodes, prompt tokens; the prompts that completed sample their first token
            if dec:
                a += 1
            d += dec
            p += used + took
            steps += 1
            now = (a, d, p)
            prefilling = []
            n_prefilling = 0
            for c in scheduled:
                if c.left:
                    prefilling.append(c)
                    n_prefilling += c.size
                else:
                    c.first = now
                    decoding.append(c)
                    n_decoding += c.size
        now = (a, d, p)
        finished = 0
        while decoding:
            c = decoding[0]
            if a - c.first[0] < last:
                break
            decoding.popleft()
            n_decoding -= c.size
            finished += c.size
            if s0 <= c.order < s1:
                done.append((c, now))
                scored_done += c.size
        n = 0
        if closed and n_arrived < total and finished:
            # sent when the last ends, so it waits for the next step
            n, after = min(finished, total - n_arrived), 1
        if scored_done == target:
            break
    return done, steps


def _windows(done: list[tuple[_Cohort, _Counters]], steps: int) -> Windows:
    rows = np.array([c.arrived + c.started + c.first + end for c, end in done], dtype=np.float64)
    arrived, started, first, ended = rows[:, 0:3], rows[:, 3:6], rows[:, 6:9], rows[:, 9:12]
    weight = np.array([c.size for c, _ in done], dtype=np.float64)
    return Windows(weight, started - arrived, first - started, ended - started, steps)
