"""A stand-in for vLLM in the runner's tests: ``serve`` answers /health on its port, ``bench serve`` and
``bench-serve-many`` write a result JSON in vLLM's format with made-up timings (orchestration only: nothing it
writes is a measurement). Behaviour is steered by environment variables:

* ``FAKE_VLLM_LOG``: append one line per server start and per client run to this file;
* ``FAKE_VLLM_CRASH=1``: the server prints an error line and exits 3 before it is ready;
* ``FAKE_VLLM_MODEL_ID``: write this model_id into results instead of ``--model``.

``bench-serve-many -`` reads one JSON argument list per line from stdin, as the launcher does; a client run with
``--num-warmups N`` logs ``warmup N`` before its ``bench`` line.
"""

from __future__ import annotations

import json
import os
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

SCRIPT = Path(__file__)


def _log(text: str) -> None:
    if os.environ.get("FAKE_VLLM_LOG"):
        with open(os.environ["FAKE_VLLM_LOG"], "a", encoding="utf-8") as fh:
            fh.write(text + "\n")


def _opt(argv: list[str], name: str, default=None):
    return argv[argv.index(name) + 1] if name in argv else default


def serve(argv: list[str]) -> int:
    port = int(_opt(argv, "--port", 8000))
    _log(f"serve {argv[0]} port={port}")
    if os.environ.get("FAKE_VLLM_CRASH"):
        print("INFO starting", flush=True)
        print("ERROR fake engine: out of memory while loading the model", flush=True)
        return 3

    class Health(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    print(f"serving on {port}", flush=True)
    HTTPServer(("127.0.0.1", port), Health).serve_forever()
    return 0


def bench(argv: list[str]) -> None:
    b = int(_opt(argv, "--max-concurrency"))
    il, ol = int(_opt(argv, "--random-input-len")), int(_opt(argv, "--random-output-len"))
    n = int(_opt(argv, "--num-prompts"))
    meta = argv[argv.index("--metadata") + 1 :]
    meta = meta[: next((i for i, a in enumerate(meta) if a.startswith("--")), len(meta))]
    dur = 0.5 + 0.01 * n * (il + ol) / b  # made up
    e2el = 1000.0 * dur * b / n
    tpot = (e2el - 10.0) / max(ol - 1, 1)  # TTFT + (OL - 1) TPOT = E2E, as vLLM's definitions give
    res = {
        "date": "20260101-000000", "backend": "openai", "model_id": os.environ.get("FAKE_VLLM_MODEL_ID",
        _opt(argv, "--model")), "num_prompts": n, "request_rate": "inf", "max_concurrency": b, "duration": dur,
        "completed": n, "failed": 0, "total_input_tokens": n * il, "total_output_tokens": n * ol,
        "request_throughput": n / dur, "output_throughput": n * ol / dur, "total_token_throughput": n * (il + ol) / dur,
        "mean_ttft_ms": 10.0, "mean_tpot_ms": tpot, "mean_itl_ms": tpot, "mean_e2el_ms": e2el,
        **dict(kv.split("=", 1) for kv in meta),
    }  # fmt: skip
    if "--save-detailed" in argv:  # waves of b sent 1 ms apart, each first token 10 ms after its send
        res["start_times"] = [(i // b) * e2el / 1000.0 + (i % b) * 0.001 for i in range(n)]
        res["ttfts"] = [0.01] * n
    if "--num-warmups" in argv:
        _log(f"warmup {_opt(argv, '--num-warmups')}")
    out = Path(_opt(argv, "--result-dir")) / _opt(argv, "--result-filename")
    out.write_text(json.dumps(res), encoding="utf-8")
    _log(f"bench {out.name}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["serve"]:
        return serve(argv[1:])
    if argv[:2] == ["bench", "serve"]:
        bench(argv[2:])
        return 0
    if argv[:1] == ["bench-serve-many"]:
        if argv[1] == "-":
            print("SLIM-READY", flush=True)
            runs = (json.loads(line) for line in sys.stdin if line.strip())
        else:
            runs = iter(json.loads(Path(argv[1]).read_text(encoding="utf-8")))
        for i, args in enumerate(runs):
            print(f"SLIM-RUN-START {i}", flush=True)
            bench(args)
            print(f"SLIM-RUN-DONE {i} 0.1", flush=True)
        return 0
    print(f"fake vllm: unknown command {argv}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
