"""Facts about vLLM's command line that the package's commands and readers share."""

from __future__ import annotations

__all__ = ["CPU_OFFLINE_BATCHED_TOKENS", "CPU_SERVER_BATCHED_TOKENS", "NO_PREFIX_CACHING"]

#: turns off prefix caching, which vLLM caches by default since its V1 engine (0.32.0 here: `EngineArgs` leaves
#: ``enable_prefix_caching`` None and the platform sets it on). A calibration run must prefill every prompt it times:
#: the benchmark's random prompts repeat across the runs of one server, and a shorter prompt is a prefix of a longer one
NO_PREFIX_CACHING = "--no-enable-prefix-caching"

#: vLLM 0.32.0's default ``--max-num-batched-tokens`` on its CPU build, one rank (``EngineArgs``' usage-context
#: defaults for ``current_platform.is_cpu()``: 2048 x world size for the API server, 4096 x world size for
#: ``LLM``; the server logs no value, the CPU campaigns set none)
CPU_SERVER_BATCHED_TOKENS = 2048
CPU_OFFLINE_BATCHED_TOKENS = 4096
