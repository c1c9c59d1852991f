"""SLIM calibrated by nonlinear least squares (paper Sec. VI): `SlimModel` and the shared fitting machinery.

The six parameters of the paper (eta_c, t_fixed, eta_m, B0, alpha, gamma) are estimated by minimizing the sum of
squared relative throughput errors with `scipy.optimize.least_squares` (trust-region reflective, bounds), from a
deterministic set of starting points; the best solution wins. Standard errors come from the Jacobian at the optimum,
``cov = s^2 (J^T J)^+`` with ``s^2 = RSS / (n - p)``.

Variants (same contract): ``paper`` (Eqs. 5-12), ``no-kv-scan`` (ablation: M_dec = 0, so eta_m only scales T_d) and
``no-dense-decode`` (ablation: T_d = 0, alpha and gamma dropped). Other modules add variants with `register_variant`.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import ClassVar

import numpy as np
import pandas as pd
from scipy.optimize import least_squares
from scipy.stats import qmc

from slimlib.errors import (
    DataError,
    FitError,
    NotFittedError,
    SlimError,
    UnknownNameError,
    close_matches_message,
)
from slimlib.metrics import mape, relative_error
from slimlib.model import equations as eq
from slimlib.schema import row_label, validate_table

PARAMS_FORMAT = "slim-params"
PARAMS_FORMAT_VERSION = 1
PRED_COLUMNS = ("pred_throughput_tok_s", "pred_e2e_s", "pred_prefill_s", "pred_decode_s")


class IdentifiabilityWarning(UserWarning):
    """Some parameters are not identifiable from the fitted data (at a bound or strongly correlated)."""


@dataclass(frozen=True)
class ParamSpec:
    """One calibrated parameter: bounds, typical scale (used to condition the solver), initial value, unit."""

    name: str
    lower: float
    upper: float
    scale: float
    init: float
    unit: str
    doc: str


# ---------------------------------------------------------------------------------------------------------------
# Per-row model features from the architecture registry
# ---------------------------------------------------------------------------------------------------------------
@lru_cache(maxsize=512)
def _arch(name: str):
    from slimlib.registry.architectures import get_architecture

    return get_architecture(name)


FEATURE_NAMES = (
    "n_layers",
    "hidden_size",
    "d_kv",
    "ffn_size",
    "n_ffn_matrices",
    "kv_bytes",
    "kv_bytes_per_token",
    "weight_bytes_total",
)


def model_features(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Architecture features per row of `df` (column ``model``), looked up once per distinct model."""
    codes, uniques = pd.factorize(df["model"], sort=True)
    table = np.empty((len(uniques), len(FEATURE_NAMES)))
    for i, name in enumerate(uniques):
        try:
            a = _arch(str(name))
        except UnknownNameError as exc:
            pos = int(np.flatnonzero(codes == i)[0])
            raise UnknownNameError(f"{row_label(df, pos)}: {exc}") from None
        table[i] = [getattr(a, f) for f in FEATURE_NAMES]
    feats = {f: table[codes, j] for j, f in enumerate(FEATURE_NAMES)}
    feats["batch_size"] = df["batch_size"].to_numpy(dtype=float)
    feats["input_len"] = df["input_len"].to_numpy(dtype=float)
    feats["output_len"] = df["output_len"].to_numpy(dtype=float)
    return feats


def resolve_gpu(df: pd.DataFrame, gpu: str | None):
    """The one GPU of a table (or the given one); a table spanning several GPUs is an error."""
    from slimlib.registry.gpus import get_gpu

    names = sorted(set(df["gpu"].astype(str))) if "gpu" in df.columns else []
    if gpu is None:
        if not names:
            raise DataError("no 'gpu' column and no GPU given; add the column or pass the GPU name")
        canon = sorted({get_gpu(n).name for n in names})
        if len(canon) > 1:
            raise DataError(
                f"the table spans several GPUs ({', '.join(canon)}); SLIM parameters belong to one GPU: "
                "fit each GPU's rows separately"
            )
        return get_gpu(canon[0])
    hw = get_gpu(gpu)
    other = sorted({get_gpu(n).name for n in names} - {hw.name})
    if other:
        raise DataError(
            f"rows for GPU(s) {', '.join(other)} but the parameters are for {hw.name}; "
            "use parameters calibrated on that GPU, or fit a new set"
        )
    return hw


