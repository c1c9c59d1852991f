"""A measurement campaign that fits a time budget: a prioritized grid, a roofline cost estimate, and the runner.

Grid (`default_points`), in priority order (tier 1 first; within a tier, in the order listed):

* tier 1, coarse batch sizes 1/16/64/256: model transfer (OPT-125M/350M/1.3B/2.7B/6.7B, IL 128, OL 384),
  input-length transfer (OPT-1.3B, OL 256, IL 128/512/1024), output-length transfer (OPT-1.3B, IL 128,
  OL 32/128/256/512) - the scenarios of the paper's Table II, with IL 128 chosen by this kit (the paper does not
  state the fixed IL);
* tier 2: kernel breakdowns (Fig. 5) of Mistral-7B and Granite-8B shapes over B, IL and OL, then Nsight Compute
  counters (Figs. 4, 6-8, Table I) at a handful of points;
* tier 3: the other batch sizes 2/4/8/32/128/512 of the tier-1 curves, then whole-step counters of Mistral-7B
  at B = 16 and 64 (Fig. 4's batch sweep).

`estimate_cost_s` is a roofline: prefill ``max(F_pre / P, W / BW)`` (Eq. 8 FLOPs), decode ``OL max(2 N B / P,
W / BW) + B M_dec / BW`` (Eqs. 11-12 KV traffic), times a safety factor, plus a per-point overhead (model build,
warm-up, CUDA-graph capture, profiler or ncu passes). `plan_campaign` takes points in priority order while the
sum of estimates stays within the budget, skipping points that do not fit memory or the remaining budget.
`run_campaign` measures the planned points and writes raw CSVs plus ``manifest.json`` into a folder; it also
stops when the wall clock says the budget is spent.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from slimlib import __version__
from slimlib.errors import DataError, SlimError
from slimlib.io import write_csv, write_text
from slimlib.kit.harness import DTYPE_BYTES, ENGINE, default_dtype, kv_cache_bytes, require_torch, run_point
from slimlib.kit.kernel_classes import classify_kernel
from slimlib.kit.ncu import ncu_command
from slimlib.model import equations as eq
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import GIB, get_gpu
from slimlib.schema import plain

BATCH_COARSE = (1, 16, 64, 256)
BATCH_FINE = (2, 4, 8, 32, 128, 512)
MODEL_TRANSFER_MODELS = ("opt-125m", "opt-350m", "opt-1.3b", "opt-2.7b", "opt-6.7b")
KERNEL_MODELS = ("mistral-7b", "granite-8b")
KIND_ORDER = ("run", "kernels", "counters")
SAFETY = 3.0
KERNEL_PROFILE_STEPS = 8


@dataclass(frozen=True)
class DeviceSpec:
    """The three numbers the planner needs: peak FLOP/s, memory bandwidth (bytes/s), memory (bytes)."""

    name: str
    peak_flops: float
    mem_bw: float
    mem_bytes: float


# Rough CPU figures for planning only (a few-core server CPU in fp32); not measured, not used as results.
CPU_SPEC = DeviceSpec("cpu", peak_flops=5e10, mem_bw=1e10, mem_bytes=8e9)


def device_spec(gpu: str | None, device: str) -> DeviceSpec:
    """Planner numbers for `device`: the registry GPU `gpu` (`slimlib.registry.gpus`) on cuda, `CPU_SPEC` on cpu."""
    if device == "cpu":
        return CPU_SPEC
    if not gpu:
        raise SlimError("give the GPU for planning with --gpu NAME (e.g. h200, h100); see `slim gpus`")

    g = get_gpu(gpu)
    return DeviceSpec(g.name, g.peak_flops, g.mem_bw, g.mem_bytes)


@dataclass(frozen=True)
class Point:
    """One campaign item. kind: 'run' (timings), 'kernels' (timings + kernel breakdown) or 'counters' (ncu)."""

    groups: str
    model: str
    batch_size: int
    input_len: int
    output_len: int
    kind: str = "run"
    target: str = ""
    tier: int = 1

    @property
    def point_id(self) -> str:
        tail = f"-{self.target}" if self.target else ""
        return f"{self.model}_b{self.batch_size}_il{self.input_len}_ol{self.output_len}_{self.kind}{tail}"


def default_points() -> list[Point]:
    """The kit's grid in priority order (see the module docstring); duplicates merged, groups joined by ';'."""
    pts: list[Point] = []

    def curves(batches, tier):
        for m in MODEL_TRANSFER_MODELS:
            pts.extend(Point("model-transfer", m, b, 128, 384, tier=tier) for b in batches)
        for il in (128, 512, 1024):
            pts.extend(Point("input-length-transfer", "opt-1.3b", b, il, 256, tier=tier) for b in batches)
        for ol in (32, 128, 256, 512):
            pts.extend(Point("output-length-transfer", "opt-1.3b", b, 128, ol, tier=tier) for b in batches)

    curves(BATCH_COARSE, 1)
    for m in KERNEL_MODELS:
        g = "kernel-figures"
        pts.extend(Point(g, m, b, 512, 256, "kernels", tier=2) for b in (16, 64, 128, 256))
        pts.extend(Point(g, m, 64, il, 256, "kernels", tier=2) for il in (1024, 2048))
        pts.extend(Point(g, m, 64, 512, ol, "kernels", tier=2) for ol in (512, 1024))
    for m, b in (("mistral-7b", 16), ("mistral-7b", 64), ("mistral-7b", 256), ("granite-8b", 64)):
        pts.append(Point("counters", m, b, 512, 256, "counters", "attention", tier=2))
    pts.append(Point("counters", "mistral-7b", 256, 512, 256, "counters", "step", tier=2))
    pts.append(Point("counters", "mistral-7b", 256, 512, 256, "counters", "ffn", tier=2))
    curves(BATCH_FINE, 3)
    # whole-step counters at smaller batches, so Fig. 4 has a batch sweep when the budget allows
    pts.extend(Point("counters", "mistral-7b", b, 512, 256, "counters", "step", tier=3) for b in (16, 64))
    return merge_duplicates(pts)


