"""Calibrated-parameter specifications: bounds, scale, initial value, unit, GPU scaling and prior of each parameter.

A spec belongs to the term that uses it (`slimlib.model.terms`); a name means one quantity everywhere, so two terms
share a parameter only by sharing its spec object.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from slimlib.model.priors import Prior

#: how a parameter moves to another GPU (`slimlib.model.gpu_transfer`): "kept" (an efficiency, a fraction of a
#: peak the equations take from the registry, or a host/software overhead of the engine), "flops" (seconds of
#: compute-bound GPU work: times peak_flops(source) / peak_flops(target)), "bandwidth" (seconds of memory-bound
#: GPU work: times mem_bw(source) / mem_bw(target))
Scaling = Literal["kept", "flops", "bandwidth"]


@dataclass(frozen=True)
class ParamSpec:
    """One calibrated parameter: bounds, typical scale (conditions the solver), initial value, unit, meaning, GPU
    scaling, and the measured prior a few-point fit holds it at (`slimlib.model.priors`; None: no prior)."""

    name: str
    lower: float
    upper: float
    scale: float
    init: float
    unit: str
    doc: str
    scaling: Scaling = "kept"
    prior: Prior | None = None