# ---------------------------------------------------------------------------------------------------------------
# Generic calibrated model
# ---------------------------------------------------------------------------------------------------------------
class CalibratedModel:
    """Base of SLIM-like models: subclasses define `param_specs()` and `_components(p, feats)`."""

    variant: ClassVar[str] = ""

    def __init__(
        self,
        gpu: str | None = None,
        *,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
    ):
        self.gpu = gpu
        self.fixed = dict(fixed or {})
        self.n_starts = int(n_starts)
        self.max_nfev = int(max_nfev)
        self.seed = int(seed)
        names = [s.name for s in self.param_specs()]
        unknown = [k for k in self.fixed if k not in names]
        if unknown:
            raise SlimError(
                f"cannot fix unknown parameter(s) {unknown}; parameters of {self.variant!r}: {names}"
            )

    # -- to be provided by subclasses -----------------------------------------------------------------------
    def param_specs(self) -> tuple[ParamSpec, ...]:
        raise NotImplementedError

    def _components(
        self, p: dict[str, float], f: dict[str, np.ndarray], hw
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (prefill_s, decode_s, e2e_s) arrays."""
        raise NotImplementedError

    def _features(self, df: pd.DataFrame, hw) -> dict[str, np.ndarray]:
        return model_features(df)

    # -- fit ----------------------------------------------------------------------------------------------------
    def fit(self, df: pd.DataFrame) -> CalibratedModel:
        """Calibrate on a table in the `slimlib.schema` layout; returns self."""
        data = validate_table(df)
        hw = resolve_gpu(data, self.gpu)
        feats = self._features(data, hw)
        y = data["throughput_tok_s"].to_numpy(dtype=float)
        specs = self.param_specs()
        free = [s for s in specs if s.name not in self.fixed]
        if len(data) < len(free):
            raise FitError(
                f"{len(data)} rows cannot determine {len(free)} free parameters ({', '.join(s.name for s in free)}); "
                "profile more configurations or fix some parameters"
            )
        scale = np.array([s.scale for s in free])
        lo = np.array([s.lower for s in free]) / scale
        hi = np.array([s.upper for s in free]) / scale

        def unpack(z: np.ndarray) -> dict[str, float]:
            p = dict(self.fixed)
            p.update({s.name: float(v) for s, v in zip(free, z * scale, strict=True)})
            return p

        def residuals(z: np.ndarray) -> np.ndarray:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                _, _, e2e = self._components(unpack(z), feats, hw)
                pred = eq.throughput(feats["batch_size"], feats["input_len"], feats["output_len"], e2e)
            r = relative_error(y, pred)
            return np.where(np.isfinite(r), r, 1e6)

        best = None
        failures = []
        for z0 in self._starts(free, lo, hi, scale):
            try:
                res = least_squares(
                    residuals, z0, bounds=(lo, hi), method="trf", x_scale=1.0,
                    ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=self.max_nfev,
                )  # fmt: skip
            except ValueError as exc:  # e.g. residuals not finite at start
                failures.append(str(exc))
                continue
            if res.status <= 0 or not np.isfinite(res.cost):
                failures.append(res.message)
                continue
            if best is None or res.cost < best.cost - 1e-15:
                best = res
        if best is None:
            raise FitError(
                f"the fit did not converge from any of {self.n_starts + 1} starts ({failures[-1] if failures else '?'}); "
                "check the data for outliers or raise max_nfev"
            )
        self.gpu_ = hw.name
        self.params_ = unpack(best.x)
        self.free_params_ = [s.name for s in free]
        self._set_uncertainty(best, free, scale, len(y))
        pred = self._predict_arrays(feats, hw)[0]
        self.fit_info_ = {
            "n_rows": int(len(y)),
            "models": sorted(set(data["model"])),
            "cost": float(best.cost),
            "train_mape_pct": mape(y, pred),
            "nfev": int(best.nfev),
            "solver_message": str(best.message),
        }
        return self

    def _starts(self, free, lo, hi, scale) -> list[np.ndarray]:
        """Deterministic starts: the specs' initial values, then a seeded Sobol sample of the (log-)box."""
        z_init = np.clip(np.array([s.init for s in free]) / scale, lo, hi)
        starts = [z_init]
        if self.n_starts > 0 and free:
            u = qmc.Sobol(d=len(free), scramble=True, seed=self.seed).random(self.n_starts)
            for row in u:
                z = np.empty(len(free))
                for j, s in enumerate(free):
                    if s.lower > 0:  # log-uniform between the bounds
                        z[j] = (
                            np.exp(np.log(s.lower) + row[j] * (np.log(s.upper) - np.log(s.lower))) / s.scale
                        )
                    else:  # uniform over [lower, min(upper, 100 * scale)]
                        top = min(s.upper, s.lower + 100 * s.scale)
                        z[j] = (s.lower + row[j] * (top - s.lower)) / s.scale
                starts.append(np.clip(z, lo, hi))
        return starts

    def _set_uncertainty(self, res, free, scale, n) -> None:
        p = len(free)
        names = [s.name for s in free]
        jac = np.asarray(res.jac, dtype=float)
        dof = n - p
        s2 = 2.0 * res.cost / dof if dof > 0 else np.nan
        cov_z = np.linalg.pinv(jac.T @ jac) * s2
        cov = cov_z * np.outer(scale, scale)
        se = np.sqrt(np.clip(np.diag(cov), 0, None))
        with np.errstate(divide="ignore", invalid="ignore"):
            corr = cov / np.outer(se, se)
        self.stderr_ = {k: float(v) for k, v in zip(names, se, strict=True)}
        for k in self.fixed:
            self.stderr_[k] = 0.0
        self.corr_ = pd.DataFrame(corr, index=names, columns=names)
        # rank deficiency: directions the data cannot see
        sv = np.linalg.svd(jac, compute_uv=False) if jac.size else np.array([])
        self.jac_rank_ = int(np.sum(sv > sv.max() * 1e-8)) if sv.size else 0

    # -- predict ------------------------------------------------------------------------------------------------
    def _check_fitted(self) -> None:
        if not hasattr(self, "params_"):
            raise NotFittedError(
                f"this {type(self).__name__} is not fitted: call fit(df) or load with from_json"
            )

    def _predict_arrays(self, feats, hw):
        with np.errstate(divide="ignore", invalid="ignore"):
            pre, dec, e2e = self._components(self.params_, feats, hw)
            thr = eq.throughput(feats["batch_size"], feats["input_len"], feats["output_len"], e2e)
        return thr, e2e, pre, dec

    def predict(self, df: pd.DataFrame) -> pd.DataFrame:
        """Predicted throughput (tok/s), E2E, prefill and decode time (s) per row, indexed like `df`."""
        self._check_fitted()
        data = validate_table(df, require_target=False, require_gpu="gpu" in df.columns)
        hw = resolve_gpu(data, self.gpu_)
        feats = self._features(data, hw)
        arrays = self._predict_arrays(feats, hw)
        return pd.DataFrame(dict(zip(PRED_COLUMNS, arrays, strict=True)), index=df.index)

    def score(self, df: pd.DataFrame) -> float:
        """Throughput MAPE (percent) on a table with measured ``throughput_tok_s``."""
        pred = self.predict(df)["pred_throughput_tok_s"]
        return mape(df["throughput_tok_s"].to_numpy(dtype=float), pred.to_numpy())

    # -- summary ------------------------------------------------------------------------------------------------
    def summary(self, *, corr_threshold: float = 0.99) -> pd.DataFrame:
        """Estimate, standard error, bounds and at-bound flag per parameter; warns when not identifiable."""
        self._check_fitted()
        rows = []
        for s in self.param_specs():
            est = self.params_[s.name]
            fixed = s.name in self.fixed
            tol = 1e-4 * s.scale
            at_bound = (not fixed) and (abs(est - s.lower) <= tol or abs(s.upper - est) <= tol)
            rows.append(
                {
                    "parameter": s.name,
                    "estimate": est,
                    "stderr": self.stderr_.get(s.name, np.nan),
                    "lower": s.lower,
                    "upper": s.upper,
                    "at_bound": bool(at_bound),
                    "fixed": fixed,
                    "unit": s.unit,
                }
            )
        table = pd.DataFrame(rows).set_index("parameter")
        problems = self.identifiability_problems(table, corr_threshold)
        if problems:
            warnings.warn(
                "parameters not identifiable from the fitted data: " + "; ".join(problems)
                + ". Predictions may still fit, but do not interpret these values; add configurations that vary "
                "the quantities they scale with, or fix them.",
                IdentifiabilityWarning,
                stacklevel=2,
            )  # fmt: skip
        return table

    def identifiability_problems(
        self, table: pd.DataFrame | None = None, corr_threshold: float = 0.99
    ) -> list[str]:
        """Plain-language list of at-bound, unresolved and strongly correlated parameters."""
        self._check_fitted()
        if table is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", IdentifiabilityWarning)
                table = self.summary(corr_threshold=corr_threshold)
        out = [f"{k} at bound" for k in table.index[table["at_bound"]]]
        for k in self.free_params_:
            se, est = table.loc[k, "stderr"], table.loc[k, "estimate"]
            if not np.isfinite(se) or (est != 0 and se > 10 * abs(est)):
                out.append(f"{k} unresolved (stderr {se:.3g} vs estimate {est:.3g})")
        c = self.corr_.to_numpy()
        names = list(self.corr_.index)
        for i in range(len(names)):
            for j in range(i + 1, len(names)):
                if np.isfinite(c[i, j]) and abs(c[i, j]) > corr_threshold:
                    out.append(f"{names[i]} and {names[j]} correlated ({c[i, j]:+.3f})")
        return out

    # -- persistence --------------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        self._check_fitted()
        return {
            "format": PARAMS_FORMAT,
            "format_version": PARAMS_FORMAT_VERSION,
            "variant": self.variant,
            "gpu": self.gpu_,
            "params": {s.name: self.params_[s.name] for s in self.param_specs()},
            "stderr": {s.name: self.stderr_.get(s.name) for s in self.param_specs()},
            "fixed": sorted(self.fixed),
            "bounds": {s.name: [s.lower, s.upper] for s in self.param_specs()},
            "fit": self.fit_info_,
            "options": self._options(),
        }

    def _options(self) -> dict:
        return {}

    def to_json(self, path: str | Path | None = None) -> str:
        """Serialize the fitted parameters as JSON (written to `path` when given); returns the text."""
        text = json.dumps(_finite_or_none(self.to_dict()), indent=2, sort_keys=True) + "\n"
        if path is not None:
            Path(path).write_text(text)
        return text

    @classmethod
    def from_json(cls, source: str | Path) -> CalibratedModel:
        """Load a parameter file (path or JSON text); returns an instance of the variant it records."""
        where, text = _read_source(source)
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DataError(f"{where}: not valid JSON ({exc}); give a file written by `slim fit`") from None
        if not isinstance(d, dict) or d.get("format") != PARAMS_FORMAT:
            raise DataError(
                f"{where}: not a SLIM parameter file (field 'format' should be {PARAMS_FORMAT!r})"
            )
        for key in ("variant", "gpu", "params"):
            if key not in d:
                raise DataError(f"{where}: field {key!r} is missing; regenerate the file with `slim fit`")
        klass, options = get_variant(d["variant"])
        options = {**options, **d.get("options", {})}
        fixed = {k: d["params"][k] for k in d.get("fixed", [])}
        model = klass(gpu=d["gpu"], fixed=fixed, **options)
        names = [s.name for s in model.param_specs()]
        missing = [k for k in names if k not in d["params"]]
        if missing:
            raise DataError(f"{where}: field 'params' lacks {', '.join(missing)}")
        bad = [
            k for k in names if not isinstance(d["params"][k], int | float) or not np.isfinite(d["params"][k])
        ]
        if bad:
            raise DataError(f"{where}: parameter(s) {', '.join(bad)} are not finite numbers")
        from slimlib.registry.gpus import get_gpu

        model.gpu_ = get_gpu(d["gpu"]).name
        model.params_ = {k: float(d["params"][k]) for k in names}
        model.stderr_ = {k: (np.nan if v is None else float(v)) for k, v in d.get("stderr", {}).items()}
        model.free_params_ = [k for k in names if k not in fixed]
        model.fit_info_ = d.get("fit", {})
        model.corr_ = pd.DataFrame(np.nan, index=model.free_params_, columns=model.free_params_)
        return model

    @classmethod
    def with_params(cls, params: dict[str, float], gpu: str, **kwargs) -> CalibratedModel:
        """A model that predicts with the given parameter values, without fitting (e.g. for what-if studies)."""
        from slimlib.registry.gpus import get_gpu

        model = cls(gpu=gpu, **kwargs)
        names = [s.name for s in model.param_specs()]
        missing = [k for k in names if k not in params]
        if missing:
            raise DataError(f"parameter(s) {', '.join(missing)} not given; {model.variant!r} needs {names}")
        model.gpu_ = get_gpu(gpu).name
        model.params_ = {k: float(params[k]) for k in names}
        model.stderr_ = {k: np.nan for k in names}
        model.free_params_ = [k for k in names if k not in model.fixed]
        model.fit_info_ = {}
        model.corr_ = pd.DataFrame(np.nan, index=model.free_params_, columns=model.free_params_)
        return model

    def __repr__(self) -> str:
        state = f"fitted on {self.gpu_}" if hasattr(self, "params_") else "not fitted"
        return f"{type(self).__name__}(variant={self.variant!r}, {state})"


def _read_source(source) -> tuple[str, str]:
    if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("{")):
        p = Path(source)
        if not p.is_file():
            raise DataError(f"{p}: no such parameter file; create one with `slim fit DATA.csv --out {p}`")
        return str(p), p.read_text()
    return "parameter JSON", str(source)


