"""SLIM's estimators: the paper model and its ablations, the extended model, the baselines, one name registry."""

from slimlib.model.base import PRED_COLUMNS, PREDICT_COLUMNS, Estimator, IdentifiabilityWarning
from slimlib.model.baselines import ImaiOodLR, LLMVisorAgg
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.extended import ExtendedSlimModel
from slimlib.model.features import model_features
from slimlib.model.longctx import LongContextModel
from slimlib.model.methods import (
    DEFAULT_VARIANT,
    METHODS,
    get_method,
    load_params,
    make_model,
    model_from_dict,
    variant_names,
)
from slimlib.model.slim import SlimModel

__all__ = [
    "DEFAULT_VARIANT",
    "METHODS",
    "PREDICT_COLUMNS",
    "PRED_COLUMNS",
    "CalibratedModel",
    "Estimator",
    "ExtendedSlimModel",
    "IdentifiabilityWarning",
    "ImaiOodLR",
    "LLMVisorAgg",
    "LongContextModel",
    "SlimModel",
    "get_method",
    "load_params",
    "make_model",
    "model_features",
    "model_from_dict",
    "variant_names",
]
