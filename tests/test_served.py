"""Served TTFT and TPOT (`slimlib.model.served`): the replay's steps timed by the model's own step costs."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import SLIM_TRUE_PARAMS, grid

from slimlib.cli.main import main
from slimlib.data.catalog import load
from slimlib.errors import DataError
from slimlib.experiments.accuracy.scenarios import online_table
from slimlib.model import SlimModel
from slimlib.model.base import SERVED_COLUMNS, AssumptionWarning
from slimlib.model.served import (
    CLIENT_CODE,
    _weighted_percentiles,
    client_codes,
    running_cap,
    served_latencies,
    window_features,
)


def _features(client, b, il=256, ol=64, budget=8192, chunked=1.0, prompts=np.nan, slots=None):
    f = {
        "batch_size": np.array([float(b)]),
        "input_len": np.array([float(il)]),
        "output_len": np.array([float(ol)]),
        "kv_slots": np.array([np.inf]),
        "max_num_seqs": np.array([float(slots or b)]),
        "chunked_prefill": np.array([chunked]),
        "num_prompts": np.array([float(prompts)]),
        "client": np.array([CLIENT_CODE[client]]),
        "max_num_batched_tokens": np.array([float(budget)]),
    }
    f.update(window_features(f))
    return f


def _served(f, pre=0.4, dec=2.0, fixed=0.05, dec_2=1.5, detail=True):
    a = lambda x: np.array([x])  # noqa: E731
    return served_latencies(f, a(pre), a(dec), a(pre + dec + fixed), a(dec_2), detail)


@pytest.mark.parametrize(
    "client, kw",
    [("static", {}), ("concurrency", {}), ("burst", {"prompts": 40}),
     ("concurrency", {"chunked": 0.0, "budget": 1 << 40}), ("concurrency", {"il": 2048, "budget": 2048})],
)  # fmt: skip
def test_served_requests_keep_the_batch_models_time(client, kw):
    # E2E = TTFT + (OL - 1) TPOT; T_pre + T_dec = 2.4, t_fixed = 0.05
    f = _features(client, 8, **kw)
    s = _served(f)
    e2e = s["ttft"][0] + (f["output_len"][0] - 1) * s["tpot"][0]
    if client == "burst":  # B_eff requests in the engine for T each, the queue on top
        assert s["queue"][0] > 0 and e2e == pytest.approx(0.05 + s["queue"][0] + 2.4)
    else:  # a lock-step batch ends at T; a closed loop of B clients keeps B out (Little's law), its queue included
        assert e2e == pytest.approx(0.05 + 2.4)
    assert s["ttft"][0] > 0.05 + s["queue"][0] and s["tpot"][0] > 0


def test_a_closed_loop_beyond_its_slots_waits_in_proportion():
    # 16 clients, 8 slots: the engine completes 8 requests per E2E = t_fixed + T, so a request's mean is 2 E2E
    f = _features("concurrency", 8, slots=8)
    f["batch_cap"] = np.array([16.0])
    f.update(window_features(f))
    s = _served(f)
    assert s["queue"][0] > 0
    assert s["ttft"][0] + 63 * s["tpot"][0] == pytest.approx(2 * (0.05 + 2.4))


def test_a_static_batch_beyond_its_slots_ends_when_its_second_wave_does():
    # 16 requests, 8 slots: the engine ends 8 requests per E2E, so the last ends at 2 E2E
    f = _features("static", 8, slots=8)
    f["batch_cap"] = np.array([16.0])
    f.update(window_features(f))
    s = _served(f)
    assert s["e2e_p99"][0] == pytest.approx(2 * (0.05 + 2.4)) and s["e2e_p50"][0] < s["e2e_p99"][0]


def test_a_staggered_static_batch_ends_at_the_batch_models_time():
    s = _served(_features("static", 8, budget=512))
    mean_e2e = s["ttft"][0] + 63 * s["tpot"][0]
    assert s["e2e_p50"][0] < s["e2e_p99"][0] <= 0.05 + 2.4 + 1e-9 and mean_e2e < 0.05 + 2.4


def test_a_static_batch_by_hand():
    # B = 2 whole prompts of 10 tokens in one step (which samples the first tokens), then OL - 1 = 2 decode steps of
    # 2 sequences. Decode step c0 + c1 d through T_dec / (OL - 1) at B = 2 (2.0 / 2) and B = 1 (1.5 / 2): c1 = 0.25,
    # c0 = 0.5; a prompt token 0.4 / 20 = 0.02 s. The engine time 2 (0.5 + 2 x 0.25) + 20 x 0.02 = 2.4 = T_pre + T_dec,
    # so kappa = 1: TTFT = 0.05 + 0.4, TPOT = 2 x 1.0 / 2.
    s = _served(_features("static", 2, il=10, ol=3, chunked=0.0), pre=0.4, dec=2.0, fixed=0.05, dec_2=1.5)
    assert s["ttft"][0] == pytest.approx(0.45) and s["tpot"][0] == pytest.approx(1.0) and s["queue"][0] == 0
    assert s["e2e_p99"][0] == pytest.approx(0.05 + 2.4)


def test_a_lock_step_batch_has_one_ttft_and_no_queue():
    s = _served(_features("static", 8))
    assert s["queue"][0] == 0
    assert s["ttft_p50"][0] == s["ttft_p99"][0] == pytest.approx(s["ttft"][0])
    assert s["tpot_p90"][0] == pytest.approx(s["tpot"][0])


def test_a_burst_queues_for_slots_and_spreads_its_ttft():
    small = _served(_features("burst", 8, prompts=8))
    big = _served(_features("burst", 8, prompts=64))
    assert 0 < small["queue"][0] < 0.1 * big["queue"][0]  # the first step takes the first arrival alone
    assert big["ttft_p50"][0] < big["ttft_p90"][0] <= big["ttft_p99"][0]  # the last wave holds both
    assert big["ttft"][0] > 3 * small["ttft"][0]  # most requests wait for several waves
    assert big["tpot"][0] == pytest.approx(small["tpot"][0], rel=0.2)  # a slot decodes as fast either way


def test_chunked_prefill_budget_delays_the_last_prompt_of_a_batch():
    whole = _served(_features("static", 16, il=1024, budget=1 << 20))
    chunked = _served(_features("static", 16, il=1024, budget=2048))
    assert chunked["ttft_p99"][0] > chunked["ttft_p50"][0]
    assert whole["ttft_p99"][0] == pytest.approx(whole["ttft_p50"][0])


def test_closed_loop_requests_wait_for_the_running_step_when_they_arrive_apart():
    # a small budget staggers the prompts, so later clients finish apart and the loop's new requests arrive
    # while the engine runs: each waits for the step under way
    s = _served(_features("concurrency", 8, il=1024, budget=2048))
    assert s["queue"][0] > 0
    assert s["e2e_p50"][0] >= s["ttft_p50"][0]


def test_client_codes_reads_client_and_static_batch_and_counts_rows_that_say_neither():
    df = pd.DataFrame(
        {"client": ["Concurrency", None, "burst", ""], "static_batch": [False, True, False, False],
         "num_prompts": [np.nan, np.nan, 100, np.nan]}
    )  # fmt: skip
    codes, unsaid = client_codes(df)
    assert codes.tolist() == [CLIENT_CODE[c] for c in ("concurrency", "static", "burst", "concurrency")]
    assert unsaid == 1


@pytest.mark.parametrize(
    "df, words",
    [
        (pd.DataFrame({"client": ["concurrency", "poisson"]}), "row 2: client 'poisson'"),
        (pd.DataFrame({"client": ["burst"], "static_batch": [True]}), "row 1: static_batch is true"),
        (pd.DataFrame({"client": ["burst"]}), "row 1: client 'burst' needs num_prompts"),
        (pd.DataFrame({"client": ["concurrency", "rate"]}), "row 2: client 'rate' .* is not modelled"),
        (
            pd.DataFrame({"client": ["burst"], "num_prompts": [10.5], "batch_size": [8]}),
            "row 1: num_prompts = 10.5; give the requests the run sent, a whole number of 1 or more",
        ),
        (
            pd.DataFrame({"client": ["static", "burst"], "num_prompts": [4, 4], "batch_size": [8, 8]}),
            "row 2: num_prompts = 4 requests never keep batch_size = 8 out; give batch_size 4",
        ),
        (
            pd.DataFrame({"client": ["concurrency"], "num_prompts": [0], "batch_size": [8]}),
            "row 1: num_prompts = 0;",
        ),
        (
            pd.DataFrame({"client": ["burst"], "num_prompts": [np.inf], "batch_size": [8]}),
            "row 1: num_prompts = inf;",
        ),
        (
            pd.DataFrame(
                {"client": ["concurrency", "concurrency"], "num_prompts": [9, 4], "batch_size": [8, 8]}
            ),
            "row 2: num_prompts = 4 requests never keep batch_size = 8 out",
        ),
        (
            pd.DataFrame({"num_prompts": [4], "batch_size": [8]}),  # served as a closed loop of 8
            "row 1: num_prompts = 4 requests never keep",
        ),
    ],
)
def test_client_codes_refuses_rows_it_cannot_serve(df, words):
    with pytest.raises(DataError, match=words):
        client_codes(df)


def test_a_closed_loops_median_prompts_may_be_a_half_and_a_burst_without_a_batch_size_is_served():
    # medians over repeats of a closed loop (data/engine-cpu-medians.csv holds 6.5 and 7.5)
    codes, _ = client_codes(
        pd.DataFrame({"client": ["concurrency"], "num_prompts": [6.5], "batch_size": [1]})
    )
    assert codes.tolist() == [CLIENT_CODE["concurrency"]]
    codes, _ = client_codes(pd.DataFrame({"client": ["burst"], "num_prompts": [4]}))  # no batch_size column
    assert codes.tolist() == [CLIENT_CODE["burst"]]
    codes, _ = client_codes(load("engine-cpu-medians"))  # the committed fit table
    assert (codes == CLIENT_CODE["concurrency"]).all()


def _truth() -> SlimModel:
    return SlimModel.with_params(SLIM_TRUE_PARAMS, gpu="h100-sxm-80gb")


def test_predict_says_which_client_it_assumed_and_gives_percentiles(tmp_path):
    rows = grid(models=("opt-1.3b",), batch=(1, 16, 64), input_len=(512,), output_len=(128,)).assign(
        chunked_prefill=True, max_num_batched_tokens=2048
    )
    with pytest.warns(
        AssumptionWarning,
        match="say no client are served as a closed loop at concurrency max_concurrency, else batch_size",
    ):
        unsaid = _truth().predict(rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error", AssumptionWarning)
        said = _truth().predict(rows.assign(client="concurrency"))
    pd.testing.assert_frame_equal(unsaid, said)
    assert said[list(SERVED_COLUMNS)].notna().all().all()
    assert (said["pred_ttft_p50_s"] <= said["pred_ttft_p99_s"]).all()
    static = _truth().predict(rows.assign(client="static"))
    # a static batch's prompts share the first steps' budgets; a steady closed loop's arrive apart
    assert (static["pred_ttft_s"].iloc[1:] > said["pred_ttft_s"].iloc[1:]).all()
    params = tmp_path / "slim.json"
    params.write_text(_truth().to_json())
    grid_csv = tmp_path / "grid.csv"
    rows.to_csv(grid_csv, index=False)
    with pytest.warns(AssumptionWarning, match="served as a closed loop"):
        assert main(["predict", str(params), str(grid_csv), "--out", str(tmp_path / "pred.csv")]) == 0
    out = pd.read_csv(tmp_path / "pred.csv")
    assert np.allclose(out["pred_tpot_p90_s"], said["pred_tpot_p90_s"])


def test_fit_reads_the_measured_ttft_and_tpot_of_a_burst():
    """The paper's online runs (real TTFT and TPOT of a burst of 2000 requests, at most B running): one model per
    GPU's runs, fitted on throughput, TTFT and TPOT together, gives their TTFT and TPOT within 15%."""
    t = online_table(load("memgap-online"))
    t = t[t["model"] == "opt-1.3b"]
    model = SlimModel(n_starts=1).fit(t)
    pred = model.predict(t)
    for q in ("ttft", "tpot"):
        truth = t[f"mean_{q}_ms"].to_numpy() / 1000.0
        mape = float(np.mean(np.abs(pred[f"pred_{q}_s"].to_numpy() / truth - 1.0)))
        assert mape < 0.15, (q, mape)
    p99 = t["p99_ttft_ms"].to_numpy() / 1000.0
    assert float(np.mean(np.abs(pred["pred_ttft_p99_s"].to_numpy() / p99 - 1.0))) < 0.15


