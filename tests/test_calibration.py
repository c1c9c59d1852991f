"""PaperModel: parameter recovery on synthetic data, noise, determinism, summary, JSON, bad input."""

import json
import warnings

import numpy as np
import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

from slimlib.errors import DataError, FitError, NotFittedError, UnknownNameError
from slimlib.metrics import mape
from slimlib.model import IdentifiabilityWarning, PaperModel, load_params, make_model
from slimlib.model import equations as eq
from slimlib.registry.gpus import get_gpu


@pytest.fixture(scope="module")
def truth():
    return PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")


@pytest.fixture(scope="module")
def clean(truth):
    return synthesize(truth, grid())


@pytest.fixture(scope="module")
def fitted(clean):
    return PaperModel().fit(clean)


def test_predict_matches_equations_by_hand(truth):
    row = pd.DataFrame(
        [{"model": "opt-1.3b", "gpu": "h100-sxm-80gb", "batch_size": 32, "input_len": 242, "output_len": 130}]
    )
    got = truth.predict(row).iloc[0]
    hw = get_gpu("h100-sxm-80gb")
    L, D = 24, 2048
    flops = L * (32 * 242 * (4 * D * D + 4 * D * D + 4 * 4 * D * D) + 4 * 32 * 242**2 * D)
    pre = flops / (TRUE_PARAMS["eta_c"] * hw.peak_flops)
    C = 130 * 243 + 130 * 129 / 2
    td = TRUE_PARAMS["alpha"] * 130 + TRUE_PARAMS["gamma"] * L * 4 * 130
    dec = (32 + TRUE_PARAMS["B0"]) / TRUE_PARAMS["eta_m"] * (td + 2 * L * D * 2 * C / hw.mem_bw)
    e2e = pre + dec + TRUE_PARAMS["t_fixed"]
    assert got["pred_prefill_s"] == pytest.approx(pre, rel=1e-12)
    assert got["pred_decode_s"] == pytest.approx(dec, rel=1e-12)
    assert got["pred_e2e_s"] == pytest.approx(e2e, rel=1e-12)
    assert got["pred_throughput_tok_s"] == pytest.approx(32 * (242 + 130) / e2e, rel=1e-12)


def test_recovers_known_parameters_within_1pct(fitted):
    for k, v in TRUE_PARAMS.items():
        assert fitted.params_[k] == pytest.approx(v, rel=0.01), k
    assert fitted.fit_info_["train_mape_pct"] < 1e-6


def test_fit_returns_self_and_sklearn_attributes(clean):
    m = PaperModel()
    assert m.fit(clean) is m
    assert set(m.params_) == set(TRUE_PARAMS) and set(m.stderr_) >= set(TRUE_PARAMS)
    assert m.gpu_ == "h100-sxm-80gb"


def test_two_percent_noise_is_sensible(truth):
    noisy = synthesize(truth, grid(), noise=0.02, seed=1)
    m = PaperModel().fit(noisy)
    assert m.fit_info_["train_mape_pct"] < 3.0
    clean = synthesize(truth, grid())
    assert m.score(clean) < 2.0  # predicts the noise-free truth better than the noise level
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        s = m.summary()
    # the truth lies within a few standard errors for the well-determined parameters
    for k in ("eta_m", "B0"):
        assert abs(s.loc[k, "estimate"] - TRUE_PARAMS[k]) < 5 * s.loc[k, "stderr"] + 0.1 * TRUE_PARAMS[k]


def test_deterministic(clean):
    a = PaperModel().fit(clean)
    b = PaperModel().fit(clean)
    assert a.params_ == b.params_
    assert a.to_json() == b.to_json()


def test_summary_table(fitted):
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        s = fitted.summary()  # rich synthetic grid: everything identifiable, no warning
    assert list(s.index) == ["eta_c", "t_fixed", "eta_m", "B0", "alpha", "gamma"]
    assert {"estimate", "stderr", "lower", "upper", "at_bound"} <= set(s.columns)
    assert not s["at_bound"].any()
    assert (s["stderr"] >= 0).all()


def test_summary_warns_when_not_identifiable(truth):
    # one model, one IL, one OL: alpha and gamma scale identically -> cannot be separated
    one = synthesize(
        truth,
        grid(models=("opt-1.3b",), input_len=(128,), output_len=(64,), batch=(1, 2, 4, 8, 16, 32, 64, 128)),
    )
    m = PaperModel().fit(one)
    with pytest.warns(IdentifiabilityWarning, match="not identifiable"):
        m.summary()
    assert m.identifiability_problems()