def merge_duplicates(points: list[Point]) -> list[Point]:
    """Keep the first of points measuring the same thing, joining the groups of the later ones into it."""
    seen: dict[tuple, int] = {}
    out: list[Point] = []
    for p in points:
        key = (p.model, p.batch_size, p.input_len, p.output_len, p.kind, p.target)
        if key in seen:
            i = seen[key]
            groups = out[i].groups.split(";")
            if p.groups not in groups:
                out[i] = Point(**{**asdict(out[i]), "groups": ";".join([*groups, p.groups])})
        else:
            seen[key] = len(out)
            out.append(p)
    return out


def point_from_row(row) -> Point:
    """A Point from a plan row (or dict), with plain Python types."""
    ints = ("batch_size", "input_len", "output_len", "tier")
    return Point(**{k: int(row[k]) if k in ints else str(row[k]) for k in Point.__dataclass_fields__})


def memory_need_bytes(arch, p: Point, bytes_per_elem: int) -> float:
    """Weights + KV cache + a prefill activation allowance ``4 B IL max(4D, D_ff) b`` (bytes)."""
    w = arch.n_params * bytes_per_elem
    kv = kv_cache_bytes(arch, p.batch_size, p.input_len, p.output_len, bytes_per_elem)
    act = 4 * p.batch_size * p.input_len * max(4 * arch.hidden_size, arch.ffn_size) * bytes_per_elem
    return float(w + kv + act)


def estimate_cost_s(arch, p: Point, spec: DeviceSpec, bytes_per_elem: int, safety: float = SAFETY) -> float:
    """Estimated wall seconds of one point on `spec` (roofline times `safety`, plus overheads; module docstring)."""
    w = arch.n_params * bytes_per_elem
    n_ffn = 3 if arch.ffn_kind == "gated" else 2
    d_kv = arch.n_kv_heads * arch.head_dim
    f_pre = float(
        eq.prefill_flops(
            p.batch_size, p.input_len, arch.n_layers, arch.hidden_size, d_kv, arch.ffn_size, n_ffn
        )
    )
    t_pre = max(f_pre / spec.peak_flops, w / spec.mem_bw)
    kv_read = p.batch_size * float(
        eq.decode_kv_bytes(arch.n_layers, d_kv, bytes_per_elem, eq.kv_scan_tokens(p.input_len, p.output_len))
    )
    t_step_dense = max(2.0 * arch.n_params * p.batch_size / spec.peak_flops, w / spec.mem_bw)
    t_dec = p.output_len * t_step_dense + kv_read / spec.mem_bw
    t_mean_step = t_dec / p.output_len
    # timed run + warm-up (prefill and 2 steps)
    measured = 2 * t_pre + t_dec + 2 * t_mean_step
    overhead = 2.0 + w / 20e9  # process-side model build and random init
    if spec.name != "cpu":
        overhead += p.output_len * arch.n_layers * 2e-4  # one CUDA graph capture per decode step
    if p.kind == "kernels":
        measured += KERNEL_PROFILE_STEPS * t_mean_step * 3  # eager steps under the profiler
        overhead += 3.0
    if p.kind == "counters":
        overhead += 30.0 + arch.n_layers * 0.5  # ncu start-up, and kernel replay for every profiled launch
    return safety * measured + overhead


