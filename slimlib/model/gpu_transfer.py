"""Re-target a calibrated SLIM parameter file to another GPU (`slim transfer PARAMS --gpu NAME --out FILE`).

The SLIM equations take the hardware through the registry's peak FLOP/s (prefill, Eq. 7), peak bandwidth
(decode, Eq. 9) and memory capacity (the recommended model's KV pool); the calibrated parameters are what is left.
Each estimator declares how its parameters move (`slimlib.model.base.Estimator.transfer_scaling`, from each
`slimlib.model.params.ParamSpec.scaling`); this module applies the declaration (`TRANSFER_RULE`):

* "kept": efficiencies (``eta_*``: fractions of a peak; the new GPU's peaks enter through the equations) and the
  host and software overheads of the engine (``t_fixed``, ``t_step``, ``alpha``, ``B0``);
* "flops": seconds of compute-bound GPU work (``gamma``, paper Eq. 10), times ``peak_flops(source) /
  peak_flops(target)``;
* "bandwidth": seconds of memory-bound GPU work, times ``mem_bw(source) / mem_bw(target)`` (``t_act``: each
  sequence's elementwise work per layer, which reads and writes its activation vectors).

A method without a hardware term (LLMVisor-Agg, IMAI OOD-LR: regressions of times on token counts) declares None
and is refused: its file would predict on the new GPU exactly what it predicted on the old one.

The result is the source file with ``gpu`` and ``params`` replaced, the standard errors moved by the same rule
(`transferred_stderr`: each times the absolute ratio of its parameter; the correlations kept, as a parameter times
a constant keeps them), so that a prediction on the new GPU keeps the fit's parameter uncertainty in its interval
(`slimlib.model.intervals`; what the transfer itself adds is the residual model's ``device`` axis), and a
``transferred_from`` record: source GPU, source parameters, the rule, the ratios of the registry numbers
(target / source) and the whole source document under ``document`` (so a chain of transfers keeps its history). Transferring back to a GPU the chain came from returns that GPU's original document
exactly (A -> B -> A gives A's file), not a twice-rescaled copy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from slimlib.errors import DataError
from slimlib.io import check_output_path, write_text
from slimlib.model.methods import check_params_document, model_from_dict, read_params_document
from slimlib.registry.gpus import GPU, get_gpu

TRANSFER_RULE = (
    "as the method declares (Estimator.transfer_scaling): 'kept' parameters (efficiencies, host/software "
    "overheads) kept; 'flops' times scaled by peak_flops(source)/peak_flops(target); 'bandwidth' times by "
    "mem_bw(source)/mem_bw(target); standard errors scaled as their parameters, correlations kept"
)


def read_params_file(path: str | Path) -> dict[str, Any]:
    """The checked JSON document of a parameter file (DataError naming the file otherwise)."""
    return read_params_document(path)[0]


def _chain(doc: dict[str, Any] | None) -> Iterator[dict[str, Any]]:
    """The documents of a transfer chain, newest first (the document itself, then its sources)."""
    while doc is not None:
        yield doc
        doc = (doc.get("transferred_from") or {}).get("document")


def transfer_params(doc: dict[str, Any], gpu: str) -> dict[str, Any]:
    """A new parameter document for `gpu` (registry name or alias) from `doc` (see the module docstring)."""
    check_params_document(doc)
    scaling = declared_scaling(doc)
    target = get_gpu(gpu)
    source = get_gpu(doc["gpu"])
    if target.name == source.name:
        return copy.deepcopy(doc)
    for earlier in _chain((doc.get("transferred_from") or {}).get("document")):
        if get_gpu(earlier["gpu"]).name == target.name:
            return copy.deepcopy(earlier)
    params = transferred_params(doc["params"], scaling, source, target)
    out = copy.deepcopy({k: v for k, v in doc.items() if k != "transferred_from"})
    out["gpu"] = target.name
    out["params"] = params
    out["stderr"] = transferred_stderr(doc.get("stderr") or {}, scaling, source, target)
    out["transferred_from"] = {
        "gpu": source.name,
        "params": copy.deepcopy(doc["params"]),
        "rule": TRANSFER_RULE,
        "scaling": dict(scaling),
        "ratios": {
            "peak_flops": target.peak_flops / source.peak_flops,
            "mem_bw": target.mem_bw / source.mem_bw,
            "mem_bytes": target.mem_bytes / source.mem_bytes,
        },
        "document": copy.deepcopy(doc),
    }
    return out


def declared_scaling(doc: dict[str, Any]) -> dict[str, str]:
    """The method's declaration of how its parameters scale (`Estimator.transfer_scaling`); DataError when the
    method cannot be transferred."""
    model = model_from_dict(untransferred(doc))
    scaling = model.transfer_scaling()
    if scaling is None:
        raise DataError(
            f"method {doc['variant']!r} cannot be transferred to another GPU: its coefficients are times of "
            f"{doc['gpu']} with no hardware term (peak FLOP/s, bandwidth) to rescale; fit it on the target GPU's rows"
        )
    return scaling


def transferred_params(
    params: dict[str, float | None], scaling: dict[str, str], source: GPU, target: GPU
) -> dict[str, float | None]:
    """`params` moved from `source` to `target` by `TRANSFER_RULE` (a parameter `scaling` does not name is kept)."""
    ratio = _ratios(source, target)
    return {k: None if v is None else float(v) * ratio[scaling.get(k, "kept")] for k, v in params.items()}


def transferred_stderr(
    stderr: dict[str, float | None], scaling: dict[str, str], source: GPU, target: GPU
) -> dict[str, float | None]:
    """`stderr` moved with their parameters (`transferred_params`): each times its parameter's ratio (positive);
    None (and NaN: no standard error) stays."""
    ratio = _ratios(source, target)
    return {k: None if v is None else float(v) * ratio[scaling.get(k, "kept")] for k, v in stderr.items()}


def _ratios(source: GPU, target: GPU) -> dict[str, float]:
    return {
        "kept": 1.0,
        "flops": source.peak_flops / target.peak_flops,
        "bandwidth": source.mem_bw / target.mem_bw,
    }


def transfer_file(path: str | Path, gpu: str, out: str | Path) -> dict[str, Any]:
    """Read `path`, transfer to `gpu`, write `out` atomically (never over the input); returns the new document."""
    doc = read_params_file(path)
    new = transfer_params(doc, gpu)
    target = check_output_path(out, inputs=(path,))
    write_text(target, json.dumps(new, indent=2, sort_keys=True) + "\n")
    return new


def untransferred(doc: dict[str, Any]) -> dict[str, Any]:
    """`doc` without its ``transferred_from`` record (what `load_params` reads; it ignores the record anyway)."""
    return {k: v for k, v in doc.items() if k != "transferred_from"}