def test_a_fit_on_one_batch_size_says_other_batch_sizes_are_unsupported(truth, clean, tmp_path):
    """At one batch size the per-sequence and per-step costs are one constant: the fit says so, records the batch
    size in its file, and every prediction at another batch size repeats it (a user who profiled only B = 1)."""
    one = clean[clean["batch_size"] == 4]
    with pytest.warns(IdentifiabilityWarning, match=r"hold one batch size \(B = 4\)"):
        m = PaperModel(n_starts=0).fit(one)
    assert m.fit_info_["batch_sizes"] == [4.0]
    path = tmp_path / "one.json"
    m.to_json(path)
    back = load_params(path)
    with pytest.warns(IdentifiabilityWarning, match=r"^4 row\(s\) at another batch size than the fit's"):
        back.predict(clean[clean["batch_size"].isin([1, 16])].head(4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", IdentifiabilityWarning)
        back.predict(one)  # at the fitted batch size: no warning
    with warnings.catch_warnings(
        record=True
    ) as caught:  # several batch sizes: no such warning at fit or predict
        warnings.simplefilter("always")
        several = PaperModel(n_starts=0).fit(clean[clean["batch_size"] <= 16])
        several.predict(clean)
    assert not [w for w in caught if "one batch size" in str(w.message)]
    assert several.fit_info_["batch_sizes"] == [1.0, 4.0, 16.0]


def test_json_round_trip(fitted, clean, tmp_path):
    path = tmp_path / "p.json"
    fitted.to_json(path)
    d = json.loads(path.read_text())
    assert d["variant"] == "paper" and d["gpu"] == "h100-sxm-80gb" and d["format"] == "slim-params"
    back = load_params(path)
    pd.testing.assert_frame_equal(back.predict(clean), fitted.predict(clean))


def test_fixed_parameter_is_held(clean):
    m = PaperModel(fixed={"B0": 3.0}).fit(clean)
    assert m.params_["B0"] == 3.0
    assert "B0" not in m.free_params_


@pytest.mark.parametrize("variant", ["no-kv-scan", "no-dense-decode"])
def test_ablations_recover_their_own_truth(variant):
    params = dict(TRUE_PARAMS)
    truth = make_model(variant).with_params(params, gpu="h100-sxm-80gb", variant=variant)
    data = synthesize(truth, grid())
    m = make_model(variant).fit(data)
    assert m.score(data) < 1e-4


def test_ablation_components():
    p = dict(TRUE_PARAMS)
    row = grid(models=("opt-1.3b",), batch=(8,), input_len=(100,), output_len=(50,))
    full = PaperModel.with_params(p, gpu="h100-sxm-80gb").predict(row).iloc[0]
    nokv = PaperModel.with_params(p, gpu="h100-sxm-80gb", variant="no-kv-scan").predict(row).iloc[0]
    nodense = PaperModel.with_params(p, gpu="h100-sxm-80gb", variant="no-dense-decode").predict(row).iloc[0]
    hw = get_gpu("h100-sxm-80gb")
    kv = eq.decode_kv_bytes(24, 2048, 2, eq.kv_scan_tokens(100, 50)) / hw.mem_bw
    scale = (8 + p["B0"]) / p["eta_m"]
    assert full["pred_decode_s"] - nokv["pred_decode_s"] == pytest.approx(scale * kv, rel=1e-9)
    assert nodense["pred_decode_s"] == pytest.approx(scale * kv, rel=1e-9)


# ---- bad input ---------------------------------------------------------------------------------------------
def _base():
    return pd.DataFrame(
        {"model": ["opt-1.3b"] * 8, "gpu": ["h100-sxm-80gb"] * 8, "batch_size": [1, 2, 4, 8, 16, 32, 64, 128],
         "input_len": [128] * 8, "output_len": [64] * 8, "throughput_tok_s": [100.0 * i for i in range(1, 9)]}
    )  # fmt: skip


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.drop(columns=["output_len"]), "lacks column.*output_len"),
        (
            lambda d: d.assign(input_len=d.input_len.astype(object).where(d.index != 3, "abc")),
            "line|row 3.*input_len.*not a number",
        ),
        (
            lambda d: d.assign(throughput_tok_s=d.throughput_tok_s.where(d.index != 2, np.nan)),
            "row 2.*throughput_tok_s.*not finite",
        ),
        (lambda d: d.assign(output_len=d.output_len.where(d.index != 5, 0)), "row 5.*output_len.*positive"),
        (lambda d: d.assign(batch_size=d.batch_size.where(d.index != 1, -4)), "row 1.*batch_size.*positive"),
        (lambda d: d.iloc[:0], "no rows"),
        (
            lambda d: pd.concat([d, d.iloc[[0]].assign(throughput_tok_s=999.0)], ignore_index=True),
            "different measurements",
        ),
        (lambda d: d.assign(model=d.model.where(d.index != 4, "")), "row 4.*model.*empty"),
    ],
)
def test_bad_input_errors(mutate, match):
    with pytest.raises(DataError, match=match):
        PaperModel().fit(mutate(_base()))


