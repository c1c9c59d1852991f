"""Calibration by nonlinear least squares (paper Sec. VI), shared by SLIM, its ablations and the recommended model.

Parameters minimize the sum of squared relative throughput errors with `scipy.optimize.least_squares`
(trust-region reflective, bounds), from a deterministic set of starts (the specs' initial values, then a seeded Sobol
sample of the box); the best solution wins. Standard errors come from the Jacobian at the optimum,
``cov = s^2 (J^T J)^+`` with ``s^2 = RSS / (n - p)``; the 95% intervals are clipped to the parameter's physical
bounds (``ci_clipped`` says where).

A model is a list of terms (`slimlib.model.terms`): its parameters are the terms' specs, its times their sum
(`slimlib.model.terms.compose`, Eqs. 5 and 9).

Few-point fits: with fewer rows than free parameters every parameter whose spec carries a measured prior
(`slimlib.model.priors`) is held at it and the rest is fitted; ``held_reasons_`` and `summary` say which and why.

Prior test (models with ``test_priors_at_bound``, the recommended one): a parameter with a measured prior that the fit
puts on a bound of its box is one the rows do not resolve there (a bound is a limit, not a measurement); the fit is
repeated with every such parameter held at its prior, and that hold is kept unless an F-test against the free fit
rejects it at `PRIOR_TEST_LEVEL` (``held_reasons_`` gives F and p); while a refit puts another such parameter on a
bound, that one is tested in turn, every hold together. With ``device_priors`` (the recommended model) a prior is the
device's own measurement where the registry has one (`slimlib.model.priors.device_prior`), in the prior test and
the few-point hold alike.

Stability (``fit_info_["stability"]``): how many starts reached the best cost (within `COST_RTOL`), and the spread
of each parameter over those near-best starts relative to its estimate (or, for an estimate near 0, to
`SPREAD_FLOOR` times its typical scale: 1 ms for ``t_fixed``). A fit is flagged unstable when a parameter
spreads by more than `SPREAD_RTOL` over the near-best starts (the data do not pin it: a flat valley) or when a
single start of several converged ones reached the best cost (another seed may miss it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self

import numpy as np
import pandas as pd

from slimlib.errors import DataError, FitError, SlimError
from slimlib.metrics import mape, relative_error
from slimlib.model import equations as eq
from slimlib.model.base import (
    PRED_COLUMNS,
    Arrays,
    Estimator,
    IdentifiabilityWarning,
    Progress,
    one_batch_size_message,
)
from slimlib.model.features import Features, FloatArray, model_features, refuse_unread_layers, resolve_gpu
from slimlib.model.intervals import INTERVAL_QUANTITIES, IntervalWarning
from slimlib.model.params import ParamSpec
from slimlib.model.priors import Prior, device_prior
from slimlib.model.served import CLIENT_CODE, client_codes, closed_loop_clients, running_cap
from slimlib.model.terms import (
    ACTIVATION_WORK,
    ATTENTION_FACTOR,
    BATCH_FIXED,
    LAYER_STEP_OVERHEAD,
    STEP_OVERHEAD,
    Contribution,
    Term,
    adjust_features,
    compose,
    contributions,
    fixed_times,
    model_specs,
)
from slimlib.model.terms import specs as ps
from slimlib.model.terms.batch import chunked_prefill_column
from slimlib.model.terms.rooflines import DECODE_GEMMS, layer_floor_applies
from slimlib.registry.gpus import GPU, get_gpu
from slimlib.schema import validate_table

if TYPE_CHECKING:
    from scipy.optimize import OptimizeResult

Components = tuple[FloatArray, FloatArray, FloatArray]
#: how far a stored correlation matrix may be from symmetric, and its entries beyond [-1, 1], by rounding
CORR_TOLERANCE = 1e-3
#: absolute correlation above which two parameters are reported as not separately identifiable
CORR_THRESHOLD = 0.99
#: starts whose cost is within this relative tolerance of the best are "near-best"
COST_RTOL = 1e-6
#: relative spread of a parameter over the near-best starts above which a fit is flagged unstable
SPREAD_RTOL = 1e-3
#: a spread is relative to max(|estimate|, SPREAD_FLOOR x the parameter's typical scale)
SPREAD_FLOOR = 1e-3
#: an estimate within BOUND_TOL x its spec's scale of a bound is on it
BOUND_TOL = 1e-4
#: significance level of the prior test (`CalibratedModel._prior_test`): a hold at the prior that raises the cost
#: with p below it is rejected
PRIOR_TEST_LEVEL = 0.05
#: a stored standard error above this many widths of its parameter's box is refused: a corrupted file (76
#: cross-validation fits, unresolved parameters included, reach 300 widths at most)
MAX_STDERR_BOXES = 1e9
#: the forward-difference step of the fit's Jacobian, relative to max(1, |z|) in the solver's scaled parameters
#: (the square root of the double-precision epsilon, as scipy's '2-point')
FD_STEP = float(np.sqrt(np.finfo(float).eps))


def _on_bound(s: ParamSpec, value: float) -> bool:
    """Whether `value` of `s` lies within `BOUND_TOL` x its scale of a bound of its box."""
    tol = BOUND_TOL * s.scale
    return bool(abs(value - s.lower) <= tol or abs(s.upper - value) <= tol)


def _unpack(
    held: dict[str, float], free: list[ParamSpec], scale: FloatArray, z: FloatArray
) -> dict[str, float]:
    """Every parameter: `held`, and the free ones from the solver's scaled vector `z`."""
    p = dict(held)
    p.update({s.name: float(v) for s, v in zip(free, z * scale, strict=True)})
    return p


def _finite(r: FloatArray) -> FloatArray:
    """Residuals with every non-finite one read as 1e6 (the solver needs numbers; far from any optimum)."""
    return np.where(np.isfinite(r), r, 1e6)