def test_weighted_percentiles_are_numpys_on_the_repeated_values():
    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(1, 7))
        v, w = rng.normal(size=n), rng.integers(1, 6, size=n).astype(float)
        expected = np.percentile(np.repeat(v, w.astype(int)), (50, 90, 99))
        np.testing.assert_allclose(_weighted_percentiles(v, w, (50, 90, 99)), expected, rtol=1e-12)


def test_a_closed_loop_of_more_clients_than_the_batch_waits_for_slots_by_littles_law():
    rows = pd.DataFrame({"model": "llama-2-7b", "gpu": "h100-sxm-80gb", "batch_size": 8, "input_len": 256,
                         "output_len": 128, "client": "concurrency", "max_concurrency": [np.nan, 8, 16, 32]})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = _truth().predict(rows)
    thr = p["pred_throughput_tok_s"].to_numpy()
    assert np.allclose(thr, thr[0])  # the server runs 8 at a time whatever the clients
    served = p["pred_ttft_s"] + 127 * p["pred_tpot_s"]
    clients = np.array([8, 8, 16, 32])
    np.testing.assert_allclose(served, clients * (256 + 128) / thr, rtol=1e-9)  # Little's law
    # the clients beyond the 8 slots queue for one, C / B - 1 turns of the engine's time (1 with 16 clients, 3
    # with 32); TPOT, the engine's pace, hardly moves (a slot freed mid-wave brings a prompt into its steps)
    queue, e2e = p["pred_queue_s"].to_numpy(), p["pred_e2e_s"].to_numpy()
    np.testing.assert_allclose(queue[2:] / e2e[2:], [1.0, 3.0], rtol=0.1)
    assert p["pred_ttft_s"].is_monotonic_increasing
    np.testing.assert_allclose(p["pred_tpot_s"], p["pred_tpot_s"].iloc[0], rtol=0.1)


