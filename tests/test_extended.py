"""SlimModel: effective batch limits, recovery of its own synthetic truth, registry and JSON round trip."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import SLIM_TRUE_PARAMS, grid, synthesize

from slimlib.errors import SlimError
from slimlib.model import (
    DEFAULT_VARIANT,
    SlimModel,
    load_params,
    make_model,
    variant_names,
)
from slimlib.model.serving import serving_config
from slimlib.model.terms import effective_batch
from slimlib.model.terms.batch import chunked_prefill_column
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.vllm_flags import server_batched_tokens

GPU = "h100-sxm-64gb"
#: eta_attn at the GPU's measured decode-attention efficiency, which the recommended model reads there instead
TRUE = {**SLIM_TRUE_PARAMS, "t_layer": 3e-5, "t_act": 1e-7, "eta_attn": get_gpu(GPU).decode_attention_eff}


def _grid():
    df = grid(models=("opt-125m", "opt-1.3b", "opt-2.7b", "llama-2-7b", "llama-2-13b"), gpu=GPU,
              batch=(1, 4, 16, 64, 256, 512), input_len=(128, 512, 2048), output_len=(64, 256, 1024))  # fmt: skip
    df["chunked_prefill"] = df["model"] != "opt-2.7b"
    df["max_num_batched_tokens"] = 512.0  # a token budget that caps the batch within the grid
    return df


def test_effective_batch_applies_kv_and_token_budget_limits():
    m = SlimModel(gpu=GPU)
    hw = get_gpu(GPU)
    df = grid(models=("llama-2-13b",), gpu=GPU, batch=(8, 512), input_len=(250,), output_len=(520,))
    df["gpu_blocks"] = 2664.0
    df["block_size"] = 16.0
    df["chunked_prefill"] = True
    b = m.effective_batch(df, hw)
    assert b[0] == 8.0
    assert b[1] == pytest.approx(
        2664 * 16 / (250 + 0.5 * 520)
    )  # KV-bound (token budget 512*520/770 is larger)
    df2 = df.drop(columns=["gpu_blocks", "block_size"]).assign(
        model="opt-1.3b", input_len=242.0, max_num_batched_tokens=512.0
    )
    assert m.effective_batch(df2, hw)[1] == pytest.approx(512 * 520 / (242 + 520))  # token budget
    df2["chunked_prefill"] = False
    assert m.effective_batch(df2, hw)[1] == 512.0  # memory estimate allows more than 512
    # a row that says no budget has vLLM 0.32's for the GPU; one that says nothing of chunking is chunked (V1)
    assert serving_config(get_architecture("opt-1.3b"), GPU).max_num_batched_tokens == server_batched_tokens(
        GPU
    )
    assert chunked_prefill_column(df2.drop(columns="chunked_prefill")).tolist() == [1.0, 1.0]
    assert chunked_prefill_column(df2.assign(chunked_prefill=[None, False])).tolist() == [1.0, 0.0]
    assert chunked_prefill_column(df2.assign(chunked_prefill=["no", " "])).tolist() == [
        0.0,
        1.0,
    ]  # read, not cast
    with pytest.raises(SlimError, match="row 0: chunked_prefill = maybe is not true or false"):
        chunked_prefill_column(df2.assign(chunked_prefill=["maybe", "true"]))


def test_effective_batch_reads_the_serving_features():
    """The caps read the per-row features ``kv_token_capacity``, ``max_num_batched_tokens`` and ``chunked_prefill``
    (no model option)."""
    n = 3
    f = {"batch_size": np.array([64.0, 64.0, 64.0]), "input_len": np.full(n, 100.0),
         "output_len": np.full(n, 300.0), "static_batch": np.array([0.0, 1.0, 0.0]),
         "kv_token_capacity": np.array([5000.0, 5000.0, 1e9]),
         "max_num_batched_tokens": np.array([80.0, 80.0, 80.0]), "chunked_prefill": np.array([0.0, 0.0, 1.0])}  # fmt: skip
    b = effective_batch(f, kv_context_frac=0.5)
    assert b == pytest.approx([5000 / 250, 5000 / 400, 80 * 300 / 400])
    assert "max_batched_tokens" not in SlimModel().get_params()
    assert "gpu_mem_util" not in SlimModel().get_params()


def test_extended_recovers_its_own_synthetic_parameters():
    truth = SlimModel.with_params(TRUE, gpu=GPU)
    df = synthesize(truth, _grid())
    fitted = make_model("slim", n_starts=4).fit(df)
    for k, v in TRUE.items():
        assert fitted.params_[k] == pytest.approx(v, rel=1e-3), k
    assert fitted.held_ == ["eta_attn"] and "decode_attention_eff" in fitted.held_reasons_["eta_attn"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = fitted.summary()
    assert not table["at_bound"].any()
    # the plateau: beyond the limits throughput stops growing
    pred = fitted.predict(df)
    sel = (df["model"] == "opt-1.3b") & (df["input_len"] == 512) & (df["output_len"] == 256)
    thr = pred.loc[sel, "pred_throughput_tok_s"].to_numpy()
    assert thr[-1] == pytest.approx(thr[-2], rel=1e-12)


def test_single_architecture_holds_eta_w_at_its_prior_and_t_layer_and_t_act_at_zero():
    # one architecture: the weight read, t_step and t_layer L are one constant per step; eta_w keeps the decode
    # GEMMs' ridge where the device puts it, the constant goes to t_step; t_act L D and alpha are one constant per
    # sequence and step
    truth = SlimModel.with_params(TRUE, gpu=GPU)
    df = synthesize(truth, _grid())
    one = df[df["model"] == "opt-1.3b"]
    m = SlimModel(n_starts=2).fit(one)
    assert m.held_ == ["eta_attn", "eta_w", "t_act", "t_layer"] and m.fixed is None
    assert m.params_["t_layer"] == 0.0 and m.params_["t_act"] == 0.0
    assert "one layer count times width" in m.held_reasons_["t_act"]
    # on a GPU with a measured layer floor, the bandwidth efficiency of the floor's line (beside the floor)
    assert (
        m.params_["eta_w"] == get_gpu(GPU).layer_floor_eff and "layer_floor_eff" in m.held_reasons_["eta_w"]
    )
    assert m.params_["t_step"] > 0
    refit = m.fit(df).params_  # a refit decides afresh
    assert refit["t_layer"] == pytest.approx(TRUE["t_layer"], rel=1e-3)
    assert refit["t_act"] == pytest.approx(TRUE["t_act"], rel=1e-3)
    assert m.held_ == ["eta_attn"]


def test_saved_single_architecture_fit_refits_t_step_on_several(tmp_path):
    """Regression: a fit on one architecture, saved and reloaded, kept t_step fixed at 0 when refitted on three."""
    truth = SlimModel.with_params(TRUE, gpu=GPU)
    full = synthesize(truth, _grid())
    df = full[full["model"].isin(sorted(set(full["model"]))[:3])]
    assert df["model"].nunique() == 3
    path = tmp_path / "one.json"
    SlimModel(n_starts=2).fit(df[df["model"] == df["model"].iloc[0]]).to_json(path)
    loaded = load_params(path)
    assert loaded.fixed is None and loaded.held_ == ["eta_attn", "eta_w", "t_act", "t_layer"]
    refit = loaded.fit(df)
    fresh = SlimModel(n_starts=2).fit(df)
    assert refit.held_ == ["eta_attn"] and refit.params_["t_layer"] == pytest.approx(
        TRUE["t_layer"], rel=1e-3
    )
    assert refit.params_ == pytest.approx(fresh.params_, rel=1e-6)


def test_extended_is_registered_default_and_round_trips_with_its_options(tmp_path):
    assert "slim" in variant_names() and DEFAULT_VARIANT == "slim"
    truth = SlimModel.with_params(TRUE, gpu=GPU)
    df = synthesize(truth, _grid(), noise=0.01, seed=1)
    m = SlimModel(kv_context_frac=0.8, n_starts=2).fit(df)
    path = tmp_path / "p.json"
    m.to_json(path)
    back = load_params(path)
    assert isinstance(back, SlimModel) and back.variant == "slim"
    assert back.kv_context_frac == 0.8
    np.testing.assert_array_equal(back.predict(df).to_numpy(), m.predict(df).to_numpy())


def test_retired_method_files_are_refused_naming_the_new_method(tmp_path):
    truth = SlimModel.with_params(TRUE, gpu=GPU)
    doc = json.loads(truth.to_json())
    for old in ("extended", "longctx"):
        path = tmp_path / f"{old}.json"
        path.write_text(json.dumps({**doc, "variant": old}), encoding="utf-8")
        with pytest.raises(SlimError, match=r"merged into 'slim'.*--variant slim"):
            load_params(path)


def test_static_batch_rows_hold_the_whole_context():
    """kappa = 1 for a static batch (all requests grow to IL + OL together), kv_context_frac otherwise."""
    m = SlimModel.with_params(TRUE, gpu=GPU)
    df = pd.DataFrame({"model": ["llama-2-7b"] * 2, "batch_size": [4096.0] * 2, "input_len": [100.0] * 2,
                       "output_len": [300.0] * 2, "gpu_blocks": [1000.0] * 2, "block_size": [16.0] * 2,
                       "static_batch": [False, True]})  # fmt: skip
    b = m.effective_batch(df, get_gpu(GPU))
    assert b[0] == pytest.approx(16000 / (100 + 0.5 * 300)) and b[1] == pytest.approx(16000 / 400)


def test_old_slim_parameter_files_are_refused_with_one_line(tmp_path):
    """Format 3 renamed slim's attention efficiency (eta_m -> eta_attn): a version-2 slim file is refused, a
    version-2 paper file (names unchanged) still loads."""
    doc = json.loads(SlimModel.with_params(TRUE, gpu=GPU).to_json())
    old = {**doc, "format_version": 2, "params": {**TRUE, "eta_m": 0.5}}
    del old["params"]["eta_attn"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    with pytest.raises(SlimError, match=r"old.json: a 'slim' parameter file of format version 2.*refit with "
                                         r"`slim fit DATA.csv --variant slim`") as err:  # fmt: skip
        load_params(path)
    assert "\n" not in str(err.value)
    for version in (
        4,
        5,
        6,
        11,
        12,
    ):  # format 5 counts a causal prompt's attention, 6 a measured decode-GEMM roof, 7 its curve, 13 the measured
        # attention kernel's width: other times
        path.write_text(json.dumps({**doc, "format_version": version}), encoding="utf-8")
        with pytest.raises(
            SlimError, match=rf"format version {version}.*refit with `slim fit DATA.csv --variant slim`"
        ):
            load_params(path)
    paper = json.loads(
        make_model("paper")
        .with_params(
            {"eta_c": 0.4, "t_fixed": 0.1, "eta_m": 0.5, "B0": 2.0, "alpha": 1e-5, "gamma": 1e-7}, gpu=GPU
        )
        .to_json()
    )
    (tmp_path / "paper.json").write_text(json.dumps({**paper, "format_version": 2}), encoding="utf-8")
    assert load_params(tmp_path / "paper.json").params_["eta_m"] == 0.5


def test_decode_attention_runs_at_the_measured_efficiency_where_the_registry_has_one():
    """On a GPU with a measured decode-attention efficiency (registry decode_attention_eff) eta_attn changes no
    prediction and a fit holds it; on a GPU without one it is fitted and recovered."""
    df = _grid()
    low, high = ({**TRUE, "eta_attn": e} for e in (0.3, 0.9))
    a, b = (SlimModel.with_params(p, gpu=GPU).predict(df) for p in (low, high))
    np.testing.assert_array_equal(a["pred_e2e_s"].to_numpy(), b["pred_e2e_s"].to_numpy())
    amd = _grid().assign(gpu="mi300x")
    a, b = (SlimModel.with_params(p, gpu="mi300x").predict(amd) for p in (low, high))
    assert (a["pred_decode_s"] > b["pred_decode_s"]).all()  # less efficient attention, longer decode
    assert get_gpu("mi300x").decode_attention_eff is None
    truth = {**TRUE, "eta_attn": 0.6}
    fit = make_model("slim", n_starts=2).fit(synthesize(SlimModel.with_params(truth, gpu="mi300x"), amd))
    assert "eta_attn" not in fit.held_ and fit.params_["eta_attn"] == pytest.approx(0.6, rel=1e-3)