def _stacked(arrays: dict[str, Any], copies: int) -> dict[str, Any]:
    """`arrays` with each per-row array (1-d, as long as ``batch_size`` or the first array) repeated `copies`
    times end to end; other values as they are."""
    n = len(np.atleast_1d(arrays["batch_size"] if "batch_size" in arrays else next(iter(arrays.values()))))
    out = {}
    for key, v in arrays.items():
        a = np.asarray(v) if isinstance(v, np.ndarray) else None
        if a is not None and a.ndim > 1:
            raise SlimError(f"feature {key!r} has shape {a.shape}; a fit's features are one value per row")
        out[key] = np.tile(a, copies) if a is not None and a.shape == (n,) else v
    return out


@dataclass(frozen=True)
class _Search:
    """One multi-start search: the best solver result, the free specs and their scales, every converged start's
    (cost, parameters), the number of starts."""

    best: OptimizeResult
    free: list[ParamSpec]
    scale: FloatArray
    solutions: list[tuple[float, FloatArray]]
    n_starts: int


def _hold_f_test(fit: _Search, held: _Search, q: int) -> tuple[float, float, int]:
    """(F, p, n - p) of holding `q` of `fit`'s free parameters, as `held` does: ``F = (RSS_held - RSS) / q /
    (RSS / (n - p))``, ``n`` the residuals, ``p`` the parameters free in `fit` (F infinite, p 0 where RSS is 0)."""
    from scipy.stats import f as f_dist  # imported where used (start-up time of `slim`)

    dof = int(np.size(fit.best.fun)) - len(fit.free)
    rss = 2.0 * float(fit.best.cost)
    stat = max(2.0 * float(held.best.cost) - rss, 0.0) / q / (rss / dof) if rss > 0 else np.inf
    return stat, float(f_dist.sf(stat, q, dof)), dof


def box_bounded_covariance(cov: FloatArray, specs: list[ParamSpec]) -> FloatArray:
    """`cov` of the free parameters `specs` after conditioning on each finite box ``[lower, upper]`` as a Gaussian
    observation of the parameter with the variance of the uniform over it, ``(upper - lower)^2 / 12``:
    ``C - C_b (C_bb + S)^-1 C_b^T``. A parameter its rows barely determine (a near-flat direction of ``J^T J``, a
    standard error far beyond the box) then keeps no more spread than its box allows, which the linearized
    ``s^2 (J^T J)^+`` alone does not bound (the delta method of `CalibratedModel.log_sds`); a well-determined one is
    almost unchanged."""
    cov = np.asarray(cov, dtype=float)
    box = [i for i, s in enumerate(specs) if math.isfinite(s.lower) and math.isfinite(s.upper)]
    if not box:
        return cov
    prior = np.diag([(specs[i].upper - specs[i].lower) ** 2 / 12.0 for i in box])
    cb = cov[:, box]
    out = cov - cb @ np.linalg.solve(cov[np.ix_(box, box)] + prior, cb.T)
    return np.asarray((out + out.T) / 2.0, dtype=float)


def one_sd_log_distance(relative_sd: FloatArray) -> FloatArray:
    """``log(1 + r)``: the log distance from a prediction to its linearized one-standard-deviation bound ``p (1 +
    r)``, `r` the delta method's relative standard deviation (`CalibratedModel.log_sds`)."""
    return np.asarray(np.log1p(relative_sd), dtype=float)


