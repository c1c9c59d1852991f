"""The residual models the package ships (`slimlib/model/residual_model.json`): one per calibrated method, of this
code's versions, read by `slim fit --intervals` without any cross-validation, and pooled with the fit's own
held-out errors."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from synthetic import SLIM_TRUE_PARAMS, grid, synthesize

from slimlib.errors import DataError
from slimlib.experiments.accuracy.extrapolation import calibrated_methods
from slimlib.model import make_model
from slimlib.model.base import PARAMS_FORMAT_VERSION
from slimlib.model.intervals import GRID, POOLED, RESIDUAL_FORMAT
from slimlib.model.shipped_residuals import SHIPPED_PATH, load_shipped, shipped_document, write_shipped
from slimlib.model.slim import SlimModel


def test_every_calibrated_method_has_a_shipped_residual_model_of_this_codes_versions():
    doc = json.loads(SHIPPED_PATH.read_text(encoding="utf-8"))
    assert doc["residual_format"] == RESIDUAL_FORMAT and doc["model_version"] == PARAMS_FORMAT_VERSION
    assert sorted(doc["methods"]) == sorted(calibrated_methods())
    for method in calibrated_methods():
        rm = load_shipped(method, PARAMS_FORMAT_VERSION)
        assert rm.method == method and "extrapolation cross-validation" in rm.source
        for axis, per in rm.axes.items():
            for quantity, ar in per.items():
                q = np.asarray(ar.quantiles)
                assert len(q) == len(GRID) and np.all(np.diff(q) >= 0) and q[0] >= 0, (method, axis, quantity)
                assert ar.n >= 1 and ar.n_folds >= 1
        assert rm.has(POOLED, "throughput") and rm.has("batch", "throughput")


def test_another_version_is_refused_naming_both(tmp_path):
    rm = load_shipped("slim", PARAMS_FORMAT_VERSION)
    path = write_shipped({"slim": rm}, PARAMS_FORMAT_VERSION - 1, tmp_path / "r.json")
    with pytest.raises(DataError, match=rf"model version {PARAMS_FORMAT_VERSION - 1}.*model version "
                       rf"{PARAMS_FORMAT_VERSION}; regenerate it with notebook 14"):  # fmt: skip
        load_shipped("slim", PARAMS_FORMAT_VERSION, path)
    doc = shipped_document({"slim": rm}, PARAMS_FORMAT_VERSION)
    (tmp_path / "f.json").write_text(json.dumps({**doc, "residual_format": RESIDUAL_FORMAT + 1}))
    with pytest.raises(
        DataError, match=rf"residual format {RESIDUAL_FORMAT + 1}.*residual format {RESIDUAL_FORMAT}"
    ):
        load_shipped("slim", PARAMS_FORMAT_VERSION, tmp_path / "f.json")
    only_slim = write_shipped({"slim": rm}, PARAMS_FORMAT_VERSION, tmp_path / "s.json")
    with pytest.raises(DataError, match="no residual model for method 'paper'.*it has slim"):
        load_shipped("paper", PARAMS_FORMAT_VERSION, only_slim)
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(DataError, match="not a readable residual-model file"):
        load_shipped("slim", PARAMS_FORMAT_VERSION, tmp_path / "bad.json")
    with pytest.raises(DataError, match="no shipped residual model"):
        load_shipped("slim", PARAMS_FORMAT_VERSION, tmp_path / "missing.json")


def test_the_fits_own_batch_errors_widen_the_batch_axis_where_it_extrapolates_worse():
    truth = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(gpu="h100-sxm-80gb", batch=(1, 2, 4, 8, 16)))
    model = make_model("slim", n_starts=0).fit(df)
    own = model.own_batch_errors(df)
    assert set(own["axis"]) == {"batch"} and "throughput" in set(own["quantity"])
    n_curves = df.groupby(["model", "input_len", "output_len"]).ngroups
    assert (own["quantity"] == "throughput").sum() == n_curves  # one held-out row (B = 16) per curve
    shipped = load_shipped("slim", PARAMS_FORMAT_VERSION)
    same = shipped.pooled_with(own, "batch")
    assert same.axes["batch"]["throughput"].n == shipped.axes["batch"]["throughput"].n + n_curves
    assert "pooled with" in same.source and same.axes[POOLED] == shipped.axes[POOLED]
    # errors ten times any the shipped model holds push its batch quantiles up, never down
    worse = own.assign(
        log_error=own["log_error"].abs() + 10 * max(shipped.axes["batch"]["throughput"].quantiles)
    )
    wide = np.asarray(shipped.pooled_with(worse, "batch").axes["batch"]["throughput"].quantiles)
    base = np.asarray(shipped.axes["batch"]["throughput"].quantiles)
    assert np.all(wide >= base - 1e-12) and wide[-1] > base[-1]
    # too few curves to hold out: no errors, the shipped model as it is
    assert len(model.own_batch_errors(df[df["batch_size"] <= 2])) == 0
    assert shipped.pooled_with(model.own_batch_errors(df[df["batch_size"] <= 2]), "batch") is shipped


def test_slim_fit_with_intervals_imports_no_experiment(tmp_path):
    truth = SlimModel.with_params(SLIM_TRUE_PARAMS, gpu="h100-sxm-80gb")
    csv = tmp_path / "runs.csv"
    synthesize(truth, grid(gpu="h100-sxm-80gb", batch=(1, 2, 4, 8))).to_csv(csv, index=False)
    code = (
        "import sys; from slimlib.cli.main import main\n"
        f"rc = main(['fit', {str(csv)!r}, '--out', {str(tmp_path / 'p.json')!r}, '--intervals', '--quiet', "
        "'--starts', '0'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('slimlib.experiments')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
    saved = json.loads((tmp_path / "p.json").read_text())
    assert "pooled with" in saved["intervals"]["residuals"]["source"]