def _finite_or_none(obj):
    if isinstance(obj, dict):
        return {k: _finite_or_none(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite_or_none(v) for v in obj]
    if isinstance(obj, float | np.floating):
        return float(obj) if np.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    return obj


# ---------------------------------------------------------------------------------------------------------------
# SLIM as published
# ---------------------------------------------------------------------------------------------------------------
_SLIM_SPECS = (
    ParamSpec("eta_c", 1e-3, 1.0, 1.0, 0.5, "-", "prefill compute efficiency (Eq. 7)"),
    ParamSpec("t_fixed", 0.0, 1e3, 1.0, 0.1, "s", "batch-level fixed overhead (Eq. 5)"),
    ParamSpec("eta_m", 1e-3, 1.0, 1.0, 0.5, "-", "decode efficiency (Eq. 9)"),
    ParamSpec("B0", 0.0, 1e4, 10.0, 1.0, "requests", "batch offset (Eq. 9)"),
    ParamSpec("alpha", 0.0, 1.0, 1e-5, 1e-5, "s/token", "per-output-token overhead (Eq. 10)"),
    ParamSpec("gamma", 0.0, 1.0, 1e-6, 1e-6, "s/token", "dense projection/FFN coefficient (Eq. 10)"),
)


class SlimModel(CalibratedModel):
    """SLIM (paper Eqs. 5-12) with its six calibrated parameters; `variant` selects the paper model or an ablation.

    Parameters
    ----------
    gpu : registry name of the GPU the data were measured on; default: the table's ``gpu`` column.
    variant : ``"paper"``, ``"no-kv-scan"`` (drop M_dec from Eq. 9) or ``"no-dense-decode"`` (drop T_d).
    fixed : parameters held at given values instead of fitted.
    n_starts : number of Sobol starting points besides the default one (deterministic, seeded by `seed`).
    """

    _VARIANTS = ("paper", "no-kv-scan", "no-dense-decode")

    def __init__(self, gpu: str | None = None, variant: str = "paper", **kwargs):
        if variant not in self._VARIANTS:
            raise UnknownNameError(close_matches_message("SlimModel variant", variant, list(self._VARIANTS)))
        self.variant = variant
        super().__init__(gpu, **kwargs)

    def param_specs(self) -> tuple[ParamSpec, ...]:
        if self.variant == "no-dense-decode":
            return tuple(s for s in _SLIM_SPECS if s.name not in ("alpha", "gamma"))
        return _SLIM_SPECS

    def _options(self) -> dict:
        return {}

    def _components(self, p, f, hw):
        flops = eq.prefill_flops(
            f["batch_size"],
            f["input_len"],
            f["n_layers"],
            f["hidden_size"],
            f["d_kv"],
            f["ffn_size"],
            f["n_ffn_matrices"],
        )
        pre = eq.prefill_time(flops, hw.peak_flops, p["eta_c"])
        if self.variant == "no-dense-decode":
            dense = 0.0
        else:
            dense = eq.dense_decode_time(
                f["output_len"], f["n_layers"], f["hidden_size"], p["alpha"], p["gamma"]
            )
        if self.variant == "no-kv-scan":
            kv = 0.0
        else:
            kv = eq.decode_kv_bytes(
                f["n_layers"], f["d_kv"], f["kv_bytes"], eq.kv_scan_tokens(f["input_len"], f["output_len"])
            )
        dec = eq.decode_time(f["batch_size"], dense, kv, hw.mem_bw, p["eta_m"], p["B0"])
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])


