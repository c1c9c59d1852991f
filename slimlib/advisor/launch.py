"""Launch settings for a batch cap, right for the device, each derived from the resolved memory arithmetic.

For B_cap requests of ``IL + OL`` tokens on one `ServingConfig` (per GPU of a tensor-parallel group) the KV cache
needs ``B_cap x request_blocks(IL + OL)`` blocks of ``block_size x kv_bytes_per_token`` bytes (`kv_need`).

* GPU (vLLM's CUDA engine): ``--max-num-seqs B_cap``; ``--gpu-memory-utilization`` = (weights + reserve + those
  blocks) / the GPU's memory, rounded up to 0.01 (`memory_utilization`); ``--max-num-batched-tokens`` the token
  budget the prediction assumed (at least B_cap: vLLM refuses a budget below ``max_num_seqs``);
  ``--max-model-len IL + OL``; ``-tp``, ``--quantization`` (vLLM's name, `VLLM_QUANTIZATION`) and
  ``--kv-cache-dtype`` where not the defaults.
* CPU (vLLM's CPU engine, registry device ``cpu``): the KV pool is ``VLLM_CPU_KVCACHE_SPACE``, whole GiB
  (vLLM reads an integer), rounded up from the same blocks; threads ``VLLM_CPU_OMP_THREADS_BIND`` (``0-(n-1)``
  for `cpu_threads` n, else ``auto``); ``--gpu-memory-utilization`` is never given (the CPU engine has no such
  fraction).
"""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from slimlib.errors import DataError
from slimlib.model.memory import DEFAULT_BLOCK_SIZE, GIB
from slimlib.model.serving import ServingConfig
from slimlib.registry.host_cpu import CPU_DEVICES
from slimlib.registry.precision import VLLM_QUANTIZATION, weight_precision
from slimlib.registry.vllm_flags import NO_PREFIX_CACHING

__all__ = [
    "CHECKPOINT_PLACEHOLDER",
    "LaunchSettings",
    "checkpoint_refusal",
    "is_cpu",
    "kv_need",
    "launch_settings",
    "memory_utilization",
    "placeholder_note",
    "served_model",
]


#: what the launch line names when the model was given as a config file that is not a checkpoint's ``config.json``
CHECKPOINT_PLACEHOLDER = "CHECKPOINT"


def served_model(model: str, hf_id: str) -> str:
    """What `vllm serve` is given for the model asked about as `model`: a local ``config.json``'s folder (or the
    folder given), a Hugging Face repository as named (an Instruct or FP8 repository is not its base model), else
    `hf_id`, the registry's repository for a registry name; `CHECKPOINT_PLACEHOLDER` for a config file of another
    name (its folder is no checkpoint vLLM loads: `placeholder_note`)."""
    p = Path(model)
    if p.exists():
        if p.is_file() and p.name != "config.json":
            return CHECKPOINT_PLACEHOLDER
        return str(p.parent if p.is_file() else p)
    return model if "/" in model else hf_id


def placeholder_note(model: str) -> str:
    """The line that says what `CHECKPOINT_PLACEHOLDER` stands for."""
    return (
        f"({CHECKPOINT_PLACEHOLDER}: the checkpoint whose config is {Path(model).name}, as its folder or Hugging Face "
        "repository; vLLM loads a folder holding config.json and the weights)"
    )


def checkpoint_refusal(arch, quantization: object) -> str:
    """Why vLLM cannot serve `arch`'s checkpoint with ``--quantization`` `quantization` ('' when it can): fp4 weights
    come from an fp4 checkpoint (vLLM's ``modelopt_fp4`` reads a ModelOpt NVFP4 release), never from a 16-bit one.
    A quantized checkpoint served in another method is `serving_config`'s refusal."""
    if arch.quantization or not quantization or weight_precision(quantization) != "fp4":
        return ""
    return (
        f"the checkpoint of {arch.name} is 16-bit: fp4 weights are served from an fp4 checkpoint (vLLM's "
        f"{VLLM_QUANTIZATION.get(str(quantization).lower(), quantization)} reads a ModelOpt NVFP4 release; give its "
        "config.json as --model)"
    )


