"""Every calibrated parameter of the model terms, defined once (a name means one quantity everywhere).

The paper's six (Eqs. 5-10) keep the paper's names and meanings; quantities beyond the paper have their own names.
Priors (`slimlib.model.priors`) sit on the parameter they were measured for.
"""

from __future__ import annotations

from slimlib.model import priors
from slimlib.model.params import ParamSpec

ETA_C = ParamSpec(
    "eta_c", 1e-3, 1.0, 1.0, 0.5, "-", "prefill compute efficiency (Eq. 7)", prior=priors.PREFILL_COMPUTE
)
T_FIXED = ParamSpec("t_fixed", 0.0, 1e3, 1.0, 0.1, "s", "batch-level fixed overhead (Eq. 5)")
ETA_M = ParamSpec("eta_m", 1e-3, 1.0, 1.0, 0.5, "-", "decode efficiency (Eq. 9)")
B0 = ParamSpec("B0", 0.0, 1e4, 10.0, 1.0, "requests", "batch offset (Eq. 9)")
ALPHA = ParamSpec(
    "alpha", 0.0, 1.0, 1e-5, 1e-5, "s/token", "per-request, per-output-token cost (Eq. 10's alpha)"
)
GAMMA = ParamSpec(
    "gamma", 0.0, 1.0, 1e-6, 1e-6, "s/(layer (D/1024)^2 token)",
    "dense projection/FFN coefficient (Eq. 10: gamma L (D/1024)^2 OL seconds)", "flops",
)  # fmt: skip
ETA_ATTN = ParamSpec(
    "eta_attn", 1e-3, 1.5, 1.0, 0.5, "-",
    "decode attention bandwidth efficiency (Eq. 9's efficiency without B0)", prior=priors.ATTENTION_BANDWIDTH,
)  # fmt: skip
ETA_W = ParamSpec(
    "eta_w",
    1e-3,
    1.5,
    1.0,
    0.5,
    "-",
    "efficiency of the per-step weight read P b_w / BW",
    prior=priors.WEIGHT_READ,
)
T_STEP = ParamSpec(
    "t_step", 0.0, 1.0, 1e-3, 1e-3, "s/step", "per-decode-step overhead independent of batch and model"
)
T_LAYER = ParamSpec(
    "t_layer", 0.0, 1e-2, 1e-5, 1e-5, "s/(layer step)",
    "per-layer, per-decode-step overhead (launching one layer's kernels; every tensor-parallel rank launches every "
    "layer, so it does not shrink with TP)",
)  # fmt: skip
T_ACT = ParamSpec(
    "t_act", 0.0, 1e-2, 1e-6, 1e-6, "s/(sequence layer step) per 1024 of width",
    "per-sequence, per-layer, per-decode-step work that grows with the hidden width D (elementwise norms, "
    "activations, residual adds, each sequence's attention call), per 1024 of D",
    "bandwidth",
)  # fmt: skip
T_SEQ = ParamSpec(
    "t_seq", 0.0, 0.1, 1e-5, 1e-5, "s/(sequence step)",
    "per-sequence, per-decode-step overhead (scheduler, sampler, detokenizer work for each running sequence)",
)  # fmt: skip
ETA_D = ParamSpec("eta_d", 1e-4, 1.0, 0.1, 0.1, "-", "decode GEMM compute efficiency (FLOPs / peak)")
ETA_E = ParamSpec(
    "eta_e", 1e-3, 1.0, 1.0, 0.5, "-", "routed-expert (fused MoE) compute efficiency (FLOPs / peak)",
    prior=priors.EXPERT_COMPUTE,
)  # fmt: skip
ETA_AC = ParamSpec(
    "eta_ac", 1e-3, 1.0, 0.5, 0.5, "-", "decode attention compute efficiency (FLOPs / peak)",
    prior=priors.DECODE_ATTENTION_COMPUTE,
)  # fmt: skip
