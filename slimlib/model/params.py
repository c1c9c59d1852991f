"""Calibrated-parameter specifications: bounds, scale, initial value and unit of each parameter."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ParamSpec:
    """One calibrated parameter: bounds, typical scale (conditions the solver), initial value, unit, meaning."""

    name: str
    lower: float
    upper: float
    scale: float
    init: float
    unit: str
    doc: str
