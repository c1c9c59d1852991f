"""Model terms: each cost of a SLIM model as one object with its parameters (`slimlib.model.terms.term.Term`).

A model is a list of terms (`slimlib.model.paper.PAPER_TERMS`, `slimlib.model.slim.slim_terms`); an ablation is
the list without a term (`without`); `slimlib.model.calibrated.TermModel` fits any list; `contributions` splits a
prediction by term. A new term is one `Term` with its specs in `specs` (one name per quantity, with its prior and
GPU scaling) and a function returning its `Times`; the features it reads are listed in ``reads``.

Paper (Eqs. 5-12, `paper_terms`): `PREFILL_COMPUTE`, `BATCH_FIXED`, `PAPER_DECODE_FACTOR`, `DENSE_DECODE`, `KV_SCAN`.
Recommended model (`batch`, `recommended`, `rooflines`): `effective_batch_term`, `SERVED_PREFILL`,
`PREEMPTION_RECOMPUTE`, `ATTENTION_FACTOR`, `DECODE_ATTENTION`, `DECODE_GEMMS`,
`PER_TOKEN_DECODE`, `STEP_OVERHEAD`, `LAYER_STEP_OVERHEAD`, `ACTIVATION_WORK`, `HYPER_CONNECTIONS`,
`HOST_SEQUENCE_OVERHEAD`.
Experts and collectives (`experts`): `MOE_EXPERTS`, `ALLREDUCE`, `EXPERT_ALLTOALL`.
"""

from slimlib.model.terms.batch import (
    chunked_prefill_column,
    effective_batch,
    effective_batch_term,
)
from slimlib.model.terms.experts import ALLREDUCE, EXPERT_ALLTOALL, MOE_EXPERTS
from slimlib.model.terms.paper_terms import (
    BATCH_FIXED,
    DENSE_DECODE,
    KV_SCAN,
    PAPER_DECODE_FACTOR,
    PREFILL_COMPUTE,
)
from slimlib.model.terms.recommended import (
    ACTIVATION_WORK,
    ATTENTION_FACTOR,
    DECODE_ATTENTION,
    HOST_SEQUENCE_OVERHEAD,
    HYPER_CONNECTIONS,
    LAYER_STEP_OVERHEAD,
    PER_TOKEN_DECODE,
    PREEMPTION_RECOMPUTE,
    SERVED_PREFILL,
    STEP_OVERHEAD,
    attention_bytes,
)
from slimlib.model.terms.rooflines import DECODE_GEMMS
from slimlib.model.terms.term import (
    Contribution,
    Term,
    Times,
    adjust_features,
    compose,
    contributions,
    fixed_times,
    model_specs,
    without,
)

#: every term object by name (the effective-batch caps with their default kappa)
CATALOGUE: dict[str, Term] = {
    t.name: t
    for t in (
        PREFILL_COMPUTE, BATCH_FIXED, PAPER_DECODE_FACTOR, DENSE_DECODE, KV_SCAN, effective_batch_term(),
        SERVED_PREFILL, PREEMPTION_RECOMPUTE, ATTENTION_FACTOR, DECODE_ATTENTION,
        DECODE_GEMMS, PER_TOKEN_DECODE, STEP_OVERHEAD, LAYER_STEP_OVERHEAD, ACTIVATION_WORK,
        HYPER_CONNECTIONS, HOST_SEQUENCE_OVERHEAD, MOE_EXPERTS, ALLREDUCE, EXPERT_ALLTOALL,
    )
}  # fmt: skip

__all__ = [
    "ACTIVATION_WORK",
    "ALLREDUCE",
    "ATTENTION_FACTOR",
    "BATCH_FIXED",
    "CATALOGUE",
    "DECODE_ATTENTION",
    "DENSE_DECODE",
    "EXPERT_ALLTOALL",
    "HOST_SEQUENCE_OVERHEAD",
    "HYPER_CONNECTIONS",
    "KV_SCAN",
    "LAYER_STEP_OVERHEAD",
    "MOE_EXPERTS",
    "PAPER_DECODE_FACTOR",
    "PER_TOKEN_DECODE",
    "PREEMPTION_RECOMPUTE",
    "PREFILL_COMPUTE",
    "SERVED_PREFILL",
    "DECODE_GEMMS",
    "STEP_OVERHEAD",
    "Contribution",
    "Term",
    "Times",
    "adjust_features",
    "attention_bytes",
    "chunked_prefill_column",
    "compose",
    "contributions",
    "effective_batch",
    "effective_batch_term",
    "fixed_times",
    "model_specs",
    "without",
]
