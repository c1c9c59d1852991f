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
``--request-rate inf`` without ``--max-concurrency``). A closed loop replays ``n_requests`` requests (the
benchmark's ``--num-prompts``) and scores them all, as the benchmark does; without a count it replays `WARM_WAVES`
+ `MEASURED_WAVES` waves of B and scores the last ones, one more wave keeping the engine full while they end: the
steady state.

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


@dataclass(slots=True)
class _Cohort:
    """Requests with one history: how many, prompt tokens still to prefill, and the step counters when they
    arrived, were first scheduled and sampled their first token."""

    size: int
    left: int
    arrived: tuple[int, int, int] = (0, 0, 0)
    started: tuple[int, int, int] | None = None
    first: tuple[int, int, int] | None = None
    order: int = 0

    def split(self, n: int) -> _Cohort:
        """Take `n` of this cohort's requests into a new cohort (the same history)."""
        self.size -= n
        return _Cohort(n, self.left, self.arrived, self.started, self.first, self.order)


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
    state = _Replay(il, ol, n_budget, cap, chunked, scored)
    first_wave = total if client == "burst" else min(b, total)
    state.arrive(first_wave, 0)
    sent = first_wave
    while state.busy():
        finished = state.step()
        if client == "concurrency" and sent < total and finished:
            n = min(finished, total - sent)
            state.arrive(n, 1)  # sent when the last ends, so it waits for the next step
            sent += n
        if state.scored_done == scored[1] - scored[0]:
            break
    done = [(c, end) for c, end in state.done if scored[0] <= c.order < scored[1]]
    if not done:
        raise DataError("the scheduler replay scored no request")
    return _windows(done, state.steps)


class _Replay:
    """The scheduler's state. A decoding request has generated ``1 +`` (steps with a decode since its first token)
    tokens, so decoding cohorts are kept in the order of their first token and only the oldest can end."""

    def __init__(
        self, il: int, ol: int, budget: int, slots: int, chunked: bool, scored: tuple[int, int]
    ) -> None:
        self.il, self.ol, self.budget, self.slots, self.chunked = il, ol, budget, slots, chunked
        self.scored = scored
        self.scored_done = 0
        self.decoding: deque[_Cohort] = deque()  # prompt done, by first token
        self.n_decoding = 0
        self.prefilling: list[_Cohort] = []  # scheduled, prompt not done, in scheduling order
        self.n_prefilling = 0
        self.waiting: deque[_Cohort] = deque()
        self.future: list[tuple[int, _Cohort]] = []  # (step from which schedulable, cohort)
        self.done: list[tuple[_Cohort, tuple[int, int, int]]] = []  # (cohort, counters when it ended)
        self.a = self.d = self.p = 0  # steps with a decode, decodes, prefill tokens: cumulative
        self.steps = 0
        self.n_arrived = 0

    def snapshot(self) -> tuple[int, int, int]:
        return (self.a, self.d, self.p)

    def arrive(self, n: int, after: int) -> None:
        """`n` requests sent now (the end of the last step), schedulable `after` steps from now (0: at once; 1: after
        the step the engine runs meanwhile, unless it has nothing to run); a cohort never straddles either end of
        the scored requests."""
        for edge in self.scored:
            if self.n_arrived < edge < self.n_arrived + n:
                head = edge - self.n_arrived
                self.arrive(head, after)
                n -= head
        c = _Cohort(n, self.il, arrived=self.snapshot(), order=self.n_arrived)
        self.n_arrived += n
        if after == 0:
            self.waiting.append(c)
        else:
            self.future.append((self.steps + after, c))

    def busy(self) -> bool:
        return bool(self.decoding or self.prefilling or self.waiting or self.future)

    def _release(self) -> None:
        """Move the arrivals due by this step into the waiting queue; an idle engine waits for the next ones."""
        future, steps = self.future, self.steps
        if not future:
            return
        if not self.decoding and not self.prefilling and not self.waiting:
            first = min(due for due, _ in future)
            future = [(steps if due == first else due, c) for due, c in future]
        due = [c for d, c in future if d <= steps]
        if due:
            due.sort(key=_arrival_order)
            self.waiting.extend(due)
            future = [(d, c) for d, c in future if d > steps]
        self.future = future

    def step(self) -> int:
        """Run one step, or a run of identical decode-only steps; returns the requests that finished."""
        self._release()
        free = self.slots - self.n_decoding - self.n_prefilling
        if (not self.waiting or free <= 0) and not self.prefilling:
            return self._decode_run()
        return self._mixed_step(free) if self.chunked else self._prefill_step(free)

    def _decode_run(self) -> int:
        """Decode-only steps until the next finish or arrival: every running request generates one token a step."""
        oldest = self.decoding[0].first
        assert oldest is not None
        j = self.ol - 1 - (self.a - oldest[0])
        if self.future:
            j = min(j, max(min(d for d, _ in self.future) - self.steps, 1))
        self.a += j
        self.d += j * self.n_decoding
        self.steps += j
        return self._finish()

    def _admit(self, free: int, tokens: int | None) -> tuple[list[_Cohort], int]:
        """Waiting requests admitted into `free` slots (and, chunked, the `tokens` left of the budget: each takes
        what is left, none takes 0); returns the admitted cohorts and the tokens they prefill."""
        admitted, used = [], 0
        while self.waiting and free > 0 and (tokens is None or tokens - used > 0):
            c = self.waiting[0]
            take = min(c.size, free)
            if tokens is not None:
                take = min(take, -(-(tokens - used) // c.left))  # the last one may get a part of its prompt
            part = c.split(take) if take < c.size else self.waiting.popleft()
            part.started = (self.a, self.d, self.p)
            admitted.append(part)
            free -= take
            used += take * part.left if tokens is None else min(take * part.left, tokens - used)
        return admitted, used

    def _prefill(self, cohorts: list[_Cohort], tokens: int) -> list[_Cohort]:
        """Give `tokens` prompt tokens to `cohorts` in order (each request all it needs, the last a part);
        returns the cohorts as they stand after the step (split where a cohort's requests end apart)."""
        out = []
        for c in cohorts:
            if tokens <= 0:
                out.append(c)
                continue
            full = min(c.size, tokens // c.left)
            if full == c.size:
                tokens -= c.size * c.left
                c.left = 0
                out.append(c)
                continue
            if full:
                done = c.split(full)
                tokens -= full * done.left
                done.left = 0
                out.append(done)
            if tokens > 0:  # one request gets a part of its prompt
                part = c.split(1) if c.size > 1 else c
                part.left -= tokens
                tokens = 0
                out.append(part)
                if part is not c:
                    out.append(c)
            else:
                out.append(c)
        return out

    def _mixed_step(self, free: int) -> int:
        d = self.n_decoding
        left = max(self.budget - d, 0)
        need = sum(c.size * c.left for c in self.prefilling)
        used = min(need, left)
        partial = self._prefill(self.prefilling, used)
        admitted, took = self._admit(free, left - used)
        return self._end_step(d, used + took, partial + self._prefill(admitted, took))

    def _prefill_step(self, free: int) -> int:
        admitted, took = self._admit(min(free, max(self.budget // self.il, 1)), None)
        for c in admitted:
            c.left = 0
        return self._end_step(0, took, self.prefilling + admitted)

    def _end_step(self, d: int, p: int, scheduled: list[_Cohort]) -> int:
        """Count the step (`d` decodes, `p` prompt tokens); the `scheduled` prompts that completed sample their
        first token and decode from the next step."""
        if d:
            self.a += 1
            self.d += d
        self.p += p
        self.steps += 1
        prefilling: list[_Cohort] = []
        n_prefilling = 0
        first = (self.a, self.d, self.p)
        for c in scheduled:
            if c.left:
                prefilling.append(c)
                n_prefilling += c.size
            else:
                c.first = first
                self.decoding.append(c)
                self.n_decoding += c.size
        self.prefilling, self.n_prefilling = prefilling, n_prefilling
        return self._finish()

    def _finish(self) -> int:
        end, ended = (self.a, self.d, self.p), 0
        decoding, last = self.decoding, self.a - self.ol + 1  # a cohort whose first token came by `last` ends
        while decoding:
            c = decoding[0]
            assert c.first is not None
            if c.first[0] > last:
                break
            decoding.popleft()
            self.n_decoding -= c.size
            self.done.append((c, end))
            ended += c.size
            if self.scored[0] <= c.order < self.scored[1]:
                self.scored_done += c.size
        return ended


def _arrival_order(c: _Cohort) -> int:
    return c.order


def _windows(done: list[tuple[_Cohort, tuple[int, int, int]]], steps: int) -> Windows:
    arrived = np.array([c.arrived for c, _ in done], dtype=float)
    started = np.array([c.started for c, _ in done], dtype=float)
    first = np.array([c.first for c, _ in done], dtype=float)
    ended = np.array([end for _, end in done], dtype=float)
    weight = np.array([c.size for c, _ in done], dtype=float)
    return Windows(weight, started - arrived, first - started, ended - started, steps)
