"""Measured priors of the hardware efficiencies, held when a fit has fewer rows than free parameters.

A prior belongs to one parameter of one term (`slimlib.model.params.ParamSpec.prior`), never to a bare name: the
paper's ``eta_m`` (Eq. 9's decode efficiency, which B0 offsets) has none, the recommended model's attention
bandwidth efficiency ``eta_attn`` has the attention prior below.

Values measured from the shared kernel timings (NVIDIA AIConfigurator's H100 SXM tables in ``data/aic-*.csv``,
vLLM/bf16, Mistral-7B shapes: 32 query / 8 KV heads, D = 4096), analytic bytes or FLOPs over measured time, as in
notebook 09 and `slimlib.experiments.kernel_timing` (``tests/test_priors.py`` recomputes them from the data):

* `ATTENTION_BANDWIDTH`, decode-attention bandwidth efficiency: bytes read / (time x peak bandwidth) over the 17
  measured (B, context) points with an active context of at least 65,536 tokens (batch sizes 1-256, contexts
  127-8191): median 0.845, range 0.627-0.932, standard deviation 0.098.
* `WEIGHT_READ`, weight-read bandwidth efficiency of the decode GEMMs: weight and activation bytes / (time x peak
  bandwidth) of the qkv, o, FFN-up, FFN-down and LM-head GEMMs at M = 1, 2, 4, 8, 16 tokens (25 points): median
  0.758, range 0.649-0.884, standard deviation 0.072.
* `PREFILL_COMPUTE`, prefill compute efficiency: FLOPs / (time x peak FLOP/s) of the same GEMMs at M = 2048, 4096,
  8192 tokens (15 points): median 0.794, range 0.730-0.888, standard deviation 0.042.

* `EXPERT_COMPUTE`, compute efficiency of vLLM's fused MoE kernel (beyond the paper; the kernel checks' ``eta_e``):
  expert FLOPs ``2 T k 3 D F`` / (time x peak FLOP/s) over AIConfigurator's H100 SXM ``aic-moe`` table, bf16,
  one GPU, balanced routing, T >= 4096 tokens, every measured shape (75 points;
  `slimlib.experiments.kernel_timing.ridge_check.moe_compute_efficiency`): median 0.437, range 0.090-0.714,
  standard deviation 0.116. It is about half the dense GEMMs' `PREFILL_COMPUTE`: the fused kernels turn
  compute-bound about twice as early as dense GEMMs of the same weights would.

* `DECODE_ATTENTION_COMPUTE`, compute efficiency of the latent-attention decode kernel (beyond the paper;
  the kernel checks' ``eta_ac``): absorbed-MLA FLOPs / (time x bf16 peak) over AIConfigurator's H100 SXM ``aic-mla``
  generation table, bf16 KV, 128 heads per GPU (DeepSeek-V3 at TP 1), batch x context >= 2^20 tokens (60 points;
  `slimlib.experiments.kernel_timing.ridge_check.mla_compute_efficiency`): median 0.546, range 0.214-0.686,
  standard deviation 0.119.

The priors are H100 SXM numbers; on other GPUs they are a starting assumption, which `summary` marks ("held at
prior"). A few-point fit holds every parameter that has a prior, all together, when the rows cannot determine the
free parameters (none otherwise).

Where the registry measures the efficiency on the device itself, that measurement is the prior there
(`device_prior`, models with ``device_priors``: the recommended one): ``eta_c`` on a device with a measured roof of
the engine's own GEMM (``decode_gemm_flops``; the host CPU's: 194.4 GFLOP/s of vLLM's oneDNN GEMM against the
417.01 GFLOP/s bf16 peak, 0.466), where the H100's 0.794 would be a guess.
"""

from __future__ import annotations

from dataclasses import dataclass

from slimlib.registry.gpus import GPU


@dataclass(frozen=True)
class Prior:
    """A measured efficiency: median (the value a fit holds), spread over the measured points, and its source."""

    median: float
    low: float
    high: float
    sd: float
    n_points: int
    source: str


_SOURCE = "AIConfigurator H100 SXM kernel tables (data/aic-*.csv), Mistral-7B shapes, bf16"
ATTENTION_BANDWIDTH = Prior(
    0.845, 0.627, 0.932, 0.098, 17, f"decode attention, active context >= 65536; {_SOURCE}"
)
WEIGHT_READ = Prior(0.758, 0.649, 0.884, 0.072, 25, f"decode GEMMs at M <= 16 (weight read); {_SOURCE}")
PREFILL_COMPUTE = Prior(0.794, 0.730, 0.888, 0.042, 15, f"GEMMs at M >= 2048 (prefill compute); {_SOURCE}")
EXPERT_COMPUTE = Prior(
    0.437, 0.090, 0.714, 0.116, 75, "fused MoE at T >= 4096 tokens, one GPU, balanced routing; AIConfigurator H100 "
    "SXM aic-moe table, bf16",
)  # fmt: skip
DECODE_ATTENTION_COMPUTE = Prior(
    0.546, 0.214, 0.686, 0.119, 60, "MLA decode at 128 heads, batch x context >= 2^20; AIConfigurator H100 SXM "
    "aic-mla generation table, bf16",
)  # fmt: skip


def device_prior(name: str, hw: GPU) -> Prior | None:
    """The device's own measured value of the efficiency `name`, where the registry has one: ``eta_c`` = the roof
    of the engine's own GEMM over the peak, ``decode_gemm_flops / peak_flops`` (a prefill's GEMMs run at that roof:
    the measured curve of the host CPU is flat from M = 128 tokens on, ``decode_gemm_curve``); else None."""
    if name == "eta_c" and hw.decode_gemm_flops and hw.peak_flops:
        v = float(hw.decode_gemm_flops) / float(hw.peak_flops)
        return Prior(v, v, v, 0.0, 1, f"{hw.name}: the engine's measured GEMM roof over its peak, registry "
                                      f"decode_gemm_flops / peak_flops; {hw.decode_gemm_source}")  # fmt: skip
    return None