@pytest.mark.parametrize(
    "clients, prompts, words",
    [
        (
            4,
            np.nan,
            "row 1: max_concurrency = 4 clients never keep batch_size = 8 running; give batch_size 4",
        ),
        (12.5, np.nan, "row 1: max_concurrency = 12.5; give the clients of the closed loop, a whole number"),
        (np.inf, np.nan, "row 1: max_concurrency = inf; give the clients"),
        ("sixteen", np.nan, "row 1: max_concurrency = 'sixteen' is not a number of clients"),
        (
            16,
            12,
            "row 1: num_prompts = 12 requests never keep max_concurrency = 16 out; give max_concurrency 12",
        ),
    ],
)
def test_a_closed_loops_clients_are_a_whole_number_at_least_its_batch_and_its_prompts_at_least_them(
    clients, prompts, words
):
    df = pd.DataFrame({"client": ["concurrency"], "batch_size": [8], "max_concurrency": [clients],
                       "num_prompts": [prompts]})  # fmt: skip
    with pytest.raises(DataError, match=words):
        client_codes(df)
    # an empty cell is no value: the closed loop's clients are its batch
    assert client_codes(df.assign(max_concurrency=[""], num_prompts=[np.nan]))[0].tolist() == [
        CLIENT_CODE["concurrency"]
    ]


