"""SLIM's estimators: the recommended model (``slim``), the paper model and its ablations, the baselines, one name registry."""

from slimlib.model.base import PRED_COLUMNS, PREDICT_COLUMNS, Estimator, IdentifiabilityWarning
from slimlib.model.baselines import ImaiOodLR, LLMVisorAgg
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.features import model_features
from slimlib.model.methods import (
    DEFAULT_VARIANT,
    METHODS,
    get_method,
    load_params,
    make_model,
    method_label,
    model_from_dict,
    variant_names,
)
from slimlib.model.paper import PaperModel
from slimlib.model.slim import SlimModel

__all__ = [
    "DEFAULT_VARIANT",
    "METHODS",
    "PREDICT_COLUMNS",
    "PRED_COLUMNS",
    "CalibratedModel",
    "Estimator",
    "SlimModel",
    "IdentifiabilityWarning",
    "ImaiOodLR",
    "LLMVisorAgg",
    "PaperModel",
    "get_method",
    "load_params",
    "make_model",
    "method_label",
    "model_features",
    "model_from_dict",
    "variant_names",
]