def plan_campaign(
    budget_s: float,
    spec: DeviceSpec,
    points: list[Point] | None = None,
    *,
    dtype: str | None = None,
    safety: float = SAFETY,
    resolve=None,
    mem_fraction: float = 0.9,
) -> pd.DataFrame:
    """The plan: every point in priority order with est_s and status 'planned', 'over-budget' or
    'does-not-fit' (memory); planned estimates sum to at most `budget_s`. Deterministic for the same inputs."""
    if not budget_s > 0:
        raise DataError(f"budget must be > 0 seconds, got {plain(budget_s)}")
    if resolve is None:
        resolve = get_architecture
    dtype = dtype or default_dtype("cpu" if spec.name == "cpu" else "cuda")
    nbytes = DTYPE_BYTES[dtype]
    pts = list(points) if points is not None else default_points()
    order = sorted(range(len(pts)), key=lambda i: (pts[i].tier, i))
    rows, used = [], 0.0
    for rank, i in enumerate(order):
        p = pts[i]
        arch = resolve(p.model)
        est = estimate_cost_s(arch, p, spec, nbytes, safety)
        need = memory_need_bytes(arch, p, nbytes)
        if need > mem_fraction * spec.mem_bytes:
            status = "does-not-fit"
        elif used + est <= budget_s:
            status, used = "planned", used + est
        else:
            status = "over-budget"
        rows.append({"priority": rank, "point_id": p.point_id, **asdict(p), "est_s": round(est, 3),
                     "mem_need_gib": round(need / GIB, 3), "status": status,
                     "cum_est_s": round(used, 3) if status == "planned" else float("nan")})  # fmt: skip
    return pd.DataFrame(rows)


