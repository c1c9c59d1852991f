"""SLIM's estimators: the paper model and its ablations, the extended model, the baselines, one name registry."""

from slimlib.model.base import (
    DEFAULT_VARIANT,
    PRED_COLUMNS,
    IdentifiabilityWarning,
    SlimModel,
    load_params,
    make_model,
    model_features,
    variant_names,
)
from slimlib.model.baselines import ImaiOodLR, LLMVisorAgg
from slimlib.model.extended import ExtendedSlimModel

__all__ = [
    "DEFAULT_VARIANT",
    "PRED_COLUMNS",
    "ExtendedSlimModel",
    "IdentifiabilityWarning",
    "ImaiOodLR",
    "LLMVisorAgg",
    "SlimModel",
    "load_params",
    "make_model",
    "model_features",
    "variant_names",
]
