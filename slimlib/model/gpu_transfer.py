"""Re-target a calibrated SLIM parameter file to another GPU (`slim transfer PARAMS --gpu NAME --out FILE`).

The SLIM equations take the hardware through the registry's peak FLOP/s (prefill, Eq. 7), peak bandwidth
(decode, Eq. 9) and memory capacity (the extended models' KV pool); the calibrated parameters are what is left.
The rule (`TRANSFER_RULE`):

* efficiencies (``eta_*``: fractions of a peak) are kept: the new GPU's peaks enter through the equations;
* ``gamma`` (paper Eq. 10, seconds of dense decode GEMM per token and ``L (D/1024)^2``) is GPU time of
  compute-bound kernels: it is scaled by ``peak_flops(source) / peak_flops(target)``;
* the other times (``t_fixed``, ``t_step``, ``alpha``: scheduling, launches, sampling) and ``B0`` are host and
  software overheads of the serving engine and are kept.

The result is the source file with ``gpu`` and ``params`` replaced, standard errors cleared (they were estimated
on the source GPU) and a ``transferred_from`` record: source GPU, source parameters, the rule, the ratios of the registry numbers
(target / source) and the whole source document under ``document`` (so a chain of transfers keeps its history). Transferring back to a GPU the chain came from returns that GPU's original document
exactly (A -> B -> A gives A's file), not a twice-rescaled copy.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from slimlib.io import check_output_path, write_text
from slimlib.model.methods import check_params_document, read_params_document
from slimlib.registry.gpus import get_gpu

TRANSFER_RULE = (
    "efficiencies (eta_*) kept; gamma scaled by peak_flops(source)/peak_flops(target); t_fixed, t_step, alpha, "
    "B0 kept (host/software overheads); standard errors cleared"
)
#: parameters scaled by the ratio of peak FLOP/s (source / target)
FLOP_TIME_PARAMS = ("gamma",)


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
    target = get_gpu(gpu)
    source = get_gpu(doc["gpu"])
    if target.name == source.name:
        return copy.deepcopy(doc)
    for earlier in _chain((doc.get("transferred_from") or {}).get("document")):
        if get_gpu(earlier["gpu"]).name == target.name:
            return copy.deepcopy(earlier)
    ratio_flops = source.peak_flops / target.peak_flops
    params: dict[str, float | None] = {}
    for k, v in doc["params"].items():
        if v is None:
            params[k] = None
        elif k in FLOP_TIME_PARAMS:
            params[k] = float(v) * ratio_flops
        else:
            params[k] = v
    out = copy.deepcopy({k: v for k, v in doc.items() if k != "transferred_from"})
    out["gpu"] = target.name
    out["params"] = params
    out["stderr"] = {k: None for k in doc.get("stderr", doc["params"])}
    out["transferred_from"] = {
        "gpu": source.name,
        "params": copy.deepcopy(doc["params"]),
        "rule": TRANSFER_RULE,
        "ratios": {
            "peak_flops": target.peak_flops / source.peak_flops,
            "mem_bw": target.mem_bw / source.mem_bw,
            "mem_bytes": target.mem_bytes / source.mem_bytes,
        },
        "document": copy.deepcopy(doc),
    }
    return out


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