class CalibratedModel(Estimator):
    """A SLIM-like model: a list of terms (subclasses define `terms()`), calibrated by least squares.

    `predict`'s ``pred_ttft_s`` and ``pred_tpot_s`` are NaN here: Eq. 5's batch E2E splits into a batch prefill and
    decode, not into a request's first-token time and token gaps (the recommended model, `slimlib.model.slim`,
    and `slimlib.model.roofline_model` predict them).

    Parameters
    ----------
    gpu : registry name of the GPU the data were measured on; default: the table's ``gpu`` column.
    fixed : parameters held at given values instead of fitted.
    n_starts : Sobol starting points besides the default one (deterministic, seeded by `seed`).
    max_nfev : solver evaluations per start.
    seed : seed of the Sobol sample.
    """

    def __init__(
        self,
        gpu: str | None = None,
        *,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
    ) -> None:
        super().__init__(gpu)
        self.fixed = fixed
        self.n_starts = n_starts
        self.max_nfev = max_nfev
        self.seed = seed
        names = [s.name for s in self.param_specs()]
        unknown = [k for k in (fixed or {}) if k not in names]
        if unknown:
            raise SlimError(
                f"cannot fix unknown parameter(s) {unknown}; parameters of {self.variant!r}: {names}"
            )

    # -- the terms ----------------------------------------------------------------------------------------------
    def terms(self) -> tuple[Term, ...]:
        """The model's terms, in order (subclasses define them)."""
        raise NotImplementedError

    def param_specs(self) -> tuple[ParamSpec, ...]:
        """The terms' parameters, in order of first appearance (`slimlib.model.terms.model_specs`)."""
        return model_specs(self.terms())

    #: whether `fit` tests a hold at the prior for parameters it put on a bound (`_prior_test`); the recommended
    #: model does, the paper's model and the term candidates do not
    test_priors_at_bound = False
    #: whether a parameter's prior is the device's own measurement where the registry has one
    #: (`slimlib.model.priors.device_prior`), else its spec's; the recommended model's is
    device_priors = False
    #: during `fit`: what its evaluations compute once per feature set (`_fit_cached`), else None
    _fit_cache: list[tuple[Features, str, Any]] | None = None

    def _fit_cached(self, f: Features, what: str, make: Callable[[], Any]) -> Any:
        """`make()`, computed once per features `f` (by identity) and `what` while a fit runs, else each time."""
        if self._fit_cache is None:
            return make()
        for g, w, value in self._fit_cache:
            if g is f and w == what:
                return value
        value = make()
        self._fit_cache.append((f, what, value))
        return value

    def _components(self, p: dict[str, float], f: Features, hw: GPU) -> Components:
        """(prefill_s, decode_s, e2e_s) arrays: the sum of the terms (`slimlib.model.terms.compose`); during a fit
        the parameter-free terms' times (`slimlib.model.terms.fixed_times`) are computed once per feature set."""
        known = None
        if self._fit_cache is not None:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                known = self._fit_cached(f, "fixed times", lambda: fixed_times(self.terms(), f, hw))
        return compose(self.terms(), p, f, hw, known)

    def _features(self, df: pd.DataFrame, hw: GPU) -> Features:
        """Per-row features of `df` (`model_features`; the optional ``client``, ``static_batch``, ``num_prompts``,
        ``max_concurrency`` and ``chunked_prefill`` columns: `slimlib.model.served.client_codes` and
        `closed_loop_clients`), after the terms' adjustments (the effective batch)."""
        f = model_features(df, hw)
        refuse_unread_layers(f, self.variant, tuple(r for t in self.terms() for r in t.reads))
        f["client"] = client_codes(df)[0]
        f["static_batch"] = np.asarray(f["client"] == CLIENT_CODE["static"], dtype=float)
        f["num_prompts"] = (
            pd.to_numeric(df["num_prompts"], errors="coerce").to_numpy(dtype=float)
            if "num_prompts" in df.columns
            else np.full(len(df), np.nan)
        )
        f["chunked_prefill"] = chunked_prefill_column(df)
        f["clients"] = closed_loop_clients(df, f["client"])
        f["max_num_seqs"] = running_cap(df, f["max_num_seqs"])
        return adjust_features(self.terms(), f)

    def contributions(self, df: pd.DataFrame) -> dict[str, Contribution]:
        """Each term's (prefill, decode, fixed) seconds per row of `df` with the fitted parameters; they add up to
        `predict`'s prefill, decode and E2E (`slimlib.model.terms.contributions`)."""
        self.check_fitted()
        data = validate_table(df, require_target=False, require_gpu="gpu" in df.columns)
        hw = resolve_gpu(data, self.gpu_)
        return contributions(self.terms(), self.params_, self._features(data, hw), hw)

    def _held(self, data: pd.DataFrame, hw: GPU) -> dict[str, tuple[float, str]]:
        """Parameters held in a fit on `data` on `hw` -> (value, reason): the constructor's `fixed`; ``eta_attn`` at
        the device's measured decode-attention efficiency where `ATTENTION_FACTOR` reads that instead
        (unused); with `DECODE_GEMMS`, ``eta_w`` at its prior (`_priors`) where the decode GEMMs follow
        the device's measured curve (unused), or where `data` holds one architecture and the model has ``t_step``:
        the weight read ``W / (eta_w BW)`` is then one constant per step with ``t_step``, and the prior keeps the
        ridge of the decode GEMMs where the device puts it."""
        held = {k: (float(v), "fixed by the caller") for k, v in (self.fixed or {}).items()}
        terms = self.terms()
        eff = hw.decode_attention_eff
        if eff is not None and "eta_attn" not in held and any(t is ATTENTION_FACTOR for t in terms):
            held["eta_attn"] = (
                float(eff),
                f"held at {eff:g}, unused: on {hw.name} the decode attention runs at the device's measured "
                "efficiency (registry decode_attention_eff)",
            )
        prior = self._priors(hw).get("eta_w", ps.ETA_W.prior)
        if prior is None or "eta_w" in held or not any(t is DECODE_GEMMS for t in terms):
            return held
        if hw.decode_gemm_curve:
            held["eta_w"] = (
                prior.median,
                f"held at prior {prior.median:g}, unused: on {hw.name} the decode GEMMs follow the device's measured "
                "curve (registry decode_gemm_curve), weight read included",
            )
        elif any(t is STEP_OVERHEAD for t in terms) and data["model"].nunique() == 1:
            held["eta_w"] = (
                prior.median,
                f"held at prior {prior.median:g} ({prior.source}): one architecture, so the per-step weight read "
                "and t_step are one constant; the prior keeps the decode GEMMs' ridge where the device puts it",
            )
        return held

    def _layer_hold(
        self, feats: Features, held: dict[str, tuple[float, str]]
    ) -> dict[str, tuple[float, str]]:
        """`held` plus the per-step overheads the rows cannot tell apart: ``t_layer`` = 0 when the model has a
        per-layer step overhead (`LAYER_STEP_OVERHEAD`) and the rows hold one layer count (``t_layer L`` is then
        one constant per step with ``t_step``), ``t_act`` = 0 when the model has `ACTIVATION_WORK` and the rows hold
        one ``L D`` (``t_act B L D / 1024`` is then one constant per sequence and step with ``alpha``), and ``t_fixed`` = 0 when the model has `STEP_OVERHEAD` and the rows
        hold one output length (``t_step OL`` is then one constant per batch with ``t_fixed``): the constant goes
        to ``t_step``, because fits on rows of several output lengths put most of it there (the public H100 and
        MI300X/MI250 curves; `scripts/hold_evidence.py` prints them)."""
        names = {t.name for t in self.terms()}
        out = dict(held)
        if (
            LAYER_STEP_OVERHEAD.name in names
            and "t_layer" not in out
            and np.unique(feats["n_layers_total"]).size == 1
        ):
            why = (
                "held at 0: the rows hold one layer count, so t_layer L and t_step are one constant per step"
            )
            out["t_layer"] = (0.0, why)
        if (
            ACTIVATION_WORK.name in names
            and "t_act" not in out
            and np.unique(feats["n_layers_total"] * feats["hidden_size"]).size == 1
        ):
            why = (
                "held at 0: the rows hold one layer count times width L D, so t_act B L D / 1024 and the per-token "
                "alpha are one constant per sequence and step"
            )
            out["t_act"] = (0.0, why)
        if (
            STEP_OVERHEAD.name in names
            and BATCH_FIXED.name in names
            and not {"t_step", "t_fixed"} & set(out)
            and np.unique(feats["output_len"]).size == 1
        ):
            why = (
                "held at 0: the rows hold one output length, so t_step OL and t_fixed are one constant per batch; "
                "it is given to t_step, where fits on several output lengths put it"
            )
            out["t_fixed"] = (0.0, why)
        return out

    def _priors(self, hw: GPU) -> dict[str, Prior]:
        """Each parameter's prior on `hw`: its spec's, or with ``device_priors`` the device's own measurement where
        the registry has one (`slimlib.model.priors.device_prior`); parameters without a prior are left out. With
        `DECODE_GEMMS` on a device with a measured layer floor, ``eta_w``'s is the bandwidth efficiency
        of the floor's measured line (registry ``layer_floor_eff``), whatever ``device_priors``: beside the floor,
        the weight read is that line's slope, not the whole time's share (`slimlib.model.priors.WEIGHT_READ`)."""
        out = {}
        for s in self.param_specs():
            if s.prior is not None:
                measured = device_prior(s.name, hw) if self.device_priors else None
                out[s.name] = measured or s.prior
        floor = any(t is DECODE_GEMMS for t in self.terms())
        if floor and "eta_w" in out and layer_floor_applies(hw):
            v = float(hw.layer_floor_eff or 0.0)  # set: layer_floor_applies
            out["eta_w"] = Prior(v, v, v, 0.0, 1, f"{hw.name}: the bandwidth efficiency of the measured "
                                 "layer-floor line, registry layer_floor_eff (its source: layer_floor_source)")  # fmt: skip
        return out

    def _hold_at_priors(
        self, n_rows: int, held: dict[str, tuple[float, str]], priors: dict[str, Prior], word: str = "rows"
    ) -> dict[str, tuple[float, str]]:
        """`held` plus every free parameter that has a prior (`priors`, `_priors`), at it, when `n_rows` (measured
        values, `_observations`, called `word`) < the free parameters."""
        free = [s for s in self.param_specs() if s.name not in held]
        if n_rows >= len(free):
            return held
        out = dict(held)
        for s in free:
            pr = priors.get(s.name)
            if pr is not None:
                out[s.name] = (pr.median, f"held at prior {pr.median:g} (range {pr.low:g}-{pr.high:g}, "
                                          f"{pr.source}): {n_rows} {word} < {len(free)} free "
                                          "parameters")  # fmt: skip
        return out

    def _units(self) -> dict[str, str]:
        return {s.name: s.unit for s in self.param_specs()}

    def transfer_scaling(self) -> dict[str, str]:
        """Each parameter's `slimlib.model.params.ParamSpec.scaling`: the hardware enters through the registry's
        peaks in the equations, so efficiencies and host overheads are kept; seconds of GPU work are scaled."""
        return {s.name: s.scaling for s in self.param_specs()}

    # -- fit ----------------------------------------------------------------------------------------------------
    def fit(self, df: pd.DataFrame, *, progress: Progress | None = None) -> Self:
        """Calibrate on a table in the `slimlib.schema` layout; returns self. `progress(done, total)` is called
        after each start of the multi-start search."""
        data = validate_table(df)
        hw = resolve_gpu(data, self.gpu, fitting=True)
        feats = self._features(data, hw)
        y = data["throughput_tok_s"].to_numpy(dtype=float)
        specs = self.param_specs()
        n_obs, word = self._observations(data)
        priors = self._priors(hw)
        held_why = self._hold_at_priors(n_obs, self._layer_hold(feats, self._held(data, hw)), priors, word)
        held = {k: v for k, (v, _) in held_why.items()}
        free = [s for s in specs if s.name not in held]
        if n_obs < len(free):
            at_prior = [k for k in held if k in priors]
            raise FitError(
                f"{n_obs} {word} cannot determine {len(free)} free parameters "
                f"({', '.join(s.name for s in free)})"
                + (
                    f", even with {', '.join(at_prior)} held at "
                    f"{'its prior' if len(at_prior) == 1 else 'their priors'}"
                    if at_prior
                    else ""
                )
                + "; profile more configurations or fix some parameters"
            )
        targets = self._fit_targets(data)
        self._fit_cache = []
        try:
            search = self._search(feats, hw, targets, held_why, progress)
            if self.test_priors_at_bound:
                search, held_why = self._prior_test(
                    search, held_why, lambda h: self._search(feats, hw, targets, h, None), priors
                )
        finally:
            self._fit_cache = None
        best, free, scale = search.best, search.free, search.scale
        held = {k: v for k, (v, _) in held_why.items()}

        self.gpu_ = hw.name
        every = _unpack(held, free, scale, best.x)
        self.params_ = {s.name: every[s.name] for s in specs}
        self.held_ = sorted(held)
        self.held_reasons_ = {k: why for k, (_, why) in sorted(held_why.items())}
        self.free_params_ = [s.name for s in free]
        self._set_uncertainty(best, free, scale, int(np.size(best.fun)))
        pred = self._predict_rows(data, hw, "none")[0]
        self.fit_info_ = {
            "n_rows": int(len(y)),
            "models": sorted(set(data["model"])),
            "cost": float(best.cost),
            "train_mape_pct": mape(y, pred),
            "nfev": int(best.nfev),
            "solver_message": str(best.message),
            "stability": _stability(search.solutions, float(best.cost), free, search.n_starts),
            "held_reasons": dict(self.held_reasons_),
            "batch_sizes": sorted({float(b) for b in data["batch_size"]}),
        }
        self._warn_if_not_identifiable()
        if len(self.fit_info_["batch_sizes"]) == 1:
            warnings.warn(
                f"{self.variant}: " + one_batch_size_message(self.fit_info_["batch_sizes"][0]),
                IdentifiabilityWarning, stacklevel=2,
            )  # fmt: skip
        return self

    def _search(
        self,
        feats: Features,
        hw: GPU,
        targets: dict[str, FloatArray],
        held_why: dict[str, tuple[float, str]],
        progress: Progress | None,
    ) -> _Search:
        """The multi-start least-squares search with the parameters of `held_why` held; FitError when no start
        converges."""
        held = {k: v for k, (v, _) in held_why.items()}
        free = [s for s in self.param_specs() if s.name not in held]
        scale = np.array([s.scale for s in free])
        lo = np.array([s.lower for s in free]) / scale
        hi = np.array([s.upper for s in free]) / scale

        residuals, jacobian = self._objective(feats, hw, targets, held, free)
        from scipy.optimize import least_squares  # imported where used (start-up time of `slim`)

        best: OptimizeResult | None = None
        failures: list[str] = []
        solutions: list[tuple[float, FloatArray]] = []
        starts = self._starts(free, lo, hi)
        for i, z0 in enumerate(starts):
            try:
                res = least_squares(
                    residuals, z0, jac=jacobian, bounds=(lo, hi), method="trf", x_scale=1.0,
                    ftol=1e-12, xtol=1e-12, gtol=1e-12, max_nfev=self.max_nfev,
                )  # fmt: skip
            except (
                DataError
            ):  # a data error (e.g. a GPU without link bandwidth for TP rows) reaches the user as itself
                raise
            except ValueError as exc:  # e.g. residuals not finite at start
                failures.append(str(exc))
            else:
                if res.status <= 0 or not np.isfinite(res.cost):
                    failures.append(str(res.message))
                else:
                    solutions.append((float(res.cost), np.asarray(res.x, dtype=float) * scale))
                    if best is None or res.cost < best.cost - 1e-15:
                        best = res
            if progress is not None:
                progress(i + 1, len(starts))
        if best is None:
            raise FitError(
                f"the fit did not converge from any of {len(starts)} starts ({failures[-1] if failures else '?'}); "
                "check the data for outliers or raise max_nfev"
            )
        return _Search(best, free, scale, solutions, len(starts))

    def _objective(
        self,
        feats: Features,
        hw: GPU,
        targets: dict[str, FloatArray],
        held: dict[str, float],
        free: list[ParamSpec],
    ) -> tuple[Callable[[FloatArray], FloatArray], Callable[[FloatArray], FloatArray]]:
        """The fit's residuals and their Jacobian as functions of the free parameters in the solver's scale
        (each divided by its spec's ``scale``); non-finite residuals read as 1e6 (`_finite`)."""
        n_rows = len(feats["batch_size"])
        scale = np.array([s.scale for s in free])
        hi = np.array([s.upper for s in free]) / scale
        last: list[FloatArray] = []  # the last point `residuals` evaluated and its residuals

        def residuals(z: FloatArray) -> FloatArray:
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                r = self._fit_residuals(_unpack(held, free, scale, z), feats, hw, targets)[0]
            last[:] = [np.array(z, dtype=float), _finite(r)]
            return last[1]

        def jacobian(z: FloatArray) -> FloatArray:
            """Forward differences in every free parameter, all in one evaluation on a copy of the rows per
            parameter (`_stacked`); a step that would leave the box is taken backwards."""
            r0 = last[1] if last and np.array_equal(last[0], z) else residuals(z)
            if not len(z):  # every parameter held: no column
                return np.empty((r0.size, 0))
            h = FD_STEP * np.maximum(1.0, np.abs(z))
            h = np.where(z + h <= hi, h, -h)
            h = (z + h) - z  # the step as represented
            k = len(z)
            many = self._fit_cached(feats, f"{k} copies", lambda: _stacked(feats, k))
            many_targets = self._fit_cached(targets, f"{k} copies", lambda: _stacked(targets, k))
            stepped = z[None, :] + np.diag(h)  # copy j: parameter j stepped
            p: dict[str, Any] = dict(held)
            p.update({s.name: np.repeat(stepped[:, j] * scale[j], n_rows) for j, s in enumerate(free)})
            with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
                r = self._fit_residuals(p, many, hw, many_targets, copies=k)
            return np.asarray(((_finite(r) - r0) / h[:, None]).T)

        return residuals, jacobian

    def _prior_test(
        self,
        search: _Search,
        held_why: dict[str, tuple[float, str]],
        refit: Callable[[dict[str, tuple[float, str]]], _Search],
        priors: dict[str, Prior],
    ) -> tuple[_Search, dict[str, tuple[float, str]]]:
        """`search` and `held_why`, or, where the fit put parameters that carry a measured prior on a bound of their
        box, the refit with those held at their priors when the rows do not reject that: an F-test against the free
        fit (`_hold_f_test`, every hold of the test counted) at `PRIOR_TEST_LEVEL`; `refit(held_why)` searches again with those held; `priors` are the fit's (`_priors`).
        Repeated while a refit puts another such parameter on a bound (every hold tested together against the free
        fit); the first rejected round stops it, keeping the last accepted one."""
        current, out = search, dict(held_why)
        tested: list[tuple[ParamSpec, float]] = []
        while np.size(search.best.fun) > len(search.free):  # residual degrees of freedom left to test with
            x = np.asarray(current.best.x, dtype=float) * current.scale
            at = [
                (s, float(v))
                for s, v in zip(current.free, x, strict=True)
                if s.name in priors and _on_bound(s, float(v))
            ]
            if not at:
                break
            trial = dict(out)
            trial.update({s.name: (priors[s.name].median, "") for s, _ in at})
            try:
                alt = refit(trial)
            except FitError:
                break
            q = len(tested) + len(at)
            stat, p_value, dof = _hold_f_test(search, alt, q)
            if p_value < PRIOR_TEST_LEVEL:
                break
            tested += at
            for s, v in at:
                pr = priors[s.name]
                out[s.name] = (
                    pr.median,
                    f"held at prior {pr.median:g} ({pr.source}): the fit put it on its bound {v:g}, where the rows "
                    f"do not resolve it (holding {', '.join(t.name for t, _ in tested)} against the free fit: "
                    f"F = {stat:.2f}, p = {p_value:.2f} >= {PRIOR_TEST_LEVEL:g} with {q} and {dof} degrees of "
                    "freedom)",
                )
            current = alt
        return current, out

    def _observations(self, data: pd.DataFrame) -> tuple[int, str]:
        """The measured values the fit compares with (here one throughput per row) and what they are, for
        messages: fewer than the free parameters hold the priors, and fewer than those left free is an error."""
        return len(data), "rows"

    def _fit_targets(self, data: pd.DataFrame) -> dict[str, FloatArray]:
        """The measured arrays the fit compares with (here the throughput; a subclass may add latencies)."""
        return {"throughput": data["throughput_tok_s"].to_numpy(dtype=float)}

    def _fit_residuals(
        self, p: dict[str, Any], feats: Features, hw: GPU, targets: dict[str, FloatArray], copies: int = 1
    ) -> FloatArray:
        """Residuals the fit minimizes: relative throughput errors (module docstring); with `copies` the features
        and targets hold that many copies of the rows (`_stacked`, the parameters a value per row) and the result
        is one row of residuals per copy."""
        _, _, e2e = self._components(p, feats, hw)
        pred = eq.throughput(feats["batch_size"], feats["input_len"], feats["output_len"], e2e)
        return relative_error(targets["throughput"], pred).reshape(copies, -1)

    def _warn_if_not_identifiable(self) -> None:
        problems = self.identifiability_problems()
        if problems:
            warnings.warn(
                f"{self.variant}: parameters not identifiable from the fitted data: " + "; ".join(problems)
                + ". Predictions may still fit, but do not interpret these values; add configurations that vary "
                "the quantities they scale with, or fix them.",
                IdentifiabilityWarning,
                stacklevel=3,
            )  # fmt: skip

    def _starts(self, free: list[ParamSpec], lo: FloatArray, hi: FloatArray) -> list[FloatArray]:
        """Deterministic starts: the specs' initial values, then a seeded Sobol sample of the (log-)box."""
        z_init = np.clip(np.array([s.init / s.scale for s in free]), lo, hi)
        starts = [z_init]
        if self.n_starts > 0 and free:
            from scipy.stats import qmc  # imported where used (start-up time of `slim`)

            u = qmc.Sobol(d=len(free), scramble=True, seed=self.seed).random(self.n_starts)
            for row in u:
                z = np.empty(len(free))
                for j, s in enumerate(free):
                    if s.lower > 0:  # log-uniform between the bounds
                        z[j] = (
                            np.exp(np.log(s.lower) + row[j] * (np.log(s.upper) - np.log(s.lower))) / s.scale
                        )
                    else:  # uniform over [lower, min(upper, lower + 100 scale)]
                        top = min(s.upper, s.lower + 100 * s.scale)
                        z[j] = (s.lower + row[j] * (top - s.lower)) / s.scale
                starts.append(np.clip(z, lo, hi))
        return starts

    def _set_uncertainty(self, res: OptimizeResult, free: list[ParamSpec], scale: FloatArray, n: int) -> None:
        names = [s.name for s in free]
        jac = np.asarray(res.jac, dtype=float)
        dof = n - len(free)
        s2 = 2.0 * res.cost / dof if dof > 0 else np.nan
        cov = np.linalg.pinv(jac.T @ jac) * s2 * np.outer(scale, scale)
        se = np.sqrt(np.clip(np.diag(cov), 0, None))
        with np.errstate(divide="ignore", invalid="ignore"):
            corr = cov / np.outer(se, se)
        self.stderr_ = {k: float(v) for k, v in zip(names, se, strict=True)}
        self.stderr_.update({k: 0.0 for k in self.held_})
        self.corr_ = pd.DataFrame(corr, index=names, columns=names)
        sv = np.linalg.svd(jac, compute_uv=False) if jac.size else np.array([])
        self.jac_rank_ = int(np.sum(sv > sv.max() * 1e-8)) if sv.size else 0

    # -- predict ------------------------------------------------------------------------------------------------
    def _arrays(
        self, feats: Features, hw: GPU, p: dict[str, float] | None = None, served: str = "means"
    ) -> Arrays:
        """`PRED_COLUMNS`'s arrays at the parameters `p` (default: the fitted ones), with as much of the served
        latencies as `served` asks (`slimlib.model.base.SERVED_LEVELS`) where the model predicts them."""
        with np.errstate(divide="ignore", invalid="ignore"):
            pre, dec, e2e = self._components(self.params_ if p is None else p, feats, hw)
            thr = eq.throughput(feats["batch_size"], feats["input_len"], feats["output_len"], e2e)
        return thr, e2e, pre, dec

    def _predict_rows(self, data: pd.DataFrame, hw: GPU, served: str = "all") -> Arrays:
        return self._arrays(self._features(data, hw), hw, served=served)

    def covariance(self) -> pd.DataFrame:
        """Covariance of the free parameters (``corr_`` scaled by the standard errors; NaN where unknown)."""
        self.check_fitted()
        names = list(self.corr_.index)
        se = np.array([float(self.stderr_.get(k, np.nan)) for k in names], dtype=float)
        cov = self.corr_.to_numpy(dtype=float) * np.outer(se, se)
        return pd.DataFrame(cov, index=names, columns=names)

    def log_sds(self, data: pd.DataFrame, hw: GPU) -> dict[str, FloatArray] | None:
        """Standard deviation of the log of each predicted quantity (`INTERVAL_QUANTITIES`: throughput and E2E,
        and TTFT and TPOT where the method predicts them) per row: the delta method's relative standard deviation
        ``r = sqrt(g^T C g)`` (``g`` the forward differences of the log prediction in each free parameter, step
        1e-4 of max(|estimate|, spec scale) inside the bounds; ``C`` the `covariance` bounded by the parameters'
        boxes, `box_bounded_covariance`), given as ``log(1 + r)`` (`one_sd_log_distance`). That is ``r`` where
        ``r`` is small, and stays finite where a parameter the rows barely determine makes ``r`` exceed 1 (a
        ``t_fixed`` on its bound 0 with a standard error of 0.1 s under a TTFT of 10 ms: ``r`` = 10, the log slope
        times the deviation, gives a factor e^10 either way). Parameters without a finite covariance are left out,
        with an `IntervalWarning` naming them."""
        feats = self._features(data, hw)
        specs = {s.name: s for s in self.param_specs()}
        cov = self.covariance()
        finite = np.isfinite(cov.to_numpy())
        names = [k for i, k in enumerate(cov.index) if finite[i].all()]
        left_out = [k for k in cov.index if k not in names]
        if left_out:
            warnings.warn(
                f"{self.variant}: no parameter covariance for {', '.join(left_out)}; the interval leaves their "
                "uncertainty out", IntervalWarning, stacklevel=4,
            )  # fmt: skip
        cols = {q: PRED_COLUMNS.index(col) for q, (col, _) in INTERVAL_QUANTITIES.items()}

        def logs(p: dict[str, float]) -> dict[str, FloatArray]:
            arrays = self._arrays(feats, hw, p)
            return {q: np.log(arrays[i]) for q, i in cols.items() if i < len(arrays)}

        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            base = logs(self.params_)
            grads: dict[str, list[FloatArray]] = {q: [] for q in base}
            for k in names:
                s, v = specs[k], self.params_[k]
                h = 1e-4 * max(abs(v), s.scale)
                h = h if v + h <= s.upper else -h  # stay inside the bounds
                moved = logs({**self.params_, k: v + h})
                for q in base:
                    grads[q].append((moved[q] - base[q]) / h)
        if not names:
            return {q: np.zeros(len(data)) for q in base}
        c = box_bounded_covariance(cov.loc[names, names].to_numpy(), [specs[k] for k in names])
        out = {}
        for q, g in grads.items():
            ga = np.array(g)  # (params, rows)
            var = np.einsum("ir,ij,jr->r", ga, c, ga)
            out[q] = one_sd_log_distance(np.sqrt(np.clip(var, 0.0, None)))
        return out

    # -- parameters ---------------------------------------------------------------------------------------------
    def summary(self) -> pd.DataFrame:
        """Estimate, standard error, 95% interval (clipped to the bounds), bounds and flags per parameter, with units.

        Flags: ``at_bound`` (no interval: the normal approximation does not hold there), ``fixed`` (held; no
        interval), ``ci_clipped`` (the interval reached a physical bound and was cut there), ``start_dispersion`` (relative
        spread over the near-best starts, `fit_info_["stability"]`), ``unstable`` (that spread exceeds
        `SPREAD_RTOL`; the fit as a whole: ``fit_info_["stability"]["unstable"]``) and ``note``: why a parameter was held (e.g. "held at
        prior 0.845 ...") or what the flags mean in words."""
        table = super().summary()
        specs = {s.name: s for s in self.param_specs()}
        names = list(table.index)
        lower = np.array([specs[k].lower for k in names])
        upper = np.array([specs[k].upper for k in names])
        table["lower"], table["upper"] = lower, upper
        table["at_bound"] = [self._at_bound(specs[k]) for k in names]
        table["fixed"] = [k in self.held_ for k in names]
        raw_lo, raw_hi = table["ci95_low"].to_numpy(dtype=float), table["ci95_high"].to_numpy(dtype=float)
        table["ci95_low"], table["ci95_high"] = np.maximum(raw_lo, lower), np.minimum(raw_hi, upper)
        table["ci_clipped"] = (raw_lo < lower) | (raw_hi > upper)
        no_interval = table["at_bound"] | table["fixed"]
        table.loc[no_interval, ["ci95_low", "ci95_high"]] = np.nan
        table.loc[no_interval, "ci_clipped"] = False
        stab = dict(self.fit_info_.get("stability") or {})
        spread = dict(stab.get("relative_spread") or {})
        table["start_dispersion"] = [float(spread[k]) if spread.get(k) is not None else np.nan for k in names]
        table["unstable"] = [
            k not in self.held_ and bool(table.loc[k, "start_dispersion"] > SPREAD_RTOL) for k in names
        ]
        reasons = dict(getattr(self, "held_reasons_", {}))
        notes = []
        for k in names:
            r = table.loc[k]
            words = [reasons.get(k, "held")] if r["fixed"] else []
            words += ["at its bound: no interval"] if r["at_bound"] else []
            words += ["interval clipped at the bound"] if r["ci_clipped"] else []
            words += ["unstable across starts"] if r["unstable"] else []
            notes.append("; ".join(words))
        table["note"] = notes
        self._warn_if_not_identifiable()
        return table

    def _at_bound(self, s: ParamSpec) -> bool:
        return s.name not in self.held_ and _on_bound(s, self.params_[s.name])

    def identifiability_problems(self, corr_threshold: float = CORR_THRESHOLD) -> list[str]:
        """Plain-language list of at-bound, unresolved and strongly correlated parameters."""
        self.check_fitted()
        out = [f"{s.name} at bound" for s in self.param_specs() if self._at_bound(s)]
        for k in self.free_params_:
            se, est = self.stderr_.get(k, np.nan), self.params_[k]
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
    def to_dict(self) -> dict[str, Any]:
        d = super().to_dict()
        d["params"] = {s.name: self.params_[s.name] for s in self.param_specs()}
        d["stderr"] = {s.name: self.stderr_.get(s.name) for s in self.param_specs()}
        d["fixed"] = sorted(self.fixed or {})
        d["held"] = list(self.held_)
        d["bounds"] = {s.name: [s.lower, s.upper] for s in self.param_specs()}
        d["corr"] = {"names": list(self.corr_.index), "matrix": self.corr_.to_numpy(dtype=float).tolist()}
        return d

    def _set_state(self, state: dict[str, Any], where: str) -> None:
        names = [s.name for s in self.param_specs()]
        missing = [k for k in names if k not in self.params_]
        if missing:
            raise DataError(f"{where}: field 'params' lacks {', '.join(missing)}")
        self.params_ = {k: self.params_[k] for k in names}

    def _restore(self, d: dict[str, Any], where: str, gpu: str) -> None:
        super()._restore(d, where, gpu)
        for spec in self.param_specs():
            se = self.stderr_.get(spec.name, float("nan"))
            width = spec.upper - spec.lower if math.isfinite(spec.upper - spec.lower) else spec.scale
            if se > MAX_STDERR_BOXES * width:
                raise DataError(
                    f"{where}: field 'stderr' of {spec.name!r} is {se:.3g}, over {MAX_STDERR_BOXES:.0e} times its "
                    f"box [{spec.lower:g}, {spec.upper:g}]: no fit gives that; refit with `slim fit`"
                )
        held = d.get("held", d.get("fixed", []))
        self.held_ = sorted(str(k) for k in held)
        why = dict(self.fit_info_.get("held_reasons") or {})
        self.held_reasons_ = {k: str(why.get(k, "held")) for k in self.held_}
        self.free_params_ = [s.name for s in self.param_specs() if s.name not in self.held_]
        self.corr_ = _read_corr(d.get("corr"), self.free_params_, where)

    @classmethod
    def with_params(cls, params: dict[str, float], gpu: str, **kwargs: Any) -> Self:
        """A model that predicts with the given parameter values, without fitting (e.g. for what-if studies)."""
        model = cls(gpu=gpu, **kwargs)
        names = [s.name for s in model.param_specs()]
        missing = [k for k in names if k not in params]
        if missing:
            raise DataError(f"parameter(s) {', '.join(missing)} not given; {model.variant!r} needs {names}")
        model.gpu_ = get_gpu(gpu).name
        model.params_ = {k: float(params[k]) for k in names}
        model.stderr_ = {k: float("nan") for k in names}
        model.held_ = sorted(model.fixed or {})
        model.held_reasons_ = {k: "fixed by the caller" for k in model.held_}
        model.free_params_ = [k for k in names if k not in model.held_]
        model.fit_info_ = {}
        model.corr_ = pd.DataFrame(np.nan, index=model.free_params_, columns=model.free_params_)
        return model


