"""Facts about vLLM's command line that the package's commands and readers share."""

from __future__ import annotations

from slimlib.registry.gpus import GIB, GPU, get_gpu
from slimlib.registry.host_cpu import CPU_DEVICES

__all__ = [
    "CPU_OFFLINE_BATCHED_TOKENS",
    "CPU_SERVER_BATCHED_TOKENS",
    "NO_PREFIX_CACHING",
    "V0_CHUNKED_BATCHED_TOKENS",
    "VLLM_VERSION",
    "budget_rule",
    "server_batched_tokens",
    "server_max_num_seqs",
]

#: the vLLM release whose defaults the advisor's launch settings follow (the CPU engine the package pins)
VLLM_VERSION = "0.32.0"

#: turns off prefix caching, which vLLM caches by default since its V1 engine (0.32.0 here: `EngineArgs` leaves
#: ``enable_prefix_caching`` None and the platform sets it on). A calibration run must prefill every prompt it times:
#: the benchmark's random prompts repeat across the runs of one server, and a shorter prompt is a prefix of a longer one
NO_PREFIX_CACHING = "--no-enable-prefix-caching"

#: vLLM 0.32.0's default ``--max-num-batched-tokens`` on its CPU build, one rank (``EngineArgs``' usage-context
#: defaults for ``current_platform.is_cpu()``: 2048 x world size for the API server, 4096 x world size for
#: ``LLM``; the server logs no value, the CPU campaigns set none)
CPU_SERVER_BATCHED_TOKENS = 2048
CPU_OFFLINE_BATCHED_TOKENS = 4096

#: the token budget of vLLM's V0 engine with ``--enable-chunked-prefill`` and no ``--max-num-batched-tokens``
#: (``SchedulerConfig`` of 0.5 and 0.6: 512); without chunked prefill V0 steps whole prompts
V0_CHUNKED_BATCHED_TOKENS = 512

#: vLLM 0.32.0's defaults of ``vllm serve`` on a GPU (``EngineArgs.get_batch_defaults``, API-server usage context,
#: by one device's total memory): (GiB at least, ``--max-num-batched-tokens``, ``--max-num-seqs``), the first row
#: that applies; an A100 takes the last row whatever its memory
GPU_SERVER_DEFAULTS = ((160, 16384, 1024), (70, 8192, 1024), (0, 2048, 256))
#: the CPU build's ``--max-num-seqs`` per rank (its budget: `CPU_SERVER_BATCHED_TOKENS` per rank)
CPU_SERVER_MAX_NUM_SEQS = 128


def _gpu_row(hw: GPU) -> tuple[int, int, int]:
    """The `GPU_SERVER_DEFAULTS` row of one device of `hw` (its memory as the driver reports it, where known)."""
    gib = 0 if "a100" in hw.name else (hw.mem_bytes_reported or hw.mem_bytes) / hw.dies / GIB
    return next(row for row in GPU_SERVER_DEFAULTS if gib >= row[0])


def server_batched_tokens(gpu: GPU | str, tensor_parallel: int = 1) -> int:
    """vLLM 0.32.0's default token budget of ``vllm serve`` per engine step on `tensor_parallel` devices `gpu`:
    the CPU build's `CPU_SERVER_BATCHED_TOKENS` x ranks, a GPU's `GPU_SERVER_DEFAULTS` by its memory."""
    hw = get_gpu(gpu)
    if hw.name in CPU_DEVICES:
        return CPU_SERVER_BATCHED_TOKENS * int(tensor_parallel)
    return _gpu_row(hw)[1]


def server_max_num_seqs(gpu: GPU | str, tensor_parallel: int = 1) -> int:
    """vLLM 0.32.0's default ``--max-num-seqs`` of ``vllm serve`` on `tensor_parallel` devices `gpu` (the rule of
    `server_batched_tokens`; the CPU build's `CPU_SERVER_MAX_NUM_SEQS` x ranks)."""
    hw = get_gpu(gpu)
    if hw.name in CPU_DEVICES:
        return CPU_SERVER_MAX_NUM_SEQS * int(tensor_parallel)
    return _gpu_row(hw)[2]


def budget_rule() -> str:
    """`server_batched_tokens`' rule in words (help texts and messages)."""
    last = GPU_SERVER_DEFAULTS[-1][1]
    tiers = [f"{t} from {g} GiB" for g, t, _ in GPU_SERVER_DEFAULTS if g] + [f"else {last}"]
    return f"{'; '.join(tiers)} (an A100: {last}); the CPU engine {CPU_SERVER_BATCHED_TOKENS} per rank"
