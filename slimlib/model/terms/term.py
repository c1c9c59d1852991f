"""A model term (one cost with its parameters) and how a list of terms makes a model (paper Eqs. 5 and 9).

A `Term` holds its parameter specs (`slimlib.model.params.ParamSpec`, priors and GPU scaling included) and a
vectorized function of (params, features, device) returning its `Times`:

* ``prefill`` and ``decode``: seconds it adds to the batch's prefill and decode phases;
* ``step``: seconds it adds to every decode step (the model multiplies their sum by the ``OL`` steps);
* ``request``: seconds per request inside Eq. 9's bracket ``[T_d + M_dec / BW]``, which the model multiplies by
  the decode factor;
* ``factor``: Eq. 9's decode factor ``(B + B0) / eta_m`` (at most one term of a model sets it; without one the
  factor is ``B``: every request's per-request time, once);
* ``fixed``: batch-level seconds outside both phases (Eq. 5's ``t_fixed``).

A term may instead (or also) adjust the features before any time is computed (``adjust``: the effective-batch
caps). `compose` adds the terms as Eq. 5 says, ``E2E = T_pre + T_dec + t_fixed`` with
``T_dec = OL sum(step) + factor x sum(request) + sum(decode)``; `contributions` gives each term's share of the three, so an
ablation (the list without a term) differs from the model by exactly that term's contribution.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from slimlib.errors import SlimError
from slimlib.model.features import Features, FloatArray
from slimlib.model.params import ParamSpec
from slimlib.registry.gpus import GPU

Params = Mapping[str, float]


@dataclass(frozen=True)
class Times:
    """Seconds a term contributes (see the module docstring); 0 where it has no such part."""

    prefill: ArrayLike = 0.0
    decode: ArrayLike = 0.0
    step: ArrayLike = 0.0
    request: ArrayLike = 0.0
    fixed: ArrayLike = 0.0
    factor: ArrayLike | None = None


TimeFn = Callable[[Params, Features, GPU], Times]
AdjustFn = Callable[[Features], Features]


@dataclass(frozen=True)
class Term:
    """One model term: a name, what it charges (``doc``, citing the paper's equation), its parameters, and its
    `Times` function and/or feature adjustment."""

    name: str
    doc: str
    specs: tuple[ParamSpec, ...] = ()
    times: TimeFn | None = None
    adjust: AdjustFn | None = None
    #: feature keys the term reads beyond the table's own (documentation and tests)
    reads: tuple[str, ...] = ()

    def __repr__(self) -> str:
        return f"Term({self.name!r}, params={[s.name for s in self.specs]})"


@dataclass(frozen=True)
class Contribution:
    """A term's seconds in the model's sum: prefill, decode (its ``step`` part times OL, its ``request`` part times
    the factor), and batch-level fixed time."""

    prefill: FloatArray
    decode: FloatArray
    fixed: FloatArray


def model_specs(terms: Iterable[Term]) -> tuple[ParamSpec, ...]:
    """The parameters of a term list in order of first appearance; a name two terms use must be one spec (one
    quantity), and a term name may appear once, else SlimError."""
    out: dict[str, ParamSpec] = {}
    seen: set[str] = set()
    for t in terms:
        if t.name in seen:
            raise SlimError(f"term {t.name!r} appears twice in one model; a model holds each term once")
        seen.add(t.name)
        for s in t.specs:
            if s.name in out and out[s.name] != s:
                raise SlimError(
                    f"term {t.name!r} defines parameter {s.name!r} differently from an earlier term; a name means "
                    "one quantity: give the new quantity its own name"
                )
            out.setdefault(s.name, s)
    return tuple(out.values())


def without(terms: Sequence[Term], *names: str) -> tuple[Term, ...]:
    """The term list without the named terms (an ablation); SlimError for a name the list does not hold."""
    have = [t.name for t in terms]
    missing = [n for n in names if n not in have]
    if missing:
        raise SlimError(f"no term(s) {missing} in {have}")
    return tuple(t for t in terms if t.name not in names)


def adjust_features(terms: Iterable[Term], f: Features) -> Features:
    """`f` after every term's feature adjustment, in list order."""
    for t in terms:
        if t.adjust is not None:
            f = t.adjust(f)
    return f


def _array(v: ArrayLike, shape: tuple[int, ...]) -> FloatArray:
    return np.broadcast_to(np.asarray(v, dtype=float), shape).astype(float)


def _summed(values: Iterable[ArrayLike], start: FloatArray) -> FloatArray:
    """`start` plus each of `values` in order, each broadcast to `start`'s shape: the sum of their `_array`s, the
    same numbers, without a copy per value (`compose` runs once per residual evaluation of a fit); a Python scalar 0
    (a `Times` part the term does not set) adds nothing and is skipped."""
    out = start
    for v in values:
        if type(v) is float and v == 0.0:
            continue
        out = out + np.asarray(v, dtype=float)
    return out if out.shape == start.shape else _array(np.broadcast_to(out, start.shape), start.shape)


def decode_factor(terms: Iterable[Term], times: Mapping[str, Times], f: Features) -> FloatArray:
    """Eq. 9's factor: the one term that sets it, else ``B``; SlimError when two terms set it."""
    setters = [t.name for t in terms if t.name in times and times[t.name].factor is not None]
    if len(setters) > 1:
        raise SlimError(f"terms {setters} each set Eq. 9's decode factor; a model has at most one")
    shape = np.shape(f["batch_size"])
    if setters:
        return _array(times[setters[0]].factor, shape)  # type: ignore[arg-type]
    return _array(f["batch_size"], shape)


def term_times(
    terms: Sequence[Term], p: Params, f: Features, hw: GPU, known: Mapping[str, Times] | None = None
) -> dict[str, Times]:
    """Each term's `Times` (terms without a time function are left out); a term in `known` (`fixed_times` of the
    same features and GPU) is taken from there instead of being computed again."""
    known = known or {}
    return {
        t.name: known[t.name] if t.name in known else t.times(p, f, hw) for t in terms if t.times is not None
    }


def fixed_times(terms: Sequence[Term], f: Features, hw: GPU) -> dict[str, Times]:
    """The `Times` of the terms without parameters, which do not change while a fit varies the parameters, so a
    fit computes them once for its features (`term_times`' `known`); a term that reads a parameter after all (a
    KeyError on the empty parameter set) or fails (a ValueError, which the fit reports per start) is left out and
    computed each time."""
    out = {}
    for t in terms:
        if t.times is not None and not t.specs:
            try:
                out[t.name] = t.times({}, f, hw)
            except (KeyError, ValueError):
                continue
    return out


def contributions(terms: Sequence[Term], p: Params, f: Features, hw: GPU) -> dict[str, Contribution]:
    """Each term's seconds in the model (module docstring); their sum is `compose`."""
    times = term_times(terms, p, f, hw)
    factor = decode_factor(terms, times, f)
    shape = np.shape(f["batch_size"])
    ol = f["output_len"]
    return {
        name: Contribution(
            _array(t.prefill, shape),
            ol * _array(t.step, shape) + factor * _array(t.request, shape) + _array(t.decode, shape),
            _array(t.fixed, shape),
        )
        for name, t in times.items()
    }  # fmt: skip


def compose(
    terms: Sequence[Term], p: Params, f: Features, hw: GPU, known: Mapping[str, Times] | None = None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(prefill, decode, E2E) seconds per row of the term list (Eq. 5: ``E2E = T_pre + T_dec + t_fixed``; Eq. 9:
    ``T_dec = OL sum(step) + factor x sum(request) + sum(decode)``); `known` as in `term_times`."""
    times = term_times(terms, p, f, hw, known)
    factor = decode_factor(terms, times, f)
    zero = np.zeros(np.shape(f["batch_size"]))
    pre = _summed((t.prefill for t in times.values()), zero)
    step = _summed((t.step for t in times.values()), zero)
    req = _summed((t.request for t in times.values()), zero)
    dec = _summed((t.decode for t in times.values()), f["output_len"] * step + factor * req)
    fixed = _summed((t.fixed for t in times.values()), zero)
    return pre, dec, pre + dec + fixed
