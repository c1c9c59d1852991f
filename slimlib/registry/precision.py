"""Serving precision named as vLLM names it: ``--dtype``, ``--quantization`` (weights), ``--kv-cache-dtype``.

Bytes per element and the tensor peak each precision runs its GEMMs at (`GPU.peak_for`):

- ``dtype`` ``auto`` (the config's ``torch_dtype``; a float32 checkpoint is served in 16 bits, as vLLM's
  ``_get_and_verify_dtype`` does: float16, bfloat16 for Gemma 2/3), ``float16``/``half``, ``bfloat16``: 2 bytes,
  fp16/bf16 peak;
- ``quantization`` absent/``none``: weights in ``dtype``; ``fp8``: 1 byte per linear-layer weight (vLLM's fp8
  method keeps the embeddings and LM head in ``dtype``), GEMMs at the fp8 peak (W8A8) where the GPU has fp8 tensor
  cores, else at the fp16 peak (vLLM's weight-only FP8 Marlin kernel on Ampere); ``fp4`` (also ``nvfp4``,
  ``modelopt_fp4``, ``mxfp4``): 0.5 byte, the fp4 peak where the GPU has one, else the fp16 peak (weight-only);
- ``w4a16`` (and ``w4a16-experts``, the routed experts only): a compressed-tensors checkpoint of 4-bit integer
  weights with 16-bit activations (vLLM's ``compressed-tensors`` method): 0.5 byte, always the fp16 peak;
- ``fp8-mxfp4-experts`` and ``fp8-nvfp4-experts``: a DeepSeek-V4 checkpoint (vLLM's ``deepseek_v4_fp8`` method,
  which vLLM picks itself for the checkpoint): 1 byte per linear-layer weight, 0.5 byte per routed-expert weight
  (MXFP4 with e8m0 scales per 32, or NVIDIA's NVFP4 per 16; scales not counted), GEMMs at the fp8 peak;
- ``mxfp8-nvfp4-experts``: NVIDIA's ModelOpt MIXED_PRECISION checkpoint of MiniMax-M3 (vLLM's ``modelopt_mixed``):
  MXFP8 linear layers (1 byte), NVFP4 routed experts (0.5 byte; scales not counted), GEMMs at the fp8 peak;
- ``kv_cache_dtype`` ``auto`` (as ``dtype``), ``fp8``/``fp8_e4m3``/``fp8_e5m2``: 1 byte per KV element (Eq. 11's
  ``b_kv``).
"""

from __future__ import annotations

from slimlib.errors import UnknownNameError, close_matches_message
from slimlib.registry.gpus import GPU

__all__ = [
    "DTYPES",
    "QUANTIZATIONS",
    "VLLM_QUANTIZATION",
    "FP4_EXPERTS",
    "KV_CACHE_DTYPES",
    "dtype_bytes",
    "weight_precision",
    "weight_bytes_per_element",
    "kv_bytes_per_element",
    "compute_peak",
    "precision_peak",
    "KERNEL_DTYPES",
    "kernel_peak",
    "kernel_weight_bytes",
]

#: --dtype values -> bytes per element (None: the model config's own dtype)
DTYPES: dict[str, float | None] = {"auto": None, "float16": 2, "half": 2, "bfloat16": 2, "fp16": 2, "bf16": 2}
#: --quantization values -> precision of the weights ("none": the serving dtype)
QUANTIZATIONS = {
    "none": "none",
    "fp8": "fp8",
    "fp4": "fp4",
    "nvfp4": "fp4",
    "modelopt_fp4": "fp4",
    "mxfp4": "fp4",
    "w4a16": "int4",
    "w4a16-experts": "int4",
    "fp8-mxfp4-experts": "fp8",
    "fp8-nvfp4-experts": "fp8",
    "mxfp8-nvfp4-experts": "fp8",
}
#: --quantization values whose routed experts are 4-bit (0.5 byte) beside fp8 linear layers (DeepSeek-V4,
#: MiniMax-M3's ModelOpt checkpoint)
FP4_EXPERTS = ("fp8-mxfp4-experts", "fp8-nvfp4-experts", "mxfp8-nvfp4-experts")
#: --quantization values -> the flag vLLM takes for them: SLIM's ``fp4`` and ``nvfp4`` are NVIDIA's NVFP4, which vLLM
#: serves from a ModelOpt checkpoint as ``modelopt_fp4`` (vLLM has no ``fp4`` or ``nvfp4`` value)
VLLM_QUANTIZATION = {"fp8": "fp8", "fp4": "modelopt_fp4", "nvfp4": "modelopt_fp4", "modelopt_fp4": "modelopt_fp4",
                     "mxfp4": "mxfp4", "w4a16": "compressed-tensors", "w4a16-experts": "compressed-tensors",
                     "fp8-mxfp4-experts": "deepseek_v4_fp8", "fp8-nvfp4-experts": "deepseek_v4_fp8",
                     "mxfp8-nvfp4-experts": "modelopt_mixed"}  # fmt: skip
