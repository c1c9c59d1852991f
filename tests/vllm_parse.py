"""Parse `vllm serve` command lines with the installed vLLM's own parser (run by the engine environment's Python).

    python tests/vllm_parse.py LINES.json    # a JSON list of shell lines; prints a JSON list of error strings
    python tests/vllm_parse.py --batch-defaults DEVICES.json    # vLLM's own default budget and cap per device

A line passes when its leading ``NAME=VALUE`` words name environment variables vLLM reads, the rest is
``vllm serve MODEL FLAGS`` that ``vllm serve``'s parser accepts, its ``--quantization`` is one of vLLM's methods,
vLLM's engine arguments and its scheduler's configuration can be built from it ('' in the output); else the output
holds the reason.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import sys

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

import vllm.envs  # noqa: E402
from vllm.config import SchedulerConfig  # noqa: E402
from vllm.engine.arg_utils import EngineArgs  # noqa: E402
from vllm.entrypoints.launchers.cli_args import make_arg_parser  # noqa: E402
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

ENV_WORD = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)$")


def check(line: str, parser: FlexibleArgumentParser) -> str:
    words = shlex.split(line)
    while words and ENV_WORD.match(words[0]):
        name = ENV_WORD.match(words[0]).group(1)  # type: ignore[union-attr]
        if name not in vllm.envs.environment_variables:
            return f"{name} is not an environment variable vLLM reads"
        words = words[1:]
    if words[:2] != ["vllm", "serve"] or len(words) < 3:
        return "not `vllm serve MODEL ...`"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(words[2:])
    except SystemExit:
        lines = [x for x in err.getvalue().splitlines() if "error:" in x]
        return lines[-1] if lines else err.getvalue().strip()[-300:]
    if args.model_tag != words[2]:
        return f"the model parsed as {args.model_tag!r}, not {words[2]!r}"
    if args.quantization is not None and args.quantization not in QUANTIZATION_METHODS:
        return f"--quantization {args.quantization!r} is not one of vLLM's methods"
    args.model = args.model_tag
    try:
        EngineArgs.from_cli_args(args)
        if (
            args.max_num_batched_tokens is not None
        ):  # the scheduler's own checks (the budget against the caps)
            SchedulerConfig(
                max_model_len=args.max_model_len or 8192, is_encoder_decoder=False, enable_chunked_prefill=True,
                max_num_batched_tokens=args.max_num_batched_tokens, max_num_seqs=args.max_num_seqs or 1,
            )  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - the reason is the output
        lines = str(exc).splitlines() or [""]
        return f"{type(exc).__name__}: {next((x for x in lines if 'error' in x.lower()), lines[0]).strip()[:300]}"
    return ""


def batch_defaults(devices: list) -> list:
    """vLLM's own ``EngineArgs.get_batch_defaults`` for each (name, total memory in bytes, world size, is a CPU) of
    `devices`, on a platform made to report them: [API-server token budget, API-server max_num_seqs]."""
    from vllm.platforms import current_platform
    from vllm.usage.usage_lib import UsageContext

    out = []
    for name, total, world, cpu in devices:
        current_platform.get_device_total_memory = lambda *a, t=total, **k: t
        current_platform.get_device_name = lambda *a, n=name, **k: n
        current_platform.is_cpu = lambda *a, c=cpu, **k: c
        current_platform.is_tpu = lambda *a, **k: False
        tokens, seqs = EngineArgs.get_batch_defaults(world)
        out.append([tokens[UsageContext.OPENAI_API_SERVER], seqs[UsageContext.OPENAI_API_SERVER]])
    return out


def main() -> int:
    if sys.argv[1] == "--batch-defaults":
        print(json.dumps(batch_defaults(json.load(open(sys.argv[2], encoding="utf-8")))))
        return 0
    lines = json.load(open(sys.argv[1], encoding="utf-8"))
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    print(json.dumps([check(line, parser) for line in lines]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
