"""The residual models the package ships: learned once on the whole extrapolation cross-validation, read by every fit.

`residual_model.json` beside this module holds one `slimlib.model.intervals.ResidualModel` per calibrated method,
learned by the intervals notebook (14) on every held-out row of the protocol (`slimlib.experiments.accuracy.
extrapolation_coverage.residual_model`), with the residual-model format (`RESIDUAL_FORMAT`) and the parameter-file
format (the model's version, `slimlib.model.base.PARAMS_FORMAT_VERSION`) it was learned with. A file of another
version is refused in one line naming both (`load_shipped`): a residual model describes the errors of one version
of the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from slimlib.errors import DataError
from slimlib.io import write_text
from slimlib.model.intervals import RESIDUAL_FORMAT, ResidualModel

#: where the shipped residual models live
SHIPPED_PATH = Path(__file__).with_name("residual_model.json")
#: the file's ``format`` field
SHIPPED_FORMAT = "slim-residual-models"
#: what regenerates the file
REGENERATE = "regenerate it with notebook 14 (`slim reproduce --only 13 14`)"


#: significant digits of the stored quantiles (a relative change of 1e-6 in a half width)
DIGITS = 6


def _rounded(d: Any) -> Any:
    """`d` with every ``quantiles`` list rounded to `DIGITS` significant digits."""
    if isinstance(d, dict):
        return {
            k: [float(f"{x:.{DIGITS}g}") for x in v] if k == "quantiles" else _rounded(v)
            for k, v in d.items()
        }
    return d


def shipped_document(models: dict[str, ResidualModel], model_version: int) -> dict[str, Any]:
    """The file's content for residual models per method learned with model version `model_version` (quantiles
    to `DIGITS` significant digits)."""
    return {
        "format": SHIPPED_FORMAT,
        "residual_format": RESIDUAL_FORMAT,
        "model_version": int(model_version),
        "methods": {name: _rounded(rm.to_dict()) for name, rm in sorted(models.items())},
    }


def write_shipped(
    models: dict[str, ResidualModel], model_version: int, path: str | Path = SHIPPED_PATH
) -> Path:
    """Write `shipped_document` to `path` (atomically)."""
    text = json.dumps(shipped_document(models, model_version), indent=1, sort_keys=True) + "\n"
    return write_text(path, text)


def load_shipped(method: str, model_version: int, path: str | Path = SHIPPED_PATH) -> ResidualModel:
    """The shipped residual model of `method`; DataError, one line, for a missing or malformed file, another
    version than `model_version` and this code's residual format, or a method the file has none for."""
    where = str(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{where}: no shipped residual model; {REGENERATE}") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"{where}: not a readable residual-model file ({exc}); {REGENERATE}") from None
    if not isinstance(doc, dict) or doc.get("format") != SHIPPED_FORMAT:
        raise DataError(
            f"{where}: not a shipped residual-model file (format {SHIPPED_FORMAT!r}); {REGENERATE}"
        )
    have = (doc.get("residual_format"), doc.get("model_version"))
    want = (RESIDUAL_FORMAT, int(model_version))
    if have != want:
        raise DataError(
            f"{where}: residual format {have[0]!r} for model version {have[1]!r}, but this slimlib reads residual "
            f"format {want[0]} for model version {want[1]}; {REGENERATE}"
        )
    methods = doc.get("methods")
    if not isinstance(methods, dict) or method not in methods:
        known = sorted(methods) if isinstance(methods, dict) else []
        raise DataError(
            f"{where}: no residual model for method {method!r} (it has {', '.join(known) or 'none'}); intervals "
            "are learned for the calibrated methods of the cross-validation"
        )
    return ResidualModel.from_dict(methods[method], f"{where} (method {method!r})")
