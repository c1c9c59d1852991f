"""Which term of the recommended model (`slimlib.model.extended.slim_terms`) to keep, decided on TRAINING rows only.

Fits the recommended term list and one alternative per component on the training table of every fold of every
scenario (Table II and the LLM-Inference-Bench transfer scenarios) and prints the training throughput MAPE (%) per
scenario. Every candidate is a term list built from the `slimlib.model.terms` objects (no model code here):

* dense decode: ``alpha OL`` (kept, `PER_TOKEN_DECODE`) against the decode GEMM FLOPs at a fitted efficiency
  (`DECODE_GEMM_COMPUTE`) and both;
* decode attention width: the kernel-regime rule (kept) against ``D_kv`` always (`decode_attention(False)`);
* KV capacity: ``kappa = 1`` for static batches (kept) against the continuous-batching 0.5 everywhere
  (`effective_batch_term(static_kappa=False)`).

Run: python scripts/choose_components.py   (about 40 s; no validation row is read)
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from slimlib.experiments.accuracy.scenarios import build_scenarios
from slimlib.experiments.transfer_study.transfer_eval import transfer_scenarios
from slimlib.model.calibrated import TermModel
from slimlib.model.extended import slim_terms
from slimlib.model.terms import (
    DECODE_ATTENTION,
    DECODE_GEMM_COMPUTE,
    PER_TOKEN_DECODE,
    Term,
    decode_attention,
    effective_batch_term,
)


def replaced(terms: tuple[Term, ...], old: Term, *new: Term) -> tuple[Term, ...]:
    """`terms` with `old` replaced by `new` (none: removed), in place."""
    return tuple(t for s in terms for t in ((*new,) if s.name == old.name else (s,)))


KEPT = slim_terms()
CANDIDATES: dict[str, tuple[Term, ...]] = {
    "kept": KEPT,
    "dense=flops": replaced(KEPT, PER_TOKEN_DECODE, DECODE_GEMM_COMPUTE),
    "dense=both": replaced(KEPT, PER_TOKEN_DECODE, PER_TOKEN_DECODE, DECODE_GEMM_COMPUTE),
    "attention=D_kv": replaced(KEPT, DECODE_ATTENTION, decode_attention(regime_rule=False)),
    "kappa=0.5 always": replaced(KEPT, KEPT[0], effective_batch_term(static_kappa=False)),
}


def main() -> int:
    warnings.simplefilter("ignore")
    rows = []
    scenarios = {s.name: s for s in build_scenarios() if s.available}
    scenarios.update({s.name: s for s in transfer_scenarios() if s.name not in scenarios})  # each once
    for s in scenarios.values():
        for name, terms in CANDIDATES.items():
            ape = []
            for fold in s.folds:
                y = fold.train["throughput_tok_s"].to_numpy(dtype=float)
                model = TermModel(terms).fit(fold.train)
                pred = model.predict(fold.train)["pred_throughput_tok_s"].to_numpy()
                ape.append(np.abs(pred / y - 1.0))
            rows.append(
                {"scenario": s.name, "candidate": name, "train_mape_pct": 100 * np.concatenate(ape).mean()}
            )
    table = pd.DataFrame(rows).pivot(index="scenario", columns="candidate", values="train_mape_pct")
    print("training throughput MAPE (%), per scenario (all folds' training rows):")
    print(table[list(CANDIDATES)].round(2).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
