"""Static-batch inference timing harness: a minimal PyTorch engine, not vLLM.

`run_point` builds a random-weight decoder for a registry architecture (`slimlib.registry.architectures`), prefills B
prompts of IL tokens, then runs OL decode steps over a preallocated KV cache, and records prefill time, decode
time, every decode step's time and memory (peak allocated, KV-cache bytes, weight bytes). On a GPU the times come
from CUDA events and each decode step is replayed from its own CUDA graph (falls back to eager launches, and says
so, if capture fails); on the CPU from ``time.perf_counter`` (CPU ops run synchronously). What it measures is this
minimal engine (see `slimlib.kit.engine`), not vLLM's continuous-batching server: use it to characterize
kernels and hardware, not to stand in for vLLM throughput numbers.

Also runnable as ``python -m slimlib.kit.harness`` (used under Nsight Compute by `slimlib.kit.ncu`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from slimlib.errors import DataError, SlimError
from slimlib.model import equations as eq
from slimlib.registry.architectures import get_architecture
from slimlib.schema import plain

ENGINE = "slimlib minimal PyTorch engine, not vLLM"
INSTALL_HINT = "install the profiling extra: pip install 'slimlib[profiling]'"
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4}
ARCH_FIELDS = ("name", "n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "ffn_size", "ffn_kind")


def require_torch():
    """Import and return torch, or raise SlimError telling how to install it."""
    try:
        import torch
    except ImportError:
        raise SlimError(f"PyTorch is needed to run measurements; {INSTALL_HINT}") from None
    return torch


def resolve_architecture(arch):
    """An Architecture from a registry name/HF id/config path, or `arch` itself if it already has the fields."""
    if isinstance(arch, str):
        return get_architecture(arch)
    missing = [f for f in ARCH_FIELDS if not hasattr(arch, f)]
    if missing:
        raise DataError(f"architecture object {arch!r} lacks field(s) {', '.join(missing)}")
    return arch


def kv_cache_bytes(arch, batch_size: int, input_len: int, output_len: int, bytes_per_elem: int) -> int:
    """Bytes of the preallocated KV cache: ``2 L B (IL+OL) D_kv b`` with ``D_kv = H_kv d_h`` (Eq. 4)."""
    d_kv = arch.n_kv_heads * arch.head_dim
    return 2 * arch.n_layers * batch_size * (input_len + output_len) * d_kv * bytes_per_elem


def default_dtype(device: str) -> str:
    """fp16 on a GPU (as the paper's runs), fp32 on the CPU (CPU half-precision matmuls are slow or missing)."""
    return "fp32" if str(device).startswith("cpu") else "fp16"


@dataclass
class HarnessResult:
    """One measured point. Times in seconds; `step_s` holds every decode step; bytes are plain bytes."""

    model: str
    device: str
    device_name: str
    dtype: str
    batch_size: int
    input_len: int
    output_len: int
    prefill_s: float
    decode_s: float
    step_s: list[float]
    peak_allocated_bytes: float
    kv_cache_bytes: int
    weight_bytes: int
    cuda_graphs: bool
    note: str = ""
    engine: str = ENGINE
    torch_version: str = ""
    kernels: pd.DataFrame | None = field(default=None, repr=False)  # the kernel profile, if asked for

    @property
    def e2e_s(self) -> float:
        return self.prefill_s + self.decode_s

    @property
    def throughput_tok_s(self) -> float:
        """Total-token throughput ``B (IL + OL) / E2E`` (Eq. 6)."""
        return float(eq.throughput(self.batch_size, self.input_len, self.output_len, self.e2e_s))

    def to_row(self) -> dict:
        """A flat dict for the raw runs CSV (per-step times summarized in milliseconds)."""
        steps = np.asarray(self.step_s, dtype=float) * 1e3
        row = {k: v for k, v in asdict(self).items() if k not in ("step_s", "kernels")}
        row.update(
            e2e_s=self.e2e_s,
            throughput_tok_s=self.throughput_tok_s,
            step_mean_ms=float(steps.mean()),
            step_median_ms=float(np.median(steps)),
            step_p90_ms=float(np.percentile(steps, 90)),
            step_min_ms=float(steps.min()),
            step_max_ms=float(steps.max()),
            step_first_ms=float(steps[0]),
            step_last_ms=float(steps[-1]),
        )
        return row


def _check_point(batch_size: int, input_len: int, output_len: int) -> None:
    for name, v in (("batch_size", batch_size), ("input_len", input_len), ("output_len", output_len)):
        if int(v) != v or v < 1:
            raise DataError(f"{name} must be a positive integer, got {plain(v)}")


def run_point(
    arch,
    batch_size: int,
    input_len: int,
    output_len: int,
    *,
    device: str = "cpu",
    dtype: str | None = None,
    cuda_graphs: bool = True,
    seed: int = 0,
    kernel_profile_steps: int = 0,
    nvtx_steps: tuple[int, int] | None = None,
) -> HarnessResult:
    """Measure one (B, IL, OL) point of `arch` on `device`; see the module docstring for what is timed.

    kernel_profile_steps > 0 adds a PyTorch-profiler pass over that many eager decode steps spread over the decode
    (after the timed run) and puts its table (name, duration_us, count, device_type) in `result.kernels`.
    nvtx_steps=(first, count) runs eagerly and opens NVTX ranges ``slim_step``/``slim_attn``/``slim_ffn`` in those
    decode steps only, for Nsight Compute's ``--nvtx-include``.
    """
    torch = require_torch()
    arch = resolve_architecture(arch)
    _check_point(batch_size, input_len, output_len)
    dtype = dtype or default_dtype(device)
    if dtype not in DTYPE_BYTES:
        raise DataError(f"unknown dtype {dtype!r}; use one of {', '.join(DTYPE_BYTES)}")
    torch_dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
    on_gpu = str(device).startswith("cuda")
    if on_gpu and not torch.cuda.is_available():
        raise SlimError(
            "device 'cuda' asked for but torch sees no CUDA GPU; use --device cpu or a CUDA build"
        )
    from slimlib.kit.engine import SDPA_GQA, Engine

    if on_gpu:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    eng = Engine(arch, batch_size, input_len, output_len, device, torch_dtype, seed=seed)
    notes = [] if SDPA_GQA or arch.n_kv_heads == arch.n_heads else ["GQA by repeating K/V heads"]

    # warm-up (not timed): prefill and two decode steps, so lazy initialisation is not timed
    eng.prefill()
    for t in range(min(2, output_len)):
        eng.step(t)
    graphs = None
    if on_gpu and cuda_graphs and nvtx_steps is None:
        graphs, why = _capture_graphs(torch, eng)
        if graphs is None:
            notes.append(f"CUDA graph capture failed ({why}); decode steps launched eagerly")
    if on_gpu:
        torch.cuda.synchronize()

    step_s, prefill_s = _timed_run(torch, eng, on_gpu, graphs, nvtx_steps)
    peak = float(torch.cuda.max_memory_allocated()) if on_gpu else float("nan")
    kernels = _profile_kernels(torch, eng, kernel_profile_steps, on_gpu) if kernel_profile_steps > 0 else None
    result = HarnessResult(
        model=str(arch.name),
        device="cuda" if on_gpu else "cpu",
        device_name=torch.cuda.get_device_name() if on_gpu else "cpu",
        dtype=dtype,
        batch_size=int(batch_size),
        input_len=int(input_len),
        output_len=int(output_len),
        prefill_s=prefill_s,
        decode_s=float(sum(step_s)),
        step_s=step_s,
        peak_allocated_bytes=peak,
        kv_cache_bytes=eng.kv_cache_nbytes,
        weight_bytes=eng.weight_nbytes,
        cuda_graphs=graphs is not None,
        note="; ".join(notes),
        torch_version=str(torch.__version__),
        kernels=kernels,
    )
    del eng, graphs
    if on_gpu:
        torch.cuda.empty_cache()
    return result


def _capture_graphs(torch, eng):
    """One CUDA graph per decode step (the KV prefix length differs per step), sharing one memory pool."""
    try:
        pool = torch.cuda.graph_pool_handle()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            eng.step(0)
        torch.cuda.current_stream().wait_stream(side)
        graphs = []
        for t in range(eng.ol):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                eng.step(t)
            graphs.append(g)
        return graphs, ""
    except RuntimeError as exc:  # e.g. an op that cannot be captured on this torch/driver
        return None, str(exc).splitlines()[0][:200]


def _timed_run(torch, eng, on_gpu, graphs, nvtx_steps):
    """Prefill then all decode steps; returns (per-step seconds, prefill seconds)."""
    ol = eng.ol
    lo, hi = (nvtx_steps[0], nvtx_steps[0] + nvtx_steps[1]) if nvtx_steps else (-1, -1)
    if on_gpu:
        events = [torch.cuda.Event(enable_timing=True) for _ in range(ol + 2)]
        events[0].record()
        eng.prefill()
        events[1].record()
        for t in range(ol):
            eng.model.nvtx.on = lo <= t < hi
            if graphs is not None:
                graphs[t].replay()
            else:
                eng.step(t)
            events[t + 2].record()
        eng.model.nvtx.on = False
        torch.cuda.synchronize()
        prefill_s = events[0].elapsed_time(events[1]) / 1e3
        step_s = [events[t + 1].elapsed_time(events[t + 2]) / 1e3 for t in range(ol)]
        return step_s, prefill_s
    t0 = time.perf_counter()
    eng.prefill()
    stamps = [time.perf_counter()]
    for t in range(ol):
        eng.step(t)
        stamps.append(time.perf_counter())
    return [b - a for a, b in zip(stamps[:-1], stamps[1:], strict=True)], stamps[0] - t0


def profile_step_positions(output_len: int, n_steps: int) -> list[int]:
    """Decode steps to profile: `n_steps` spread evenly from the first to the last step (deterministic)."""
    n = max(1, min(int(n_steps), int(output_len)))
    return sorted({int(round(x)) for x in np.linspace(0, output_len - 1, n)})


def _profile_kernels(torch, eng, n_steps: int, on_gpu: bool):
    """PyTorch-profiler table over eager decode steps: GPU kernels on a GPU, CPU ops (self time) on the CPU."""
    import pandas as pd
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    positions = profile_step_positions(eng.ol, n_steps)
    with profile(activities=acts) as prof:
        for t in positions:
            eng.step(t)
        if on_gpu:
            torch.cuda.synchronize()
    rows = []
    want = "CUDA" if on_gpu else "CPU"
    for e in prof.key_averages():
        if str(e.device_type).split(".")[-1] != want:
            continue
        if on_gpu:
            us = getattr(e, "self_device_time_total", None)
            if us is None:
                us = getattr(e, "self_cuda_time_total", 0.0)
        else:
            us = e.self_cpu_time_total
        if us and us > 0:
            rows.append({"name": e.key, "duration_us": float(us), "count": int(e.count), "device_type": want})
    df = pd.DataFrame(rows, columns=["name", "duration_us", "count", "device_type"])
    df.attrs["profiled_steps"] = positions
    return df.sort_values(["duration_us", "name"], ascending=[False, True], ignore_index=True)


def _parse_steps(text: str) -> tuple[int, int]:
    try:
        first, count = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected FIRST:COUNT, e.g. 100:2, got {text!r}") from None
    return first, count


def main(argv: list[str] | None = None) -> int:
    """Measure one point and print its row as JSON (the program Nsight Compute launches)."""
    p = argparse.ArgumentParser(prog="python -m slimlib.kit.harness", description=__doc__.splitlines()[0])
    p.add_argument("--model", required=True)
    p.add_argument("--batch-size", type=int, required=True)
    p.add_argument("--input-len", type=int, required=True)
    p.add_argument("--output-len", type=int, required=True)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--dtype", choices=sorted(DTYPE_BYTES))
    p.add_argument("--no-cuda-graphs", action="store_true")
    p.add_argument("--nvtx-steps", type=_parse_steps, help="FIRST:COUNT decode steps to wrap in NVTX ranges")
    a = p.parse_args(argv)
    try:
        r = run_point(
            a.model,
            a.batch_size,
            a.input_len,
            a.output_len,
            device=a.device,
            dtype=a.dtype,
            cuda_graphs=not a.no_cuda_graphs,
            nvtx_steps=a.nvtx_steps,
        )
    except SlimError as exc:
        print(f"harness: error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(r.to_row(), sort_keys=True))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
