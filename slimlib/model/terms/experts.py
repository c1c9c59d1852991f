"""Mixture-of-experts and collective terms (beyond the paper): routed-expert weight reads, the tensor-parallel
all-reduces and the expert-parallel all-to-alls."""

from __future__ import annotations

from slimlib.model.features import Features
from slimlib.model.parallel import allreduce_times, expert_alltoall_times, touched_expert_bytes
from slimlib.model.terms import specs as ps
from slimlib.model.terms.term import Params, Term, Times
from slimlib.registry.gpus import GPU


def _moe_experts(p: Params, f: Features, hw: GPU) -> Times:
    bw = p["eta_w"] * hw.mem_bw
    step = touched_expert_bytes(f, f["batch_size"])
    prefill = touched_expert_bytes(f, f["batch_size"] * f["input_len"])
    return Times(prefill=prefill / bw, step=step / bw)


def _allreduce(p: Params, f: Features, hw: GPU) -> Times:
    step, pre = allreduce_times(f, hw)
    return Times(prefill=pre, decode=f["output_len"] * step)


def _expert_alltoall(p: Params, f: Features, hw: GPU) -> Times:
    step, pre = expert_alltoall_times(f, hw)
    return Times(prefill=pre, decode=f["output_len"] * step)


MOE_EXPERTS = Term(
    "moe_experts",
    "routed experts the tokens touch (experts_touched), read at eta_w: per decode step for its B tokens, once per "
    "prefill for its B IL tokens (all experts past the plateau)",
    (ps.ETA_W,), _moe_experts, reads=("expert_weight_bytes", "n_experts", "experts_per_token"),
)  # fmt: skip
ALLREDUCE = Term(
    "allreduce", "tensor-parallel all-reduces: 2 per layer per decode step and over the prefill", (), _allreduce,
    reads=("tensor_parallel",),
)  # fmt: skip
EXPERT_ALLTOALL = Term(
    "expert_alltoall", "expert-parallel dispatch + combine all-to-alls of B k D activation bytes per MoE layer", (),
    _expert_alltoall, reads=("expert_parallel", "n_moe_layers"),
)  # fmt: skip
