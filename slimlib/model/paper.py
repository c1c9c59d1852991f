"""SLIM as published (paper Eqs. 5-12) with its six calibrated parameters, and its two ablations.

The paper model is the term list `PAPER_TERMS` (`slimlib.model.terms`): prefill compute (Eqs. 7-8), the
batch-level fixed overhead (Eq. 5), Eq. 9's factor ``(B + B0) / eta_m`` on the per-request dense decode (Eq. 10)
and KV scan (Eqs. 11-12), and the tensor-parallel all-reduces (zero at 1 GPU; rows with ``tensor_parallel`` > 1
use per-GPU features, beyond the paper). An ablation is the list without a term (`VARIANTS`): ``no-kv-scan``
drops the KV scan (M_dec = 0, so eta_m only scales T_d), ``no-dense-decode`` drops the dense decode (T_d = 0,
alpha and gamma gone).
"""

from __future__ import annotations

from slimlib.errors import UnknownNameError, close_matches_message
from slimlib.model.calibrated import CalibratedModel
from slimlib.model.terms import (
    ALLREDUCE,
    BATCH_FIXED,
    DENSE_DECODE,
    KV_SCAN,
    PAPER_DECODE_FACTOR,
    PREFILL_COMPUTE,
    Term,
    without,
)

PAPER_TERMS = (PREFILL_COMPUTE, BATCH_FIXED, PAPER_DECODE_FACTOR, DENSE_DECODE, KV_SCAN, ALLREDUCE)
#: variant name -> its term list (the registry's paper-model entries are built from this)
VARIANTS: dict[str, tuple[Term, ...]] = {
    "paper": PAPER_TERMS,
    "no-kv-scan": without(PAPER_TERMS, KV_SCAN.name),
    "no-dense-decode": without(PAPER_TERMS, DENSE_DECODE.name),
}


class PaperModel(CalibratedModel):
    """SLIM (paper Eqs. 5-12); `variant` selects the paper model or an ablation (`VARIANTS`).

    Parameters
    ----------
    gpu : registry name of the GPU the data were measured on; default: the table's ``gpu`` column.
    variant : ``"paper"``, ``"no-kv-scan"`` (drop M_dec from Eq. 9) or ``"no-dense-decode"`` (drop T_d).
    fixed, n_starts, max_nfev, seed : as `CalibratedModel`.
    """

    def __init__(
        self,
        gpu: str | None = None,
        variant: str = "paper",
        *,
        fixed: dict[str, float] | None = None,
        n_starts: int = 8,
        max_nfev: int = 4000,
        seed: int = 0,
    ) -> None:
        if variant not in VARIANTS:
            raise UnknownNameError(close_matches_message("PaperModel variant", variant, list(VARIANTS)))
        self.variant = variant
        super().__init__(gpu, fixed=fixed, n_starts=n_starts, max_nfev=max_nfev, seed=seed)

    def terms(self) -> tuple[Term, ...]:
        return VARIANTS[self.variant]