def is_cpu(config: ServingConfig) -> bool:
    """True for vLLM's CPU engine (a host-CPU device of the registry)."""
    return config.gpu in CPU_DEVICES


def kv_need(config: ServingConfig, b_cap: int, context: float) -> tuple[int, float]:
    """(blocks, bytes) of KV cache that `b_cap` requests of `context` tokens hold on one GPU of `config`."""
    return int(b_cap * float(config.request_blocks(context))), b_cap * float(config.request_kv_bytes(context))


def memory_utilization(config: ServingConfig, kv_bytes: float) -> float:
    """``(weights + reserve + kv_bytes) / capacity`` rounded up to 0.01 (may exceed 1: it does not fit)."""
    need = config.weights + config.reserve + kv_bytes
    return math.ceil(need / config.capacity * 100 - 1e-9) / 100


@dataclass(frozen=True)
class LaunchSettings:
    """Environment and `vllm serve` flags for one deployment; `fits` False when the GPU cannot hold B_cap."""

    env: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    kv_cache_gib: float = 0.0
    fits: bool = True

    def command(self, hf_id: str) -> str:
        """The shell line: environment assignments, then ``vllm serve HF_ID FLAGS``."""
        env = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        return " ".join([*env, shlex.join(["vllm", "serve", hf_id, *self.flags])])


def launch_settings(
    config: ServingConfig,
    b_cap: int,
    input_len: float,
    output_len: float,
    *,
    cpu_threads: int | None = None,
    dtype: str | None = None,
) -> LaunchSettings:
    """The settings that hold `b_cap` requests of ``input_len + output_len`` tokens on `config` (module
    docstring); `dtype` is vLLM's ``--dtype`` as given (left out when None or auto)."""
    if b_cap < 1:
        raise DataError("no feasible batch size: there are no launch settings to give")
    context = input_len + output_len
    blocks, kv_bytes = kv_need(config, b_cap, context)
    flags = ["--max-num-seqs", str(int(b_cap))]
    env: dict[str, str] = {}
    fits = True
    if is_cpu(config):
        env["VLLM_CPU_KVCACHE_SPACE"] = str(max(1, math.ceil(kv_bytes / GIB - 1e-9)))
        env["VLLM_CPU_OMP_THREADS_BIND"] = f"0-{int(cpu_threads) - 1}" if cpu_threads else "auto"
    else:
        util = memory_utilization(config, kv_bytes)
        fits = util <= 1.0
        flags += ["--gpu-memory-utilization", f"{min(util, 1.0):.2f}"]
    flags += [
        "--max-num-batched-tokens",
        str(max(int(config.max_num_batched_tokens), int(b_cap))),
        "--max-model-len",
        str(int(math.ceil(context))),
    ]
    if config.tensor_parallel > 1:
        flags += ["-tp", str(config.tensor_parallel)]
    # a page size other than vLLM's default (MiniMax-M3's 128, or the user's); a hybrid's pages vLLM sizes itself
    if config.block_size != DEFAULT_BLOCK_SIZE and not config.state_groups:
        flags += ["--block-size", str(config.block_size)]
    if (
        config.state_groups
    ):  # a hybrid: prefix caching would hold more state pages per request than counted here
        flags.append(NO_PREFIX_CACHING)
    if dtype and dtype != "auto":
        flags += ["--dtype", dtype]
    if config.vllm_quantization:
        flags += ["--quantization", config.vllm_quantization]
    if config.kv_cache_dtype != "auto":
        flags += ["--kv-cache-dtype", config.kv_cache_dtype]
    return LaunchSettings(env, flags, kv_bytes / GIB, fits)