def _read_corr(d: Any, free: list[str], where: str) -> pd.DataFrame:
    """The correlation matrix of a parameter file's ``corr`` field (files without one: NaN, no covariance)."""
    if d is None:
        return pd.DataFrame(np.nan, index=free, columns=free)
    try:
        names = [str(k) for k in d["names"]]
        m = np.array([[np.nan if x is None else float(x) for x in row] for row in d["matrix"]], dtype=float)
    except (KeyError, TypeError, ValueError):
        raise DataError(f"{where}: field 'corr' is malformed; refit with `slim fit`") from None
    if m.shape != (len(names), len(names)) or set(names) - set(free):
        raise DataError(
            f"{where}: field 'corr' does not match the free parameters {free}; refit with `slim fit`"
        )
    known = m[np.isfinite(m)]
    # a fit's matrix comes from the pseudo-inverse of an ill-conditioned J^T J: symmetric to about 1e-5, not exactly
    asymmetric = not np.allclose(m, m.T, rtol=0.0, atol=CORR_TOLERANCE, equal_nan=True)
    if np.isinf(m).any() or (np.abs(known) > 1.0 + CORR_TOLERANCE).any() or asymmetric:
        raise DataError(f"{where}: field 'corr' is not a correlation matrix (symmetric, entries in [-1, 1]); "
                        "refit with `slim fit`")  # fmt: skip
    return pd.DataFrame(m, index=names, columns=names)


