"""SLIM as published (paper Eqs. 5-12) with its six calibrated parameters, and its two ablations.

Variants: ``paper`` (Eqs. 5-12), ``no-kv-scan`` (ablation: M_dec = 0, so eta_m only scales T_d) and
``no-dense-decode`` (ablation: T_d = 0, alpha and gamma dropped). Rows with a ``tensor_parallel`` degree above 1
(beyond the paper) use per-GPU features and add the all-reduces (`slimlib.model.parallel`); at 1 GPU the
predictions are the paper's.
"""

from __future__ import annotations

from slimlib.errors import UnknownNameError, close_matches_message
from slimlib.model import equations as eq
from slimlib.model.calibrated import CalibratedModel, Components
from slimlib.model.features import Features, prefill_peak_flops
from slimlib.model.parallel import allreduce_times
from slimlib.model.params import ParamSpec
from slimlib.registry.gpus import GPU

SLIM_SPECS = (
    ParamSpec("eta_c", 1e-3, 1.0, 1.0, 0.5, "-", "prefill compute efficiency (Eq. 7)"),
    ParamSpec("t_fixed", 0.0, 1e3, 1.0, 0.1, "s", "batch-level fixed overhead (Eq. 5)"),
    ParamSpec("eta_m", 1e-3, 1.0, 1.0, 0.5, "-", "decode efficiency (Eq. 9)"),
    ParamSpec("B0", 0.0, 1e4, 10.0, 1.0, "requests", "batch offset (Eq. 9)"),
    ParamSpec("alpha", 0.0, 1.0, 1e-5, 1e-5, "s/token", "per-output-token overhead (Eq. 10)"),
    ParamSpec(
        "gamma",
        0.0,
        1.0,
        1e-6,
        1e-6,
        "s/(layer (D/1024)^2 token)",
        "dense projection/FFN coefficient (Eq. 10: gamma L (D/1024)^2 OL seconds)",
        "flops",
    ),  # fmt: skip
)
VARIANTS = ("paper", "no-kv-scan", "no-dense-decode")


class SlimModel(CalibratedModel):
    """SLIM (paper Eqs. 5-12); `variant` selects the paper model or an ablation.

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
            raise UnknownNameError(close_matches_message("SlimModel variant", variant, list(VARIANTS)))
        self.variant = variant
        super().__init__(gpu, fixed=fixed, n_starts=n_starts, max_nfev=max_nfev, seed=seed)

    def param_specs(self) -> tuple[ParamSpec, ...]:
        if self.variant == "no-dense-decode":
            return tuple(s for s in SLIM_SPECS if s.name not in ("alpha", "gamma"))
        return SLIM_SPECS

    def _components(self, p: dict[str, float], f: Features, hw: GPU) -> Components:
        flops = eq.prefill_flops(
            f["batch_size"], f["input_len"], f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"],
            f["n_ffn_matrices"],
        )  # fmt: skip
        pre = eq.prefill_time(flops, prefill_peak_flops(f, hw), p["eta_c"])
        dense = (
            0.0
            if self.variant == "no-dense-decode"
            else eq.dense_decode_time(
                f["output_len"], f["n_layers"], f["hidden_size"], p["alpha"], p["gamma"]
            )
        )
        kv = (
            0.0
            if self.variant == "no-kv-scan"
            else eq.decode_kv_bytes(
                f["n_layers"], f["d_kv"], f["kv_bytes"], eq.kv_scan_tokens(f["input_len"], f["output_len"])
            )
        )
        dec = eq.decode_time(f["batch_size"], dense, kv, hw.mem_bw, p["eta_m"], p["B0"])
        step_ar, pre_ar = allreduce_times(f, hw)  # tensor parallelism (zero at 1 GPU): beyond the paper
        pre, dec = pre + pre_ar, dec + f["output_len"] * step_ar
        return pre, dec, eq.e2e_latency(pre, dec, p["t_fixed"])