def _nvidia_smi(field: str) -> str:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return ""
    try:
        out = subprocess.run([exe, f"--query-gpu={field}", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""


def environment(device: str) -> dict:
    """GPU name, driver, CUDA and torch versions, host facts, for the manifest."""

    env = {
        "slimlib_version": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    try:
        import torch

        env["torch_version"] = str(torch.__version__)
        env["cuda_version"] = str(torch.version.cuda or "")
        if device == "cuda" and torch.cuda.is_available():
            env["gpu_name"] = torch.cuda.get_device_name()
            cc = torch.cuda.get_device_capability()
            env["compute_capability"] = f"{cc[0]}.{cc[1]}"
    except ImportError:
        env["torch_version"] = ""
    env["driver_version"] = _nvidia_smi("driver_version") if device == "cuda" else ""
    env.setdefault("gpu_name", "cpu" if device == "cpu" else "")
    return env


def run_campaign(
    plan: pd.DataFrame,
    out_dir: str | Path,
    *,
    device: str = "cuda",
    gpu: str = "",
    dtype: str | None = None,
    budget_s: float | None = None,
    cuda_graphs: bool = True,
    command: str = "",
    resolve=None,
    ncu: str | None = None,
    log=print,
) -> dict:
    """Measure the plan's 'planned' points in order; write runs.csv, steps.csv, kernels.csv, ncu_*.csv and
    manifest.json into `out_dir` (rewritten after every point, so a killed campaign leaves what it measured).
    Returns the manifest. Architectures come from `resolve` (default `slimlib.registry.architectures.get_architecture`).
    """

    require_torch()
    if resolve is None:
        resolve = get_architecture
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    dtype = dtype or default_dtype(device)
    env = environment(device)
    manifest = {
        "engine": ENGINE,
        "command": command,
        "date_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "device": device,
        "gpu": gpu or ("cpu" if device == "cpu" else ""),
        "dtype": dtype,
        "budget_s": budget_s,
        "cuda_graphs": cuda_graphs,
        **env,
        "files": {"runs": "runs.csv", "steps": "steps.csv", "kernels": "kernels.csv"},
        "points": [],
        "status": "running",
    }
    runs: list[dict] = []
    steps: list[dict] = []
    kernels: list[dict] = []
    ncu_exe = ncu if ncu is not None else (shutil.which("ncu") or "")
    t0 = time.monotonic()

    def save():
        if runs:
            write_csv(pd.DataFrame(runs), out / "runs.csv")
        if steps:
            write_csv(pd.DataFrame(steps), out / "steps.csv")
        if kernels:
            write_csv(pd.DataFrame(kernels), out / "kernels.csv")
        write_text(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")

    save()
    planned = plan[plan["status"] == "planned"]
    for _, row in planned.iterrows():
        p = point_from_row(row)
        rec = {"point_id": p.point_id, "kind": p.kind, "est_s": float(row["est_s"]), **asdict(p)}
        elapsed = time.monotonic() - t0
        if budget_s is not None and elapsed + rec["est_s"] > budget_s:
            rec.update(status="not-run", reason=f"budget: {elapsed:.0f} s used of {budget_s:.0f} s")
            manifest["points"].append(rec)
            continue
        log(f"[{elapsed:7.1f} s] {p.point_id} (est {rec['est_s']:.1f} s)")
        start = time.monotonic()
        try:
            if p.kind == "counters":
                rec.update(_run_counters(p, resolve(p.model), out, device, dtype, ncu_exe, env, ncu_command))
            else:
                nk = KERNEL_PROFILE_STEPS if p.kind == "kernels" else 0
                r = run_point(resolve(p.model), p.batch_size, p.input_len, p.output_len, device=device,
                              dtype=dtype, cuda_graphs=cuda_graphs, kernel_profile_steps=nk)  # fmt: skip
                runs.append(
                    {"point_id": p.point_id, "groups": p.groups, "gpu": manifest["gpu"], **r.to_row()}
                )
                steps.extend(
                    {"point_id": p.point_id, "step": i, "step_ms": s * 1e3} for i, s in enumerate(r.step_s)
                )
                if r.kernels is not None:
                    n = len(r.kernels.attrs.get("profiled_steps", []))
                    for k in r.kernels.itertuples(index=False):
                        kernels.append({"point_id": p.point_id, "name": k.name, "duration_us": k.duration_us,
                                        "count": k.count, "device_type": k.device_type,
                                        "category": classify_kernel(k.name), "profiled_steps": n})  # fmt: skip
                rec.update(status="done")
        except (SlimError, RuntimeError, subprocess.SubprocessError, OSError) as exc:
            rec.update(status="failed", reason=f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}")
            try:
                import torch

                if device == "cuda":
                    torch.cuda.empty_cache()
            except ImportError:
                pass
        rec["wall_s"] = round(time.monotonic() - start, 3)
        manifest["points"].append(rec)
        save()
    manifest["status"] = "complete"
    manifest["wall_s"] = round(time.monotonic() - t0, 3)
    save()
    return manifest


def _run_counters(p: Point, arch, out: Path, device, dtype, ncu_exe, env, ncu_command) -> dict:
    """Run Nsight Compute for one counters point; the CSV goes to ncu_<point_id>.csv."""
    fname = f"ncu_{p.point_id}.csv"
    argv = ncu_command(p.model, p.batch_size, p.input_len, p.output_len, target=p.target,
                       n_layers=arch.n_layers, log_file=out / fname, ncu=ncu_exe or "ncu", dtype=dtype,
                       compute_capability=env.get("compute_capability"))  # fmt: skip
    if device != "cuda" or not ncu_exe:
        return {"status": "skipped", "reason": "needs --device cuda and ncu on PATH", "ncu_argv": argv}
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=1800, check=False, env=dict(os.environ)
    )
    tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
    if proc.returncode != 0 or not (out / fname).is_file():
        return {
            "status": "failed",
            "reason": f"ncu exit {proc.returncode}: {' | '.join(tail)}",
            "ncu_argv": argv,
        }
    return {"status": "done", "file": fname, "ncu_argv": argv}


def plan_text(plan: pd.DataFrame, budget_s: float, spec: DeviceSpec) -> str:
    """Human-readable plan for --dry-run."""
    planned = plan[plan["status"] == "planned"]
    cols = ["priority", "point_id", "groups", "est_s", "mem_need_gib", "status"]
    head = (f"plan for {spec.name}: {len(planned)} of {len(plan)} points, estimated {planned['est_s'].sum():.0f} s "
            f"of a {budget_s:.0f} s budget")  # fmt: skip
    return head + "\n" + plan[cols].to_string(index=False)


def argv_string() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])
