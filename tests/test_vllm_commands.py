"""Every `vllm serve` line the package prints parses with the installed vLLM's own parser (the CPU build of the
engine environment, `scripts/engine_env.sh`): `slim advise` (Eq. 13 and the deployment search) over every registry
model and a sample of published configs, and `slim plan`'s scripts; the lines follow the checkpoint and vLLM's
defaults."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from shared_paths import RAW
from synthetic import SLIM_TRUE_PARAMS

from slimlib.cli.main import main
from slimlib.model import SlimModel
from slimlib.registry.architectures import architecture_names
from slimlib.registry.gpus import get_gpu, gpu_names
from slimlib.registry.host_cpu import CPU_DEVICES
from slimlib.registry.vllm_flags import server_batched_tokens, server_max_num_seqs

ROOT = Path(__file__).resolve().parents[1]
ENGINE_PYTHON = Path(os.environ.get("SLIM_ENGINE_PYTHON", ROOT / ".venv-engine" / "bin" / "python"))
CONFIGS = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "model_configs"
#: the GPUs the registry walk rotates through (one per model keeps the walk short)
GPUS = ("h100-sxm-80gb", "a100-sxm-80gb", "b200-sxm-180gb", "mi300x", "h200-sxm-141gb", "l40s")
#: published configs of every checkpoint precision and layer kind the reader serves
CORPUS = {
    "openai--gpt-oss-120b": "b200-sxm-180gb",  # MXFP4 checkpoint
    "Qwen--Qwen3-32B-FP8": "a100-sxm-80gb",  # FP8 checkpoint on a GPU without fp8 tensor cores
    "nvidia--DeepSeek-V3.1-NVFP4": "b200-sxm-180gb",  # ModelOpt NVFP4
    "Qwen--Qwen3.5-27B": "h200-sxm-141gb",  # Gated DeltaNet hybrid
    "deepseek-ai--DeepSeek-V3.2": "h200-sxm-141gb",  # sparse latent attention
    "mistralai--Mixtral-8x7B-v0.1": "h100-sxm-80gb",
    "google--gemma-4-26B-A4B": "h100-sxm-80gb",
    "nvidia--Nemotron-H-56B-Base-8K": "h100-sxm-80gb",  # Mamba-2 hybrid
    "moonshotai--Kimi-K2.5": "h200-sxm-141gb",  # compressed-tensors W4A16 experts
}


def _params(tmp_path: Path, gpu: str) -> str:
    path = tmp_path / f"{gpu}.json"
    if not path.exists():
        SlimModel.with_params(SLIM_TRUE_PARAMS, gpu=gpu).to_json(path)
    return str(path)


def _advise(capsys, args: list[str]) -> list[str]:
    """The `vllm serve` lines one `slim advise` prints (the launch line and the alternative flags of Eq. 13)."""
    main(["advise", *args])
    out = capsys.readouterr().out.splitlines()
    lines = [x.split(": ", 1)[1] for x in out if x.startswith(("vLLM: ", "vLLM (each replica): "))]
    serve = lines[0].split(" --", 1)[0] if lines else ""
    lines += [f"{serve} {x.split('or: ', 1)[1]}" for x in out if x.startswith("  or: ")]
    return lines


def _parse(lines: list[str], tmp_path: Path) -> list[str]:
    src = tmp_path / "lines.json"
    src.write_text(json.dumps(lines))
    run = subprocess.run([str(ENGINE_PYTHON), str(ROOT / "tests" / "vllm_parse.py"), str(src)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not ENGINE_PYTHON.exists(), reason=f"vLLM's CPU build not installed ({ENGINE_PYTHON}: "
                    "scripts/engine_env.sh creates it; CI has it)")  # fmt: skip
def test_every_printed_vllm_serve_line_parses_with_vllms_own_parser(tmp_path, capsys):
    lines: dict[str, str] = {}  # line -> where it came from
    for i, name in enumerate(architecture_names()):
        gpu = GPUS[i % len(GPUS)]
        where = f"slim advise --model {name} on {gpu}"
        for line in _advise(capsys, [_params(tmp_path, gpu), "--model", name, "--input-len", "512",
                                     "--output-len", "128", "--gpus", "8", "--max-batch", "32"]):  # fmt: skip
            lines[line] = f"{where} --gpus 8"
        if i % 4 == 0:
            for line in _advise(capsys, [_params(tmp_path, gpu), "--model", name, "--input-len", "250",
                                         "--output-len", "260", "--max-batch", "32"]):  # fmt: skip
                lines[line] = f"{where} (Eq. 13)"
    assert len(lines) >= len(architecture_names()), "most registry models give a deployment"
    cpu = _advise(capsys, [_params(tmp_path, "cpu"), "--model", "opt-125m", "--input-len", "128", "--output-len",
                           "64", "--max-batch", "16", "--cpu-threads", "2"])  # fmt: skip
    assert cpu and cpu[0].startswith("VLLM_CPU_KVCACHE_SPACE=") and "--gpu-memory-utilization" not in cpu[0]
    lines.update({x: "slim advise on the CPU engine" for x in cpu})
    if CONFIGS.is_dir():
        for stem, gpu in CORPUS.items():
            config = CONFIGS / f"{stem}_config.json"
            for line in _advise(capsys, [_params(tmp_path, gpu), "--model", str(config), "--input-len", "1024",
                                         "--output-len", "256", "--gpus", "8", "--max-batch", "32"]):  # fmt: skip
                lines[line] = f"slim advise --model {config.name} on {gpu}"
        folder = tmp_path / "gpt-oss-120b"  # a checkpoint folder is served as itself
        folder.mkdir()
        shutil.copy(CONFIGS / "openai--gpt-oss-120b_config.json", folder / "config.json")
        served = _advise(capsys, [_params(tmp_path, "b200-sxm-180gb"), "--model", str(folder / "config.json"),
                                  "--input-len", "1024", "--output-len", "256", "--gpus", "8", "--max-batch", "32"])  # fmt: skip
        assert (
            served and served[0].startswith(f"vllm serve {folder} ") and "--quantization mxfp4" in served[0]
        )
        lines.update({x: "slim advise on a checkpoint folder" for x in served})
    for gpu, extra in (("h100-sxm-80gb", ["--quantization", "fp8"]), ("cpu", [])):
        out = tmp_path / f"plan-{gpu}"
        assert main(["plan", "--model", "llama-2-7b" if gpu != "cpu" else "opt-125m", "--gpu", gpu,
                     "--input-len", "512", "--output-len", "128", "--out", str(out), *extra]) == 0  # fmt: skip
        capsys.readouterr()
        for x in (out / "run_plan.sh").read_text().splitlines():
            if "vllm serve " in x:
                lines[x.strip().removesuffix("&").strip()] = f"slim plan --gpu {gpu}"
    errors = _parse(list(lines), tmp_path)
    bad = [
        f"{where}: {line}\n    {err}" for (line, where), err in zip(lines.items(), errors, strict=True) if err
    ]
    assert not bad, "vLLM refuses these lines:\n" + "\n".join(bad)


@pytest.mark.skipif(not ENGINE_PYTHON.exists(), reason=f"vLLM's CPU build not installed ({ENGINE_PYTHON})")
def test_the_default_budget_and_cap_are_vllms_own(tmp_path):
    """`server_batched_tokens` and `server_max_num_seqs` give what vLLM's own ``EngineArgs.get_batch_defaults``
    gives for every registry device (its platform made to report the device's memory and name)."""
    devices, ours = [], []
    for name in gpu_names():
        hw = get_gpu(name)
        cpu = name in CPU_DEVICES
        for world in (1, 2):
            total = 0 if cpu else int((hw.mem_bytes_reported or hw.mem_bytes) / hw.dies)
            devices.append([name, total, world, cpu])
            ours.append([server_batched_tokens(name, world), server_max_num_seqs(name, world)])
    src = tmp_path / "devices.json"
    src.write_text(json.dumps(devices))
    run = subprocess.run([str(ENGINE_PYTHON), str(ROOT / "tests" / "vllm_parse.py"), "--batch-defaults", str(src)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    theirs = json.loads(run.stdout.strip().splitlines()[-1])
    assert [(d[0], d[2], o) for d, o in zip(devices, ours, strict=True)] == [
        (d[0], d[2], t) for d, t in zip(devices, theirs, strict=True)
    ]


def test_the_default_budget_by_gpu():
    assert [server_batched_tokens(g) for g in ("a100-sxm-80gb", "h100-sxm-64gb", "h100-sxm-80gb", "h200-sxm-141gb",
                                               "b200-sxm-180gb", "mi300x", "mi250")] == [2048, 2048, 8192, 8192, 16384, 16384, 2048]  # fmt: skip
    assert (server_batched_tokens("cpu", 2), server_max_num_seqs("cpu", 2), server_max_num_seqs("h100-sxm-80gb")) == (
        4096, 256, 1024)  # fmt: skip


def test_the_launch_line_follows_the_checkpoint_and_vllms_defaults(tmp_path, capsys):
    line = _advise(capsys, [_params(tmp_path, "h100-sxm-80gb"), "--model", "llama-2-7b", "--input-len", "250",
                            "--output-len", "260", "--max-batch", "64"])[0]  # fmt: skip
    assert f"--max-num-batched-tokens {server_batched_tokens('h100-sxm-80gb')}" in line
    line = _advise(capsys, [_params(tmp_path, "h100-sxm-80gb"), "--model", "llama-2-7b", "--input-len", "250",
                            "--output-len", "260", "--max-batch", "64", "--max-num-batched-tokens", "1024"])[0]  # fmt: skip
    assert "--max-num-batched-tokens 1024" in line
    # a budget below the candidates: vLLM refuses --max-num-seqs above it, so those caps are left out, said once
    assert main(["advise", _params(tmp_path, "h100-sxm-80gb"), "--model", "llama-2-7b", "--input-len", "250",
                 "--output-len", "260", "--tpot-ms", "50", "--gpus", "2", "--max-num-batched-tokens", "100"]) == 0  # fmt: skip
    got = capsys.readouterr()
    assert got.err.count("batch caps above 100, the token budget per step, are not candidates") == 1
    assert "--max-num-seqs" in got.out and int(got.out.split("--max-num-seqs ")[1].split()[0]) <= 100
    if not CONFIGS.is_dir():
        pytest.skip(f"the published configs are not here ({CONFIGS})")
    config = CONFIGS / "openai--gpt-oss-120b_config.json"
    main(["advise", _params(tmp_path, "b200-sxm-180gb"), "--model", str(config), "--input-len", "1024",
          "--output-len", "256", "--gpus", "8", "--max-batch", "32"])  # fmt: skip
    out = capsys.readouterr().out
    ranked = [x for x in out.splitlines() if x[:4].strip().isdigit()]
    assert ranked and all(" mxfp4 x" in x for x in ranked), (
        out
    )  # the checkpoint's own method, never bf16 or nvfp4
    assert "vllm serve CHECKPOINT " in out and "--quantization mxfp4" in out and "modelopt_fp4" not in out
    assert "(CHECKPOINT: the checkpoint whose config is openai--gpt-oss-120b_config.json" in out
