"""Test doubles for Slurm campaigns: a fake `sbatch` that runs an array's tasks here, one after another, and a
stand-in `vllm` (serve: a tiny HTTP server answering /health; bench serve: writes a RECORDED PUBLIC benchmark result,
tests/fixtures/slurm/recorded/, adapted to the command line: a recorded burst's TTFT made the closed loop's). They
test orchestration only; nothing they write is a measurement. `install(tmp_path)` writes them into tmp_path/bin and returns that folder (put it first on PATH).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

RECORDED = Path(__file__).parent / "fixtures" / "slurm" / "recorded"

FAKE_SBATCH = r'''
"""Fake sbatch: runs every task of --array (command line, else the script's #SBATCH line) locally, in order."""
import os, re, subprocess, sys
from pathlib import Path

args = sys.argv[1:]
opts, i = {}, 0
while i < len(args) and args[i].startswith("--"):
    key, _, value = args[i][2:].partition("=")
    opts[key] = value
    i += 1
script = Path(args[i])
for line in script.read_text().splitlines():
    m = re.match(r"#SBATCH --([a-z-]+)=(\S+)", line)
    if m:
        opts.setdefault(m.group(1), m.group(2))
tasks = []
for part in opts["array"].split("%")[0].split(","):
    lo, _, hi = part.partition("-")
    tasks.extend(range(int(lo), int(hi or lo) + 1))
job = str(4000 + os.getpid() % 1000)
for t in tasks:
    out = Path(opts.get("output", "slurm-%A_%a.out").replace("%a", str(t)).replace("%A", job))
    if not out.parent.is_dir():  # like Slurm: no log folder, the task dies before it starts
        print(f"fake sbatch: task {t} lost: {out.parent} does not exist", file=sys.stderr)
        continue
    env = dict(os.environ, SLURM_ARRAY_TASK_ID=str(t), SLURM_ARRAY_JOB_ID=job, SLURM_JOB_ID=job,
               SLURM_SUBMIT_DIR=os.getcwd())
    with open(out, "a" if opts.get("open-mode") == "append" else "w") as fh:
        subprocess.run(["bash", str(script)], stdout=fh, stderr=subprocess.STDOUT, env=env, check=False)
print(f"Submitted batch job {job}")
'''

FAKE_VLLM = r'''
"""Stand-in for `vllm serve` / `vllm bench serve` (and the legacy benchmark_serving.py): orchestration test double.

The client writes a recorded public result (never a measurement) for the configuration it is asked for, adapted as
the real client would write it: --max-concurrency and --metadata keys, and, when --percentile-metrics has e2el,
mean_e2el_ms = mean_ttft_ms + (OL - 1) mean_tpot_ms (exact for fixed-length outputs; the recorded 2025 files
predate vLLM's e2el metric).
"""
import argparse, http.server, json, os, signal, sys, urllib.request
from pathlib import Path

RECORDED = Path(os.environ["FAKE_RECORDED"])


def log(rec):
    if os.environ.get("FAKE_VLLM_LOG"):
        with open(os.environ["FAKE_VLLM_LOG"], "a") as fh:
            fh.write(json.dumps(rec) + "\n")


def serve(argv):
    p = argparse.ArgumentParser(prog="vllm serve")
    p.add_argument("model")
    p.add_argument("--max-num-seqs", type=int, required=True)
    p.add_argument("--max-model-len", type=int, required=True)
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)  # as vLLM >= 0.9
    p.add_argument("--max-num-batched-tokens", type=int, default=None)
    p.add_argument("--port", type=int, required=True)
    a = p.parse_args(argv)
    log({"cmd": "serve", "batch": a.max_num_seqs, "port": a.port, "tp": a.tensor_parallel_size,
         "prefix_caching": a.enable_prefix_caching, "budget": a.max_num_batched_tokens})
    if str(a.max_num_seqs) in os.environ.get("FAKE_SERVER_FAIL_B", "").split(","):
        sys.exit("fake vllm serve: CUDA out of memory (injected failure)")

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", a.port), Health)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    srv.serve_forever()


def bench(argv):
    p = argparse.ArgumentParser(prog="vllm bench serve")
    for flag in ("--model", "--dataset-name", "--request-rate", "--percentile-metrics", "--metric-percentiles",
                 "--result-dir", "--result-filename", "--backend"):
        p.add_argument(flag)
    for flag in ("--port", "--random-input-len", "--random-output-len", "--max-concurrency", "--num-prompts"):
        p.add_argument(flag, type=int)
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--metadata", nargs="*", default=[])
    a = p.parse_args(argv)
    log({"cmd": "bench", "file": a.result_filename, "port": a.port, "argv": argv})
    urllib.request.urlopen(f"http://127.0.0.1:{a.port}/health", timeout=5)  # the server must be up
    if a.result_filename in os.environ.get("FAKE_CLIENT_FAIL", "").split(","):
        sys.exit("fake client: connection reset by peer (injected failure)")
    src = RECORDED / f"b{a.max_concurrency}_ol{a.random_output_len}.json"
    res = json.loads(src.read_text())
    done = res["completed"]
    if (res["total_input_tokens"] / done, res["total_output_tokens"] / done, res["num_prompts"]) != (
        a.random_input_len, a.random_output_len, a.num_prompts):
        sys.exit(f"fake client: no recorded result for this configuration ({src.name})")
    res["model_id"] = a.model
    res["max_concurrency"] = a.max_concurrency
    # the recorded runs were bursts, whose TTFT waited for the queue: as the closed loop of B clients, a request's
    # E2E is B requests' tokens over the throughput (Little's law), its TTFT that less its recorded decode
    tokens = (a.random_input_len + a.random_output_len) * a.max_concurrency
    ttft = 1e3 * tokens / res["total_token_throughput"] - (a.random_output_len - 1) * res["mean_tpot_ms"]
    if ttft <= 0:
        sys.exit(f"fake client: {src.name} has no closed-loop timing")
    scale = ttft / res["mean_ttft_ms"]
    for k in ("mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms"):
        res[k] *= scale
    for kv in a.metadata:
        k, _, v = kv.partition("=")
        res[k] = v
    if a.percentile_metrics and "e2el" in a.percentile_metrics.split(","):
        res["mean_e2el_ms"] = res["mean_ttft_ms"] + (a.random_output_len - 1) * res["mean_tpot_ms"]
    assert a.save_result, "the plan must save the result"
    out = Path(a.result_dir) / a.result_filename
    out.write_text(json.dumps(res))


if sys.argv[1:2] == ["serve"]:
    serve(sys.argv[2:])
elif sys.argv[1:3] == ["bench", "serve"]:
    bench(sys.argv[3:])
else:  # legacy: python benchmarks/benchmark_serving.py --backend vllm ...
    bench(sys.argv[1:])
'''


def install(tmp_path: Path) -> Path:
    """Write `sbatch`, `vllm` and the legacy client into tmp_path/bin; return the bin folder."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in (("sbatch", FAKE_SBATCH), ("vllm", FAKE_VLLM)):
        path = bin_dir / name
        path.write_text(f"#!{sys.executable}\n{body.lstrip()}")
        path.chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    return bin_dir


def env_with(bin_dir: Path, **extra: str) -> dict:
    """os.environ with the doubles first on PATH, fast polling, and `extra`."""
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", SLIM_POLL_S="0.1")
    env["FAKE_RECORDED"] = str(RECORDED)
    env.update(extra)
    return env
