"""The scheduler replay (`slimlib.model.schedule`) against a request-by-request reading of its rules."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from slimlib.errors import DataError
from slimlib.model.schedule import MEASURED_WAVES, WARM_WAVES, replay


def _naive(client, b, il, ol, budget, slots, chunked, n_requests=0):
    """One request at a time, one step at a time: the module docstring's rules with no cohorts and no runs of
    decode steps. Returns the scored requests' windows as sorted rows of 9 numbers."""
    if client == "concurrency" and not n_requests:  # steady state: warm waves, scored waves, one more wave
        scored = (WARM_WAVES * b, (WARM_WAVES + MEASURED_WAVES) * b)
        total = scored[1] + b
    else:
        total = b if client == "static" else n_requests or b
        scored = (0, total)
    count = [0, 0, 0]
    step = 0
    reqs, running, waiting, future = [], [], [], []

    def send(n, due):
        for _ in range(n):
            r = {"order": len(reqs), "left": il, "gen": 0, "arrived": tuple(count), "due": due}
            reqs.append(r)
            (waiting if due is None else future).append(r)

    send(total if client == "burst" else min(b, total), None)
    sent = len(reqs)
    while running or waiting or future:
        if not running and not waiting and future:
            first = min(r["due"] for r in future)
            for r in future:
                if r["due"] == first:
                    r["due"] = step
        for r in sorted((r for r in future if r["due"] <= step), key=lambda r: r["order"]):
            future.remove(r)
            waiting.append(r)
        free = slots - len(running)
        if client != "static" and not running and waiting and waiting[0]["arrived"] == tuple(count):
            free = min(free, 1)  # requests that arrived at an idle engine: it starts with the first alone
        decoding, d, p = [], 0, 0
        if chunked:
            decoding = [r for r in running if r["left"] == 0]
            d = len(decoding)
            room = max(budget - d, 0)
            for r in [r for r in running if r["left"] > 0]:
                take = min(r["left"], room)
                r["left"] -= take
                room -= take
                p += take
            while waiting and free > 0 and room > 0:
                r = waiting.pop(0)
                r["started"] = tuple(count)
                take = min(r["left"], room)
                r["left"] -= take
                room -= take
                p += take
                free -= 1
                running.append(r)
        elif waiting and free > 0:
            fits = max(budget // il, 1)  # whole prompts within the step's token budget, at least one
            for r in waiting[: min(free, fits)]:
                r["started"] = tuple(count)
                p += r["left"]
                r["left"] = 0
                running.append(r)
            del waiting[: min(free, fits)]
        else:
            decoding = list(running)
            d = len(decoding)
        count = [count[0] + (d > 0), count[1] + d, count[2] + p]
        step += 1
        for r in decoding:
            r["gen"] += 1
        for r in running:
            if r["left"] == 0 and "first" not in r:
                r["first"], r["gen"] = tuple(count), 1
        ended = [r for r in running if r["left"] == 0 and r["gen"] >= ol]
        for r in ended:
            r["end"] = tuple(count)
            running.remove(r)
        if client == "concurrency" and sent < total and ended:
            n = min(len(ended), total - sent)
            send(n, step + 1)
            sent += n
    rows = []
    for r in reqs:
        if not scored[0] <= r["order"] < scored[1]:
            continue
        a, s, f, e = (np.array(r[k]) for k in ("arrived", "started", "first", "end"))
        rows.append(tuple(np.concatenate([s - a, f - s, e - s])))
    return sorted(rows)


def _expanded(w):
    rows = []
    for i, n in enumerate(w.weight.astype(int)):
        rows += [tuple(np.concatenate([w.wait[i], w.ttft[i], w.e2e[i]]))] * n
    return sorted(rows)


CASES = [
    # client, B, IL, OL, budget, slots, chunked, n_requests
    *[
        ("static", b, il, ol, n, s, True, 0)
        for b, il, ol, n, s in itertools.product((1, 3, 8), (5, 40), (1, 2, 9), (16, 64, 4096), (2, 8))
    ],
    *[
        ("static", b, il, ol, n, s, False, 0)
        for b, il, ol, n, s in itertools.product((1, 3, 8), (5, 40), (1, 9), (16, 1 << 40), (2, 8))
    ],
    *[
        ("concurrency", b, il, ol, n, s, c, k)
        for b, il, ol, n, s, c, k in itertools.product(
            (1, 4, 7), (5, 33), (1, 2, 9), (16, 4096), (4, 7), (True, False), (0, 11)
        )
    ],
    *[
        ("burst", b, il, ol, n, b, c, k)
        for b, il, ol, n, c, k in itertools.product(
            (2, 5), (5, 33), (1, 3, 8), (16, 4096), (True, False), (5, 23)
        )
    ],
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_replay_matches_request_by_request_rules(case):
    client, b, il, ol, budget, s, chunked, k = case
    assert _expanded(replay(client, b, il, ol, budget, s, chunked, k)) == _naive(
        client, b, il, ol, budget, s, chunked, k
    )


def test_static_batch_in_one_budget_prefills_then_decodes_in_lock_step():
    w = replay("static", 8, 100, 20, 4096, 8, True)
    assert w.weight.tolist() == [8.0]
    assert w.wait.tolist() == [[0, 0, 0]]
    assert w.ttft.tolist() == [[0, 0, 800]]  # every prompt in the first step, which samples the first tokens
    assert w.e2e.tolist() == [[19, 19 * 8, 800]]


def test_a_small_budget_spreads_prompts_and_delays_later_first_tokens():
    w = replay("static", 8, 100, 20, 256, 8, True)
    ttft_steps = w.ttft[:, 0] + (w.ttft[:, 2] > 0)  # decode steps plus at least the prefill step
    assert w.weight.sum() == 8
    assert np.all(w.ttft[:, 2] >= 100)
    assert ttft_steps.max() > ttft_steps.min()


def test_closed_loop_scores_its_steady_state_and_burst_queues_past_the_slots():
    steady = replay("concurrency", 4, 64, 16, 4096, 4, True)
    assert steady.weight.sum() == MEASURED_WAVES * 4
    burst = replay("burst", 4, 64, 16, 4096, 4, True, 12)
    assert burst.weight.sum() == 12
    waits = np.repeat(burst.wait[:, 0], burst.weight.astype(int))
    assert (waits == 0).sum() == 4 and waits.max() > 0  # the first four run, the rest wait for slots


@pytest.mark.parametrize(
    "args, word",
    [
        (("closed", 4, 8, 8, 64, 4, True), "client"),
        (("static", 0, 8, 8, 64, 4, True), "batch_size"),
        (("static", 4, 8.5, 8, 64, 4, True), "input_len"),
        (("static", 4, 8, 8, 64, 0, True), "slots"),
        (("concurrency", 64, 8, 8, 32, 64, True), "below the 64 sequences"),
    ],
)
def test_replay_refuses_what_it_cannot_replay(args, word):
    with pytest.raises(DataError, match=word):
        replay(*args)


def test_the_memo_answers_each_input_apart():
    """`replay` is memoized on all its inputs (bounded): after a replay is in the memo, the same replay with any
    one input changed is that input's own replay, never the memo's answer for the first."""
    assert replay.cache_info().maxsize is not None
    base = ("concurrency", 24, 300, 40, 2048, 16, True, 0)
    changes = {1: 25, 2: 301, 3: 41, 4: 1024, 5: 15, 6: False, 7: 60}
    for client in ("concurrency", "burst", "static"):
        first = (client, *base[1:7], 50 if client == "burst" else 0)
        replay(*first)
        for i, value in [(0, "burst" if client != "burst" else "concurrency"), *changes.items()]:
            args = list(first)
            args[i] = value
            if args[0] == "burst" and not args[7]:
                args[7] = 50
            if args[0] == "static":
                args[7] = 0
            got, direct, cached = replay(*args), replay.__wrapped__(*args), replay(*first)
            for k in ("weight", "wait", "ttft", "e2e"):
                np.testing.assert_array_equal(getattr(got, k), getattr(direct, k), err_msg=f"{args}: {k}")
            assert got.steps == direct.steps
            assert cached is replay(*first)
            if args == list(first) or (args[0] == "burst" and i == 1):
                continue  # a static batch has no request count; a burst's requests are its num_prompts, whatever its batch
            assert (
                any(
                    getattr(got, k).shape != getattr(cached, k).shape
                    or not np.array_equal(getattr(got, k), getattr(cached, k))
                    for k in ("weight", "wait", "ttft", "e2e")
                )
                or got.steps != cached.steps
            ), f"{args} replays as {first}: the check would not see a stale answer"