# ---------------------------------------------------------------------------------------------------------------
# Variant registry: name -> (class, constructor options)
# ---------------------------------------------------------------------------------------------------------------
_VARIANT_REGISTRY: dict[str, tuple[type[CalibratedModel], dict]] = {
    "paper": (SlimModel, {"variant": "paper"}),
    "no-kv-scan": (SlimModel, {"variant": "no-kv-scan"}),
    "no-dense-decode": (SlimModel, {"variant": "no-dense-decode"}),
}
DEFAULT_VARIANT = "extended"  # lower MAPE than "paper" in every scenario of slimlib.experiments.evaluation


def register_variant(name: str, klass: type[CalibratedModel], options: dict | None = None) -> None:
    """Make a model variant available to `make_model`, `from_json` and `slim fit --variant`."""
    _VARIANT_REGISTRY[name] = (klass, dict(options or {}))


def variant_names() -> list[str]:
    _load_plugins()
    return sorted(_VARIANT_REGISTRY)


def get_variant(name: str) -> tuple[type[CalibratedModel], dict]:
    _load_plugins()
    if name not in _VARIANT_REGISTRY:
        raise UnknownNameError(close_matches_message("model variant", name, list(_VARIANT_REGISTRY)))
    return _VARIANT_REGISTRY[name]


def make_model(variant: str = DEFAULT_VARIANT, gpu: str | None = None, **kwargs) -> CalibratedModel:
    """A fresh, unfitted model of the named variant."""
    klass, options = get_variant(variant)
    return klass(gpu=gpu, **{**options, **kwargs})


def load_params(source: str | Path) -> CalibratedModel:
    """Load any variant's parameter file written by `to_json` / `slim fit`."""
    return CalibratedModel.from_json(source)


_PLUGINS = ("slimlib.model.extended",)


def _load_plugins() -> None:
    import importlib
    import importlib.util

    for mod in _PLUGINS:
        if importlib.util.find_spec(mod) is not None:
            importlib.import_module(mod)