def test_a_workloads_clients_are_each_candidate_batch_in_the_advisors_curves():
    from slimlib.advisor.capacity import predict_curves

    work = pd.DataFrame({"model": ["llama-2-7b"], "input_len": [256], "output_len": [128]})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = predict_curves(_truth(), work, [1, 8, 64])
        clients = predict_curves(_truth(), work.assign(max_concurrency=4), [1, 8, 64])
    for a, b in zip(plain, clients, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_rows_batch_is_the_max_num_seqs_it_ran_at():
    rows = pd.DataFrame({"model": "opt-1.3b", "gpu": "h100-sxm-80gb", "input_len": 64, "output_len": 64,
                         "client": "concurrency", "batch_size": 2048, "max_num_seqs": [np.nan, 2048.0]})  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = _truth().predict(rows)  # vLLM's default on an 80 GB H100 is 1024 sequences
    pred = p.filter(like="pred_")
    pd.testing.assert_frame_equal(
        pred.iloc[[0]].reset_index(drop=True), pred.iloc[[1]].reset_index(drop=True)
    )
    np.testing.assert_array_equal(running_cap(rows.iloc[[0]], np.array([1024.0])), [2048.0])
    np.testing.assert_array_equal(
        running_cap(rows.iloc[[0]].assign(batch_size=8), np.array([1024.0])), [1024.0]
    )
    with pytest.raises(
        DataError, match="row 1: batch_size = 16 above max_num_seqs = 8: vLLM decodes at most"
    ):
        running_cap(rows.iloc[[0]].assign(batch_size=16, max_num_seqs=8), np.array([1024.0]))
