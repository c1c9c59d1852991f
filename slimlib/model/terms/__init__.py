"""Model terms: each cost of a SLIM model as one object with its parameters (`slimlib.model.terms.term.Term`).

A model is a list of terms (`slimlib.model.slim.PAPER_TERMS`, `slimlib.model.extended.slim_terms`); an ablation is
the list without a term (`without`); `scripts/choose_components.py` builds its candidates from the same objects
and fits any list with `slimlib.model.calibrated.TermModel`; `contributions` splits a prediction by term.

A new term (e.g. a roofline ``max(F / (eta_f F_max), bytes / (eta_b BW))`` of known FLOPs and bytes) is one `Term`
with its specs in `specs` (one name per quantity, its prior and GPU scaling on the spec) and a function returning
its `Times`; the features it reads are listed in ``reads``. `CATALOGUE` lists every term object by name.

Paper (Eqs. 5-12, `paper`): `PREFILL_COMPUTE`, `BATCH_FIXED`, `PAPER_DECODE_FACTOR`, `DENSE_DECODE`, `KV_SCAN`.
Recommended model (`recommended`, `batch`): `effective_batch_term`, `PREFILL_SERVED_MEASURED`, `PREFILL_SERVED`,
`PREFILL_SERVED_EQ8`, `ATTENTION_FACTOR`,
`ATTENTION_FACTOR_MEASURED`, `decode_attention` (`DECODE_ATTENTION`, `DECODE_ATTENTION_KERNEL`), `STEP_WEIGHT_READ`, `PER_TOKEN_DECODE`, `STEP_OVERHEAD`,
`SEQUENCE_OVERHEAD`, `HOST_SEQUENCE_OVERHEAD`, `TP_WORKER_COMM`, `LAYER_STEP_OVERHEAD`, `ACTIVATION_WORK`,
`DECODE_GEMM_COMPUTE`, `PREEMPTION_RECOMPUTE` (`preemption_recompute_term`).
Experts and collectives (`experts`): `MOE_EXPERTS`, `ALLREDUCE`, `EXPERT_ALLTOALL`.
SLIM-roofline (`serving_mode`, `rooflines`): `SERVING_MODE`, `ROOF_LINEAR`, `ROOF_EXPERTS`,
`ROOF_PREFILL_ATTENTION`, `ROOF_DECODE_ATTENTION`, `ROOF_STEP_OVERHEAD`, `ROOF_SEQUENCE_OVERHEAD`.
"""

from slimlib.model.terms.batch import (
    chunked_prefill_column,
    effective_batch,
    effective_batch_term,
    static_batch_column,
)
from slimlib.model.terms.experts import ALLREDUCE, EXPERT_ALLTOALL, MOE_EXPERTS
from slimlib.model.terms.paper import BATCH_FIXED, DENSE_DECODE, KV_SCAN, PAPER_DECODE_FACTOR, PREFILL_COMPUTE
from slimlib.model.terms.recommended import (
    ACTIVATION_WORK,
    ATTENTION_FACTOR,
    ATTENTION_FACTOR_MEASURED,
    DECODE_ATTENTION,
    DECODE_ATTENTION_KERNEL,
    DECODE_GEMM_COMPUTE,
    HOST_SEQUENCE_OVERHEAD,
    LAYER_STEP_OVERHEAD,
    PER_TOKEN_DECODE,
    PREEMPTION_RECOMPUTE,
    PREFILL_SERVED,
    PREFILL_SERVED_EQ8,
    PREFILL_SERVED_MEASURED,
    SEQUENCE_OVERHEAD,
    STEP_OVERHEAD,
    STEP_WEIGHT_READ,
    TP_WORKER_COMM,
    attention_bytes,
    decode_attention,
)
from slimlib.model.terms.rooflines import (
    ROOF_DECODE_ATTENTION,
    ROOF_EXPERTS,
    ROOF_LINEAR,
    ROOF_PREFILL_ATTENTION,
    ROOF_SEQUENCE_OVERHEAD,
    ROOF_STEP_OVERHEAD,
)
from slimlib.model.terms.serving_mode import SERVING_MODE
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
        PREFILL_COMPUTE, BATCH_FIXED, PAPER_DECODE_FACTOR, DENSE_DECODE, KV_SCAN,
        effective_batch_term(), effective_batch_term(static_kappa=False), PREFILL_SERVED, PREFILL_SERVED_EQ8, PREFILL_SERVED_MEASURED, ATTENTION_FACTOR,
        ATTENTION_FACTOR_MEASURED, PREEMPTION_RECOMPUTE,
        DECODE_ATTENTION, DECODE_ATTENTION_KERNEL, decode_attention(regime_rule=False), STEP_WEIGHT_READ, PER_TOKEN_DECODE, STEP_OVERHEAD,
        SEQUENCE_OVERHEAD, HOST_SEQUENCE_OVERHEAD, TP_WORKER_COMM, LAYER_STEP_OVERHEAD, ACTIVATION_WORK, DECODE_GEMM_COMPUTE, MOE_EXPERTS, ALLREDUCE, EXPERT_ALLTOALL,
        SERVING_MODE, ROOF_LINEAR, ROOF_EXPERTS, ROOF_PREFILL_ATTENTION, ROOF_DECODE_ATTENTION, ROOF_STEP_OVERHEAD,
        ROOF_SEQUENCE_OVERHEAD,
    )
}  # fmt: skip

__all__ = [
    "ACTIVATION_WORK",
    "ALLREDUCE",
    "CATALOGUE",
    "ATTENTION_FACTOR",
    "ATTENTION_FACTOR_MEASURED",
    "BATCH_FIXED",
    "DECODE_ATTENTION",
    "DECODE_ATTENTION_KERNEL",
    "DECODE_GEMM_COMPUTE",
    "DENSE_DECODE",
    "EXPERT_ALLTOALL",
    "HOST_SEQUENCE_OVERHEAD",
    "KV_SCAN",
    "LAYER_STEP_OVERHEAD",
    "MOE_EXPERTS",
    "PAPER_DECODE_FACTOR",
    "PER_TOKEN_DECODE",
    "PREEMPTION_RECOMPUTE",
    "PREFILL_COMPUTE",
    "PREFILL_SERVED",
    "PREFILL_SERVED_EQ8",
    "PREFILL_SERVED_MEASURED",
    "ROOF_DECODE_ATTENTION",
    "ROOF_EXPERTS",
    "ROOF_LINEAR",
    "ROOF_PREFILL_ATTENTION",
    "ROOF_SEQUENCE_OVERHEAD",
    "ROOF_STEP_OVERHEAD",
    "SERVING_MODE",
    "SEQUENCE_OVERHEAD",
    "STEP_OVERHEAD",
    "STEP_WEIGHT_READ",
    "TP_WORKER_COMM",
    "Contribution",
    "Term",
    "Times",
    "adjust_features",
    "attention_bytes",
    "compose",
    "contributions",
    "decode_attention",
    "effective_batch",
    "effective_batch_term",
    "fixed_times",
    "model_specs",
    "static_batch_column",
    "chunked_prefill_column",
    "without",
]