def _stability(
    solutions: list[tuple[float, FloatArray]], best_cost: float, free: list[ParamSpec], n_starts: int
) -> dict[str, Any]:
    """Starts that reached the best cost and the relative spread of each parameter over them (module docstring)."""
    names = [s.name for s in free]
    tol = COST_RTOL * max(best_cost, 1e-300)
    near = [(c, x) for c, x in solutions if c <= best_cost + tol]
    xs = np.array([x for _, x in near]).reshape(len(near), len(names))
    best_x = min(near, key=lambda t: t[0])[1] if near else np.zeros(len(names))
    spread: dict[str, float] = {}
    for j, k in enumerate(names):
        width = float(xs[:, j].max() - xs[:, j].min()) if len(near) else 0.0
        ref = max(abs(float(best_x[j])), SPREAD_FLOOR * free[j].scale)  # a value near 0 counts at its floor
        spread[k] = width / ref
    reasons = [
        f"{k} spreads {v:.2g} (relative) over the near-best starts"
        for k, v in spread.items()
        if v > SPREAD_RTOL
    ]
    if len(near) == 1 and len(solutions) > 1:
        reasons.append(f"only 1 of {len(solutions)} converged starts reached the best cost")
    return {
        "n_starts": int(n_starts),
        "n_converged": len(solutions),
        "n_best": len(near),
        "cost_rtol": COST_RTOL,
        "spread_rtol": SPREAD_RTOL,
        "relative_spread": spread,
        "unstable": bool(reasons),
        "reasons": reasons,
    }


class TermModel(CalibratedModel):
    """A calibrated model of any term list (`slimlib.model.terms`), for term studies and challengers of the
    extrapolation cross-validation. Not a registered method: its fits are not saved to a
    parameter file (the registered models, `slimlib.model.methods.METHODS`, are). `test_priors_at_bound`: fit with
    the recommended model's prior test (`CalibratedModel._prior_test`); `device_priors`: with its priors, the
    device's own measurements where the registry has them (`CalibratedModel._priors`)."""

    variant = "terms"

    def __init__(
        self,
        term_list: tuple[Term, ...],
        gpu: str | None = None,
        *,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
        test_priors_at_bound: bool = False,
        device_priors: bool = False,
    ) -> None:
        self.term_list = term_list
        self.test_priors_at_bound = test_priors_at_bound
        self.device_priors = device_priors
        super().__init__(gpu, fixed=fixed, n_starts=n_starts, max_nfev=max_nfev, seed=seed)

    def terms(self) -> tuple[Term, ...]:
        return tuple(self.term_list)

    def to_dict(self) -> dict[str, Any]:
        raise SlimError(
            "a TermModel (a custom term list) has no parameter-file format; save a registered method "
            "(slimlib.model.methods.METHODS) instead"
        )