def test_unknown_model_names_row_and_close_matches():
    d = _base()
    d.loc[6, "model"] = "opt-1.3bb"
    with pytest.raises(UnknownNameError, match=r"row 6.*opt-1\.3b"):
        PaperModel().fit(d)


def test_unknown_gpu():
    with pytest.raises(UnknownNameError, match="h100"):
        PaperModel().fit(_base().assign(gpu="h1000"))


def test_several_gpus_is_an_error():
    d = _base()
    d.loc[0, "gpu"] = "a100-sxm-80gb"
    with pytest.raises(DataError, match="several GPUs"):
        PaperModel().fit(d)


def test_too_few_rows():
    """Only eta_c has a measured prior in the paper model: its eta_m (Eq. 9, offset by B0) is not the attention
    bandwidth efficiency whose prior the recommended model's eta_attn carries."""
    with pytest.raises(
        FitError,
        match=r"3 rows cannot determine 5 free parameters \(t_fixed, eta_m, B0, alpha, gamma\), even with eta_c "
        "held at its prior",
    ):
        PaperModel().fit(_base().iloc[:3])


def test_few_point_paper_fit_holds_no_prior_of_another_model():
    """5 rows < 6 parameters: the paper fit holds eta_c at its prior and fits eta_m (no 'eta_m' prior borrowed)."""
    with pytest.warns(IdentifiabilityWarning):  # 5 rows leave the paper's 5 free parameters unresolved
        m = PaperModel(n_starts=1).fit(_base().iloc[:5])
    assert m.held_ == ["eta_c"] and "eta_m" in m.free_params_
    assert m.held_reasons_["eta_c"].startswith("held at prior 0.794")


def test_fit_that_does_not_converge():
    with pytest.raises(FitError, match="did not converge"):
        PaperModel(max_nfev=1, n_starts=1).fit(_base())


def test_predict_before_fit():
    with pytest.raises(NotFittedError):
        PaperModel().predict(_base())


def test_predict_for_another_gpu(fitted):
    with pytest.raises(DataError, match="parameters are for h100-sxm-80gb"):
        fitted.predict(_base().assign(gpu="a100-sxm-80gb"))


def test_unknown_variant():
    with pytest.raises(UnknownNameError, match="paper"):
        PaperModel(variant="papr")


def test_bad_param_file(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text("{not json")
    with pytest.raises(DataError, match="bad.json.*not valid JSON"):
        load_params(p)
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(DataError, match="not a SLIM parameter file"):
        load_params(p)


def test_mape_metrics():
    assert mape([100, 200], [110, 180]) == pytest.approx(10.0)
    with pytest.raises(DataError):
        mape([0, 1], [1, 1])


def test_predict_without_gpu_column_uses_the_parameters_gpu(truth):
    row = grid(models=("opt-1.3b",), batch=(8,), input_len=(100,), output_len=(50,))
    with_gpu = truth.predict(row)
    pd.testing.assert_frame_equal(truth.predict(row.drop(columns=["gpu"])), with_gpu)
    with pytest.raises(DataError, match="lacks column.*model"):
        truth.predict(row.drop(columns=["gpu", "model"]))


def test_summary_interval_is_normal_approximation_and_absent_at_a_bound(truth):
    noisy = synthesize(truth, grid(), noise=0.03, seed=5)
    s = PaperModel(n_starts=2).fit(noisy).summary()
    free = s[~s["at_bound"]]
    assert len(free) and (free["stderr"] > 0).all()
    np.testing.assert_allclose(
        free["ci95_high"] - free["estimate"], 1.959963984540054 * free["stderr"], rtol=1e-9
    )
    np.testing.assert_allclose(
        free["estimate"] - free["ci95_low"], 1.959963984540054 * free["stderr"], rtol=1e-9
    )
    at_one = PaperModel.with_params({**TRUE_PARAMS, "eta_m": 1.0}, gpu="h100-sxm-80gb")  # eta_m's upper bound
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", IdentifiabilityWarning)
        s = PaperModel(n_starts=2).fit(synthesize(at_one, grid())).summary()
    assert s.loc["eta_m", "at_bound"] and s.loc[s["at_bound"], ["ci95_low", "ci95_high"]].isna().all().all()
