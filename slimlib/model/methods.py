"""The one name -> method registry: every estimator `slim fit --variant`, `load_params` and the evaluation know.

Adding a method is one class (a subclass of `slimlib.model.base.Estimator`) and one `METHODS` entry; a variant of
the paper model is one term list in `slimlib.model.paper.VARIANTS` (its entry here is built from it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from slimlib.errors import DataError, UnknownNameError, close_matches_message
from slimlib.model.base import PARAMS_FORMAT, PARAMS_FORMAT_VERSION, Estimator
from slimlib.model.baselines import ImaiOodLR, LLMVisorAgg
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.paper import VARIANTS, PaperModel
from slimlib.model.slim import SlimModel
from slimlib.registry.gpus import get_gpu


@dataclass(frozen=True)
class Method:
    """A registered method: its class, the constructor options that select it, and its label in tables."""

    name: str
    cls: type[Estimator]
    label: str
    options: dict[str, Any] = field(default_factory=dict)
    calibrated: bool = True  # takes n_starts (multi-start least squares)
    #: why the method stays out of the reproduction's tables and the default cross-validation ('': it is in them)
    experimental: str = ""


#: The paper's model in every header and legend ("SLIM" alone would also name the extended model `slim`).
PAPER_LABEL = "SLIM (paper)"

#: name -> method, in the order of the evaluation tables; `label` is the method's one display name (legends,
#: headers, prose), the name itself is what CSVs hold
METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("slim", SlimModel, "SLIM-extended"),
        *(
            Method(v, PaperModel, PAPER_LABEL if v == "paper" else f"{PAPER_LABEL} {v}", {"variant": v})
            for v in VARIANTS
        ),
        Method("llmvisor-agg", LLMVisorAgg, "LLMVisor-Agg", calibrated=False),
        Method("imai-ood-lr", ImaiOodLR, "IMAI OOD-LR", calibrated=False),
    )
}
#: the methods of the paper's Table II in its column order (the paper's model, then its two baselines); the
#: paper-shaped tables put the other methods, this package's extensions, to their right
PAPER_TABLE2_METHODS = ("paper", "llmvisor-agg", "imai-ood-lr")
#: the method `slim fit`, `slim advise` and `slim transfer` use by default (README "Which model to fit")
DEFAULT_VARIANT = "slim"
#: names of earlier releases' methods -> what replaced them (their parameter files are refused with this advice)
RETIRED_METHODS = {
    "extended": "slim",
    "longctx": "slim",
    "slim-roofline": "slim",
}
#: methods whose parameter names or options changed, -> the first parameter-file format version that reads them
#: (older files are refused with a one-line instruction to refit)
FORMAT_SINCE = {"slim": 14}


def method_label(name: str) -> str:
    """The one display label of a registered method (headers, legends, prose: `paper` -> "SLIM (paper)", `slim` ->
    "SLIM-extended"); any other name is returned as given."""
    m = METHODS.get(name)
    return m.label if m is not None else name


def variant_names() -> list[str]:
    """Names of every registered method, sorted."""
    return sorted(METHODS)


def get_method(name: str) -> Method:
    """The registered method `name`; unknown names list the closest known ones, retired names their successor."""
    if name in RETIRED_METHODS:
        new = RETIRED_METHODS[name]
        raise UnknownNameError(
            f"method {name!r} was merged into {new!r} (one recommended estimator); refit with "
            f"`slim fit DATA.csv --variant {new}` (its parameters differ, so an old file cannot be read as {new!r})"
        )
    if name not in METHODS:
        raise UnknownNameError(close_matches_message("model variant", name, list(METHODS)))
    return METHODS[name]


def make_model(variant: str = DEFAULT_VARIANT, gpu: str | None = None, **kwargs: Any) -> Estimator:
    """A fresh, unfitted model of the named method; `n_starts` etc. apply to calibrated methods only."""
    m = get_method(variant)
    if not m.calibrated:
        kwargs = {k: v for k, v in kwargs.items() if k not in ("n_starts", "max_nfev", "seed", "fixed")}
    return m.cls(gpu=gpu, **{**m.options, **kwargs})


def _read_source(source: str | Path) -> tuple[str, str]:
    if isinstance(source, Path) or not source.lstrip().startswith("{"):
        p = Path(source)
        if p.is_dir():
            raise DataError(f"{p}: is a directory; give a parameter file written by `slim fit`")
        if not p.is_file():
            raise DataError(f"{p}: no such parameter file; create one with `slim fit DATA.csv --out {p}`")
        try:
            return str(p), p.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise DataError(
                f"{p}: not a UTF-8 text file; give a parameter file written by `slim fit`"
            ) from None
        except OSError as exc:
            raise DataError(f"{p}: cannot be read ({exc.strerror}); check its permissions") from None
    return "parameter JSON", source


def check_params_document(d: Any, where: str = "parameter JSON") -> dict[str, Any]:
    """`d` if it is a parameter file's content this slimlib reads (format, version, required fields); else
    DataError naming `where`."""
    if not isinstance(d, dict) or d.get("format") != PARAMS_FORMAT:
        raise DataError(f"{where}: not a SLIM parameter file (field 'format' should be {PARAMS_FORMAT!r})")
    version = d.get("format_version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= PARAMS_FORMAT_VERSION:
        raise DataError(
            f"{where}: parameter-file format version {version!r} is not supported: this slimlib reads versions 1 "
            f"to {PARAMS_FORMAT_VERSION}; a newer file needs a newer slimlib (or refit with this one)"
        )
    for key in ("variant", "gpu", "params"):
        if key not in d:
            raise DataError(f"{where}: field {key!r} is missing; regenerate the file with `slim fit`")
    if not isinstance(d["params"], dict):
        raise DataError(f"{where}: field 'params' must be an object of parameter values")
    return d


def read_params_document(source: str | Path) -> tuple[dict[str, Any], str]:
    """The checked content of a parameter file (path or JSON text) and a name for it in messages."""
    where, text = _read_source(source)
    try:
        d = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{where}: not valid JSON ({exc}); give a file written by `slim fit`") from None
    return check_params_document(d, where), where


def model_from_dict(d: dict[str, Any], where: str = "parameter JSON") -> Estimator:
    """Rebuild a fitted model from a parameter file's content; checks format, version and fields."""
    check_params_document(d, where)
    version = d.get("format_version", 1)
    method = get_method(str(d["variant"]))
    if version < FORMAT_SINCE.get(method.name, 1):
        raise DataError(
            f"{where}: a {method.name!r} parameter file of format version {version} (its parameter names and "
            f"options predate this slimlib's); refit with `slim fit DATA.csv --variant {method.name}`"
        )
    options = dict(d.get("options") or {})
    held = list(d.get("fixed") or [])
    if version == 1:  # version 1 listed the parameters a fit held, not only the constructor's `fixed`
        d = {**d, "held": held}
    if issubclass(method.cls, CalibratedModel):
        params = d["params"] if isinstance(d["params"], dict) else {}
        options["fixed"] = {k: params.get(k) for k in held} or None
    try:
        model = method.cls(gpu=str(d["gpu"]), **{**method.options, **options})
    except TypeError as exc:
        raise DataError(f"{where}: field 'options' does not fit method {method.name!r} ({exc})") from None
    model._restore(d, where, get_gpu(str(d["gpu"])).name)
    return model


def load_params(source: str | Path) -> Estimator:
    """Load any method's parameter file (path or JSON text) written by `to_json` / `slim fit`."""
    d, where = read_params_document(source)
    return model_from_dict(d, where)