#: --kv-cache-dtype values -> bytes per element (None: the serving dtype)
KV_CACHE_DTYPES: dict[str, float | None] = {"auto": None, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1}
#: kernel-table dtype (AIConfigurator's, and ROCm aiter's as `slimlib.data.aiter` names them) -> (vLLM
#: --quantization of the weights, precision of the tensor peak the GEMMs run at, `GPU.peak_for`). Block scales (e.g.
#: 1 byte per 16 or 32 fp4 weights) are not counted.
KERNEL_DTYPES: dict[str, tuple[str, str]] = {
    "bfloat16": ("none", "fp16"),
    "fp8": ("fp8", "fp8"),  # W8A8, per-tensor (AIConfigurator) or per-token x per-channel scales (aiter)
    "fp8_block": ("fp8", "fp8"),  # W8A8, 128x128 block scales
    "int4_wo": ("fp4", "fp16"),  # 4-bit integer weights (0.5 byte, as fp4), 16-bit compute (Marlin)
    "w4a16_mxfp4": ("fp4", "fp16"),  # MXFP4 weights, 16-bit compute
    "w4a8_mxfp4_mxfp8": ("fp4", "fp8"),  # MXFP4 weights, MXFP8 activations
    "nvfp4": ("fp4", "fp4"),  # W4A4
    "mxfp4": ("fp4", "fp4"),  # W4A4, MXFP4 (e2m1 with one e8m0 scale per 32)
    "mxfp8": ("fp8", "fp8"),  # W8A8, MXFP8 (e4m3 with one e8m0 scale per 32)
}

_QUANT_BYTES = {"fp8": 1.0, "fp4": 0.5, "int4": 0.5}


def _kernel_dtype(dtype: str) -> tuple[str, str]:
    if dtype not in KERNEL_DTYPES:
        raise UnknownNameError(close_matches_message("kernel dtype", dtype, list(KERNEL_DTYPES)))
    return KERNEL_DTYPES[dtype]


def kernel_weight_bytes(dtype: str) -> float:
    """Bytes per weight of a kernel table's dtype (`KERNEL_DTYPES`; 16-bit weights: 2)."""
    return weight_bytes_per_element(_kernel_dtype(dtype)[0], dtype_bytes("bfloat16", 2))


def kernel_peak(gpu: GPU, dtype: str) -> float:
    """Dense tensor peak FLOP/s the GEMMs of a kernel table's dtype run at on `gpu` (fp8 peak for fp8 ...)."""
    return gpu.peak_for(_kernel_dtype(dtype)[1])


def _key(value: object) -> str:
    """A cell or option as a lookup key: '' for None/NaN/empty, else lower-case and stripped."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    return str(value).strip().lower()


def dtype_bytes(dtype: object, model_bytes: float) -> float:
    """Bytes per element of ``--dtype`` `dtype` (empty or 'auto': the config's `model_bytes`, at most 2: vLLM
    serves float32 checkpoints in 16 bits)."""
    k = _key(dtype) or "auto"
    if k not in DTYPES:
        raise UnknownNameError(close_matches_message("dtype", str(dtype), list(DTYPES)))
    b = DTYPES[k]
    return float(min(model_bytes, 2) if b is None else b)


def weight_precision(quantization: object) -> str:
    """'none', 'fp8', 'fp4' or 'int4' for a ``--quantization`` value (empty: 'none')."""
    k = _key(quantization) or "none"
    if k not in QUANTIZATIONS:
        raise UnknownNameError(close_matches_message("quantization", str(quantization), list(QUANTIZATIONS)))
    return QUANTIZATIONS[k]


def weight_bytes_per_element(quantization: object, serving_bytes: float) -> float:
    """Bytes per quantized (linear-layer) weight: 1 for fp8, 0.5 for fp4 and int4, else `serving_bytes`."""
    return _QUANT_BYTES.get(weight_precision(quantization), float(serving_bytes))


def kv_bytes_per_element(kv_cache_dtype: object, serving_bytes: float) -> float:
    """Eq. 11's ``b_kv`` for a ``--kv-cache-dtype`` value (empty or 'auto': `serving_bytes`)."""
    k = _key(kv_cache_dtype) or "auto"
    if k not in KV_CACHE_DTYPES:
        raise UnknownNameError(
            close_matches_message("kv_cache_dtype", str(kv_cache_dtype), list(KV_CACHE_DTYPES))
        )
    b = KV_CACHE_DTYPES[k]
    return float(serving_bytes if b is None else b)


def precision_peak(gpu: GPU, precision: str) -> float:
    """The GPU's tensor peak for weights of `precision` ('none', 'fp8', 'fp4', 'int4'): its peak at that precision
    where it has one (W8A8 / W4A4 GEMMs), else its fp16/bf16 peak (weight-only kernels compute in 16 bits)."""
    peaks = gpu.peaks
    return peaks.get(precision, peaks["fp16"])


def compute_peak(gpu: GPU, quantization: object) -> float:
    """Eq. 7's ``F_max`` for weights quantized as `quantization` (`precision_peak` of its precision)."""
    return precision_peak(gpu, weight_precision(quantization))
