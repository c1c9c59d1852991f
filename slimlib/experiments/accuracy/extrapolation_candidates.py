"""Term-list candidates of the extrapolation cross-validation beyond the registered methods: the batch axis's
physics (issue 28), each the recommended model's terms (`slimlib.model.extended.slim_terms`) with one change, so
that the cross-validation's worst-axis error (never the training error) decides whether a term is admitted.

* ``slim+step-roofline``: the per-step weight read made a roofline of the decode GEMMs
  (`slimlib.model.terms.rooflines.STEP_GEMM_ROOFLINE`: compute-bound past the device's ridge point, FLOPs over the
  registry peak of the precision, bytes over the bandwidth, the larger);
* ``slim+step-roofline-all``: the same with the FLOPs of every dense weight, the LM head included
  (`STEP_GEMM_ROOFLINE_ALL`);
* ``slim+seq-overhead``: plus ``t_seq`` per running sequence and decode step (`SEQUENCE_OVERHEAD`);
* ``slim+step-roofline+seq``: both changes;
* ``slim+layer-overhead``: plus ``t_layer`` per layer of the model and decode step (`LAYER_STEP_OVERHEAD`: kernel
  launches, which every tensor-parallel rank pays for every layer, so TP does not divide them; the tensor-parallel
  axis);
* ``slim+step-roofline+layer``: the step roofline and the per-layer overhead.
"""

from __future__ import annotations

from slimlib.errors import UnknownNameError, close_matches_message
from slimlib.experiments.accuracy.extrapolation import Candidate
from slimlib.model import METHODS
from slimlib.model.extended import slim_terms
from slimlib.model.terms import LAYER_STEP_OVERHEAD, SEQUENCE_OVERHEAD, STEP_WEIGHT_READ, Term
from slimlib.model.terms.rooflines import STEP_GEMM_ROOFLINE, STEP_GEMM_ROOFLINE_ALL


def _replaced(old: Term, new: Term) -> tuple[Term, ...]:
    return tuple(new if t.name == old.name else t for t in slim_terms())


#: name -> term list (module docstring)
TERM_CANDIDATES: dict[str, tuple[Term, ...]] = {
    "slim+step-roofline": _replaced(STEP_WEIGHT_READ, STEP_GEMM_ROOFLINE),
    "slim+step-roofline-all": _replaced(STEP_WEIGHT_READ, STEP_GEMM_ROOFLINE_ALL),
    "slim+seq-overhead": (*slim_terms(), SEQUENCE_OVERHEAD),
    "slim+step-roofline+seq": (*_replaced(STEP_WEIGHT_READ, STEP_GEMM_ROOFLINE), SEQUENCE_OVERHEAD),
    "slim+layer-overhead": (*slim_terms(), LAYER_STEP_OVERHEAD),
    "slim+step-roofline+layer": (*_replaced(STEP_WEIGHT_READ, STEP_GEMM_ROOFLINE), LAYER_STEP_OVERHEAD),
}


def resolve_candidate(name: str) -> Candidate:
    """A registered method name as itself, a `TERM_CANDIDATES` name as (name, terms); else UnknownNameError."""
    if name in METHODS:
        return name
    if name in TERM_CANDIDATES:
        return name, TERM_CANDIDATES[name]
    raise UnknownNameError(close_matches_message("candidate", name, [*METHODS, *TERM_CANDIDATES]))
