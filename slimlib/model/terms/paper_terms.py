"""The paper's terms (Eqs. 5-12): prefill compute, the batch-level fixed overhead, and Eq. 9's decode with its
factor ``(B + B0) / eta_m`` over the per-request dense decode (Eq. 10) and KV scan (Eqs. 11-12)."""

from __future__ import annotations

import numpy as np

from slimlib.model import equations as eq
from slimlib.model.features import Features, prefill_peak_flops
from slimlib.model.terms import specs as ps
from slimlib.model.terms.term import Params, Term, Times
from slimlib.registry.gpus import GPU


def _prefill_compute(p: Params, f: Features, hw: GPU) -> Times:
    flops = eq.prefill_flops(
        f["batch_size"], f["input_len"], f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"],
        f["n_ffn_matrices"],
    )  # fmt: skip
    return Times(prefill=eq.prefill_time(flops, prefill_peak_flops(f, hw), p["eta_c"]))


def _batch_fixed(p: Params, f: Features, hw: GPU) -> Times:
    return Times(fixed=np.full(np.shape(f["batch_size"]), p["t_fixed"]))


def _paper_factor(p: Params, f: Features, hw: GPU) -> Times:
    return Times(factor=eq.decode_batch_factor(f["batch_size"], p["eta_m"], p["B0"]))


def _dense_decode(p: Params, f: Features, hw: GPU) -> Times:
    return Times(
        request=eq.dense_decode_time(f["output_len"], f["n_layers"], f["hidden_size"], p["alpha"], p["gamma"])
    )


def _kv_scan(p: Params, f: Features, hw: GPU) -> Times:
    scan = eq.kv_scan_tokens(f["input_len"], f["output_len"])
    return Times(request=eq.decode_kv_bytes(f["n_layers"], f["d_kv"], f["kv_bytes"], scan) / hw.mem_bw)


PREFILL_COMPUTE = Term(
    "prefill_compute", "prefill FLOPs (Eq. 8) at eta_c of the peak (Eq. 7)", (ps.ETA_C,), _prefill_compute
)
BATCH_FIXED = Term("batch_fixed", "batch-level fixed overhead t_fixed (Eq. 5)", (ps.T_FIXED,), _batch_fixed)
PAPER_DECODE_FACTOR = Term(
    "paper_decode_factor", "Eq. 9's factor (B + B0) / eta_m on the per-request decode time", (ps.ETA_M, ps.B0),
    _paper_factor,
)  # fmt: skip
DENSE_DECODE = Term(
    "dense_decode", "per-request dense decode T_d = alpha OL + gamma L (D/1024)^2 OL (Eq. 10), inside Eq. 9",
    (ps.ALPHA, ps.GAMMA), _dense_decode,
)  # fmt: skip
KV_SCAN = Term(
    "kv_scan", "per-request KV read M_dec / BW = 2 L D_kv b_kv C(IL, OL) / BW (Eqs. 11-12), inside Eq. 9", (),
    _kv_scan,
)  # fmt: skip
