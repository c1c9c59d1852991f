"""No input destroys data or passes as physical when it is not. Each case is a bad input given to
the `slim` command as a user would; each must end with exit status 2 and ONE line on standard error matching the
expected message, and must leave every file it was given as it was (contents and modification time) with no file
created."""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

from slimlib.cli.main import main
from slimlib.model import PaperModel

FIXTURES = Path(__file__).parent / "fixtures"
GPU = "h100-sxm-80gb"


def _params(tmp: Path, **override: object) -> Path:
    doc = json.loads(PaperModel.with_params(TRUE_PARAMS, gpu=GPU).to_json())
    for k, v in override.items():
        if k in doc["params"]:
            doc["params"][k] = v
        else:
            doc[k] = v
    path = tmp / "params.json"
    path.write_text(json.dumps(doc))
    return path


def _measured(tmp: Path, name: str = "runs.csv", **columns: object) -> Path:
    df = synthesize(PaperModel.with_params(TRUE_PARAMS, gpu=GPU), grid(batch=(1, 4, 16)))
    for k, v in columns.items():
        df[k] = v
    path = tmp / name
    df.to_csv(path, index=False)
    return path


def _one_row_throughput(tmp: Path, value: float) -> Path:
    """A measured table whose first row claims `value` tokens per second."""
    path = _measured(tmp)
    df = pd.read_csv(path)
    df.loc[0, "throughput_tok_s"] = value
    df.to_csv(path, index=False)
    return path


def _repeated_column(tmp: Path) -> Path:
    """A measured table whose header names batch_size twice."""
    path = _measured(tmp)
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0] + ",batch_size"] + [ln + ",5" for ln in lines[1:]]) + "\n")
    return path


def _rows(tmp: Path, text: str, name: str = "rows.csv") -> Path:
    path = tmp / name
    path.write_text(text)
    return path


CONFIG_ROWS = "model,batch_size,input_len,output_len{extra_head}\n{model},{b},{il},{ol}{extra}\n"


def _config(
    tmp: Path, model: str = "opt-125m", b: object = 8, il: object = 128, ol: object = 64, tp=None
) -> Path:
    extra_head, extra = (",tensor_parallel", f",{tp}") if tp is not None else ("", "")
    return _rows(tmp, CONFIG_ROWS.format(model=model, b=b, il=il, ol=ol, extra_head=extra_head, extra=extra))


def _zero_config(tmp: Path, key: str) -> Path:
    cfg = json.loads((FIXTURES / "configs" / "opt-125m.json").read_text())
    cfg[key] = 0
    path = tmp / "config.json"
    path.write_text(json.dumps(cfg))
    return path


#: the smallest configs of a mixture of experts (Mixtral's keys) and of latent attention with experts (DeepSeek-V3's)
MOE_CONFIG = {"model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "num_local_experts": 8,
              "num_experts_per_tok": 2, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}  # fmt: skip
MLA_CONFIG = {"model_type": "deepseek_v3", "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4,
              "vocab_size": 1000, "intermediate_size": 128, "moe_intermediate_size": 32, "n_routed_experts": 8,
              "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 32,
              "q_lora_rank": 48, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
              "max_position_embeddings": 4096, "topk_method": "noaux_tc", "torch_dtype": "bfloat16"}  # fmt: skip


def _impossible(tmp: Path, base: dict[str, object], **override: object) -> Path:
    """A config.json of `base` with `override`: a model that cannot exist."""
    path = tmp / "config.json"
    path.write_text(json.dumps({**base, **override}))
    return path


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]
    message: str  # regular expression the one error line must match


def _s(*parts: object) -> list[str]:
    return [str(p) for p in parts]


def _fifo(tmp: Path) -> Path:
    path = tmp / "fifo.csv"
    os.mkfifo(path)
    return path


def _socket(tmp: Path) -> Path:
    path = tmp / "sock.csv"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return path


def _device_link(tmp: Path) -> Path:
    path = tmp / "null.csv"  # a link to a device: replacing the link would be safe, but it is refused anyway
    path.symlink_to("/dev/null")
    return path


def _env_file(tmp: Path) -> Path:
    path = tmp / "site.env"
    path.write_text("SLIM_PARTITION=gpu\n")
    return path


def _runs_folder(tmp: Path) -> Path:
    runs = tmp / "runs"
    shutil.copytree(FIXTURES / "ingest" / "runs", runs)
    return runs


def _two_files(tmp: Path) -> list[Path]:
    a = _measured(tmp, "a.csv")
    b = _measured(tmp, "b.csv")
    text = b.read_text().splitlines()
    head, first = text[0].split(","), text[1].split(",")
    first[head.index("throughput_tok_s")] = "12345"
    b.write_text("\n".join([text[0], ",".join(first)]) + "\n")
    return [a, b]


def _sidecar_with_blank_line(tmp: Path) -> Path:
    runs = _runs_folder(tmp)
    side = runs / "slim-runs.csv"
    lines = side.read_text().splitlines()
    side.write_text("\n".join([lines[0], "", lines[1], ",8,100,200,,"]) + "\n")  # empty 'file' on line 4
    return runs


def _alias_rows(tmp: Path, col: str, alias: str) -> Path:
    df = synthesize(
        PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-64gb"), grid(gpu="h100-sxm-64gb", batch=(1, 4))
    )
    dup = df.iloc[[0]].copy()
    dup[col] = alias
    dup["throughput_tok_s"] *= 1.5
    path = tmp / "alias.csv"
    pd.concat([df, dup]).to_csv(path, index=False)
    return path


def _blank_line_rows(tmp: Path) -> Path:
    path = _measured(tmp)
    lines = path.read_text().splitlines()
    bad = lines[4].split(",")
    bad[2] = "-4"  # batch_size of the 4th data row, physical line 6 after the blank line
    lines[4] = ",".join(bad)
    path.write_text("\n".join(lines[:3] + [""] + lines[3:]) + "\n")
    return path


# -- helpers ------------------------------------------------------------------------------------------------


def _model_folder(tmp: Path) -> Path:
    """A Hugging Face model folder m/ holding config.json (OPT-125M's), as a user passes it to --model."""
    folder = tmp / "m"
    folder.mkdir(exist_ok=True)
    shutil.copy(FIXTURES / "configs" / "opt-125m.json", folder / "config.json")
    return folder


def _grid_naming_config(tmp: Path) -> Path:
    _model_folder(tmp)
    return _rows(
        tmp, f"model,batch_size,input_len,output_len\n{tmp / 'm' / 'config.json'},8,128,64\n", "grid.csv"
    )


def _runs_naming_config(tmp: Path) -> Path:
    config = _model_folder(tmp) / "config.json"
    df = synthesize(
        PaperModel.with_params(TRUE_PARAMS, gpu=GPU), grid(models=("opt-125m",), batch=(1, 2, 4, 8, 16))
    )
    df["model"] = str(config)
    path = tmp / "runs.csv"
    df.to_csv(path, index=False)
    return path


def _advise(t: Path, *extra: object) -> list[str]:
    return _s("advise", _params(t), "--model", "opt-125m", "--input-len", 100, "--output-len", 100, *extra)


def _slurm_plan(t: Path, *extra: object) -> list[str]:
    return _s(
        "plan", "--model", "llama-2-7b", "--gpu", GPU, "--scheduler", "slurm", "--out", t / "plan", *extra
    )


def _existing_plan(t: Path) -> Path:
    """A complete earlier plan in t/plan (local scheduler, other lengths), so a refused new one must leave it."""
    assert main(_s("plan", "--model", "opt-1.3b", "--gpu", GPU, "--input-len", 128, "--out", t / "plan")) == 0
    return t / "plan"


def _read_only_folder(t: Path) -> Path:
    """A folder this user cannot write into: a chmod 555 folder, or for root (who writes anywhere) sysfs."""
    if os.geteuid() == 0:
        return Path("/sys/fs")
    folder = t / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    return folder


def _result_9_of_12(t: Path) -> Path:
    """A vLLM result with 9 of 12 requested prompts completed and no 'failed' field (counts consistent)."""
    doc = json.loads((FIXTURES / "ingest" / "runs" / "bench-serve-c16.json").read_text())
    del doc["failed"]
    doc.update(num_prompts=12, completed=9, total_input_tokens=9 * 512, total_output_tokens=9 * 128)
    doc.update(request_throughput=9 / doc["duration"], output_throughput=9 * 128 / doc["duration"],
               total_token_throughput=9 * 640 / doc["duration"])  # fmt: skip
    runs = t / "runs"
    runs.mkdir()
    (runs / "partial.json").write_text(json.dumps(doc))
    return runs


def _mamba_folder(tmp: Path) -> Path:
    """A model folder whose config.json is a Mamba (state-space) model with the standard dense keys too."""
    folder = tmp / "mamba"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({
        "model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24, "num_attention_heads": 12,
        "intermediate_size": 3072, "vocab_size": 50280, "state_size": 16,
    }))  # fmt: skip
    return folder


def _slurm_plan_folder(t: Path) -> Path:
    assert main(_slurm_plan(t)) == 0
    return t / "plan"


def _link_loop(t: Path) -> Path:
    """loop/a -> b -> a: a path that resolves to nothing."""
    (t / "loop").mkdir()
    (t / "loop" / "a").symlink_to("b")
    (t / "loop" / "b").symlink_to("a")
    return t / "loop" / "a"


def _user_folder(t: Path) -> Path:
    folder = t / "notes"
    folder.mkdir()
    (folder / "README.txt").write_text("my notes\n")
    return folder


def _garbled_campaign(t: Path) -> Path:
    folder = t / "camp"
    folder.mkdir()
    (folder / "manifest.json").write_text("{bad")
    return folder


def _params_named(t: Path, name: str) -> Path:
    path = t / name
    shutil.copy(_params(t), path)
    return path


CASES = [
    # -- outputs: nothing but a regular file is replaced, and never an input ------------------------------------
    Case(
        "advise --frontier whose figure would replace the parameter file",
        lambda t: _s(
            "advise",
            _params_named(t, "front.png"),
            "--model",
            "opt-125m",
            "--input-len",
            100,
            "--output-len",
            100,
            "--gpus",
            1,
            "--frontier",
            t / "front.csv",
        ),  # fmt: skip
        r"--frontier .*front.csv: its figure .*front.png: is also an input",
    ),
    Case(
        "advise --frontier to standard output",
        lambda t: _advise(t, "--gpus", 1, "--frontier", "-"),
        r"--frontier -: the frontier needs a file name",
    ),
    Case(
        "advise --frontier named as its own figure",
        lambda t: _advise(t, "--gpus", 1, "--frontier", t / "fx.pdf"),
        r"--frontier .*fx.pdf: the figure is written beside the CSV as fx.pdf and fx.png",
    ),
    Case(
        "advise --frontier whose figure name is a folder",
        lambda t: _advise(t, "--gpus", 1, "--frontier", (t / "front.png").mkdir() or t / "front.csv"),
        r"its figure .*front.png: is a directory",
    ),
    Case(
        "ingest --out the config.json --model names",
        lambda t: _s(
            "data",
            "ingest",
            _runs_folder(t),
            "--model",
            _model_folder(t) / "config.json",
            "--gpu",
            GPU,
            "--out",
            t / "m" / "config.json",
        ),  # fmt: skip
        r"--out .*m/config.json: is also an input",
    ),
    Case(
        "nbstrip a parameter file",
        lambda t: _s("nbstrip", _params(t)),
        r"params.json: not a Jupyter notebook \(nbformat 4 with a list of cells\); left as it is",
    ),
    Case(
        "ingest --allow-incomplete a Slurm plan never run",
        lambda t: _s(
            "data",
            "ingest",
            _slurm_plan_folder(t),
            "--allow-incomplete",
            "--out",
            _rows(t, "prev\n", "prev.csv"),
        ),
        r"no run to write: 6 task\(s\) missing, 0 failed, 0 result\(s\) excluded by the physical checks .*prev.csv left as "
        r"it was",
    ),
    Case(
        "models a link loop",
        lambda t: _s("models", _link_loop(t)),
        r"model .*loop/a: no config.json there \(a link that leads to itself or nowhere\)",
    ),
    # -- folders a command did not create are never taken over -----------------------------------------------------
    Case(
        "plan --out a folder of the user's files",
        lambda t: _s(
            "plan", "--model", "llama-2-7b", "--gpu", GPU, "--output-len", 130, 520, "--out", _user_folder(t)
        ),
        r"--out .*notes: holds files that `slim plan` did not write \(README.txt\); give a new or empty folder",
    ),
    Case(
        "bench campaign --out a plan folder",
        lambda t: _s("bench", "campaign", "--out", _existing_plan(t), "--engine-python", sys.executable),
        r"--out .*plan: holds files that `slim bench` did not write \(.slim-owner, README.txt, plan.csv",
    ),
    Case(
        "bench campaign --out a regular file",
        lambda t: _s(
            "bench", "campaign", "--out", _rows(t, "x\n", "afile"), "--engine-python", sys.executable
        ),
        r"--out .*afile: is a file; give a folder for the outputs",
    ),
    Case(
        "bench campaign with a garbled manifest",
        lambda t: _s("bench", "campaign", "--out", _garbled_campaign(t), "--engine-python", sys.executable),
        r"camp/manifest.json: not a readable campaign manifest",
    ),
    Case(
        "bench run --out a regular file",
        lambda t: _s(
            "bench",
            "run",
            _existing_plan(t) / "plan.csv",
            "--out",
            _rows(t, "x\n", "afile"),
            "--engine-python",
            sys.executable,
        ),  # fmt: skip
        r"--out .*afile: is a file; give a folder for the outputs",
    ),
    Case(
        "bench run of a plan without its columns leaves no folder",
        lambda t: _s(
            "bench",
            "run",
            _rows(t, "model,batch_size\nopt-125m,1\n", "plan.csv"),
            "--out",
            t / "camp",
            "--engine-python",
            sys.executable,
        ),  # fmt: skip
        r"the plan lacks column\(s\) hf_id, gpu, input_len",
    ),
    Case(
        "bench run --vllm a program that is not on the PATH",
        lambda t: _s(
            "bench", "run", _existing_plan(t) / "plan.csv", "--out", t / "camp", "--vllm", "no-such-vllm"
        ),
        r"--vllm no-such-vllm: no such program on the PATH; give its path",
    ),
    Case(
        "bench gemm --engine-python a missing file",
        lambda t: _s("bench", "gemm", "--engine-python", t / "nope" / "python", "--out", t / "gemm"),
        r"--engine-python .*nope/python: no such file; give the path of the program",
    ),
    Case(
        "bench attention --engine-python a file that is not a program",
        lambda t: _s(
            "bench", "attention", "--engine-python", _rows(t, "x\n", "notes.txt"), "--out", t / "att"
        ),
        r"--engine-python .*notes.txt: is not an executable program",
    ),
    Case(
        "transfer a parameter file with a standard error of 1e30",
        lambda t: _s("transfer", _params(t, stderr={"alpha": 1e30}), "--gpu", "h200", "--out", t / "t.json"),
        r"field 'stderr' of 'alpha' is 1e\+30, over 1e\+09 times its box \[0, 1\]",
    ),
    # -- measurements beyond the device's compute roofline --------------------------------------------------------
    Case(
        "fit a row of 1e300 tok/s",
        lambda t: _s("fit", _one_row_throughput(t, 1e300), "--out", t / "p.json"),
        r"runs.csv line 2: throughput_tok_s = 1e\+300 needs .* FLOP/s per GPU .* above h100-sxm-80gb's "
        r"highest peak",
    ),
    Case(
        "fit a row of 1e8 tok/s for opt-125m",
        lambda t: _s("fit", _one_row_throughput(t, 1e8), "--out", t / "p.json"),
        r"line 2: throughput_tok_s = 1e\+08 needs .* FLOP/s per GPU for opt-\S+'s linear layers alone",
    ),
    Case(
        "advise --block-size 1e9",
        lambda t: _advise(t, "--block-size", 1_000_000_000),
        r"one KV block of 1e\+09 tokens needs .* GiB, more than the KV pool of .* GiB",
    ),
    # -- options that exceed a node or conflict -------------------------------------------------------------------
    Case(
        "plan --env-file without --scheduler slurm",
        lambda t: _s(
            "plan", "--model", "llama-2-7b", "--gpu", GPU, "--env-file", _env_file(t), "--out", t / "plan"
        ),
        r"--env-file: Slurm options, used with --scheduler slurm only; add --scheduler slurm or drop them",
    ),
    Case(
        "plan --partition and --max-parallel without --scheduler slurm",
        lambda t: _s(
            "plan",
            "--model",
            "llama-2-7b",
            "--gpu",
            GPU,
            "--partition",
            "gpu",
            "--max-parallel",
            4,
            "--out",
            t / "plan",
        ),  # fmt: skip
        r"--partition, --max-parallel: Slurm options, used with --scheduler slurm only",
    ),
    Case(
        "profile campaign --account without --scheduler slurm",
        lambda t: _s(
            "profile", "campaign", "--budget-s", 600, "--gpu", "h200", "--account", "a", "--dry-run"
        ),
        r"--account: Slurm options, used with --scheduler slurm only",
    ),
    Case(
        "advise --gpus 1000",
        lambda t: _advise(t, "--gpus", 1000),
        r"--gpus 1000: a node holds at most 8 GPUs",
    ),
    Case(
        "advise --gpus 8 --tensor-parallel 3",
        lambda t: _advise(t, "--gpus", 8, "--tensor-parallel", 3),
        r"--tensor-parallel 3 does not divide --gpus 8",
    ),
    Case(
        "predict --out FIFO",
        lambda t: _s("predict", _params(t), _config(t), "--out", _fifo(t)),
        r"fifo.csv: is not a regular file",
    ),
    Case(
        "predict --out socket",
        lambda t: _s("predict", _params(t), _config(t), "--out", _socket(t)),
        r"sock.csv: is not a regular file",
    ),
    Case(
        "predict --out link to /dev/null",
        lambda t: _s("predict", _params(t), _config(t), "--out", _device_link(t)),
        r"null.csv: is not a regular file",
    ),
    Case(
        "ingest --out a result inside the input folder",
        lambda t: _s("data", "ingest", _runs_folder(t), "--out", t / "runs" / "bench-serve-c16.json"),
        r"is also an input|lies inside the input folder",
    ),
    Case(
        "ingest --out a new file inside the input folder",
        lambda t: _s("data", "ingest", _runs_folder(t), "--out", t / "runs" / "table.csv"),
        r"lies inside the input folder",
    ),
    Case(
        "fit --out the input", lambda t: _s("fit", _measured(t), "--out", t / "runs.csv"), r"is also an input"
    ),
    Case(
        "fit --out the input through ..",
        lambda t: _s("fit", _measured(t), "--out", (t / "sub").mkdir() or t / "sub" / ".." / "runs.csv"),
        r"is also an input",
    ),
    # -- physical validity ------------------------------------------------------------------------------------------
    Case(
        "predict OL written as nan",
        lambda t: _s("predict", _params(t), _config(t, ol="nan")),
        r"line 2: field 'output_len' is missing or not finite \(empty or nan\)",
    ),
    Case(
        "predict OL left empty",
        lambda t: _s("predict", _params(t), _config(t, ol="")),
        r"line 2: field 'output_len' is missing or not finite \(empty\)",
    ),
    Case(
        "predict OL left empty below a row that has it",
        lambda t: _s(
            "predict",
            _params(t),
            _rows(t, "model,batch_size,input_len,output_len\nopt-125m,8,128,64\nopt-125m,8,128,\n"),
        ),  # fmt: skip
        r"line 3: field 'output_len' is missing or not finite \(empty or nan\)",
    ),
    Case(
        "predict OL written as NA",
        lambda t: _s("predict", _params(t), _config(t, ol="NA")),
        r"line 2: field 'output_len' is 'NA', not a number",
    ),
    Case(
        "predict IL beyond the context window",
        lambda t: _s("predict", _params(t), _config(t, il=4000)),
        r"line 2: IL \+ OL = 4064 tokens exceeds the 2048-token context window of opt-125m",
    ),
    Case(
        "predict B = 1e9",
        lambda t: _s("predict", _params(t), _config(t, b=1_000_000_000)),
        r"line 2: batch_size = 1e\+09 exceeds the \d+ KV blocks of opt-125m",
    ),
    Case(
        "predict B = 1e12",
        lambda t: _s("predict", _params(t), _config(t, b=1_000_000_000_000)),
        r"batch_size = 1e\+12 exceeds the \d+ KV blocks",
    ),
    Case(
        "predict TP = 3 on 32 heads",
        lambda t: _s("predict", _params(t), _config(t, "llama-2-7b", tp=3)),
        r"line 2: tensor_parallel = 3 does not split llama-2-7b as vLLM requires \(its 32 attention heads are not divisible",
    ),
    Case(
        "predict TP = 1e6",
        lambda t: _s("predict", _params(t), _config(t, "llama-2-7b", tp=1_000_000)),
        r"tensor_parallel = 1e\+06 exceeds the 8 GPUs of one node",
    ),
    Case(
        "fit TP = 2 on a device without link bandwidth (not 'did not converge')",
        lambda t: _s("fit", _measured(t, tensor_parallel=2, gpu="cpu"), "--out", t / "p.json"),
        r"runs.csv line 2: tensor_parallel = 2 on cpu",
    ),
    Case(
        "advise config.json with hidden_size 0",
        lambda t: _s(
            "advise",
            _params(t),
            "--model",
            _zero_config(t, "hidden_size"),
            "--input-len",
            100,
            "--output-len",
            100,
        ),
        r"hidden_size",
    ),
    Case(
        "advise config.json with 0 layers",
        lambda t: _s(
            "advise",
            _params(t),
            "--model",
            _zero_config(t, "num_hidden_layers"),
            "--input-len",
            100,
            "--output-len",
            100,
        ),
        r"num_hidden_layers",
    ),
    Case(
        "advise config.json with vocabulary 0",
        lambda t: _s(
            "advise",
            _params(t),
            "--model",
            _zero_config(t, "vocab_size"),
            "--input-len",
            100,
            "--output-len",
            100,
        ),
        r"vocab_size",
    ),
    Case(
        "advise --no-memory-limit at IL = 1e9",
        lambda t: _s(
            "advise",
            _params(t),
            "--model",
            "opt-1.3b",
            "--input-len",
            1e9,
            "--output-len",
            100,
            "--no-memory-limit",
        ),
        r"exceeds the 2048-token context window of opt-1.3b",
    ),
    Case(
        "advise TP = 3",
        lambda t: _s(
            "advise",
            _params(t),
            "--model",
            "llama-2-7b",
            "--input-len",
            100,
            "--output-len",
            100,
            "--tensor-parallel",
            3,
        ),
        r"--tensor-parallel: tensor_parallel = 3 does not split llama-2-7b as vLLM requires",
    ),
    Case(
        "advise a 70B model on one GPU",
        lambda t: _s("advise", _params(t), "--model", "llama-3-70b", "--input-len", 100, "--output-len", 100),
        r"does not fit on h100-sxm-80gb at tensor_parallel = 1: KV pool = .* GiB x 0.9 - weights 131.4 GiB - "
        r"reserve 1.5 GiB = -.* GiB <= 0",
    ),
    Case(
        "plan TP = 3",
        lambda t: _s(
            "plan", "--model", "llama-2-7b", "--gpu", GPU, "--tensor-parallel", 3, "--out", t / "plan"
        ),
        r"tensor_parallel = 3 does not split llama-2-7b as vLLM requires",
    ),
    Case(
        "fit Llama-3-70B on one H200 in BF16 (KV pool <= 0)",
        lambda t: _s(
            "fit",
            _rows(
                t,
                "model,gpu,batch_size,input_len,output_len,throughput_tok_s\n"
                + "".join(f"llama-3-70b,h200,{b},128,128,{100 * b}\n" for b in (1, 2, 4, 8, 16, 32, 64)),
            ),
            "--out",
            t / "p.json",
        ),
        r"rows.csv line 2: llama-3-70b \(2 bytes per weight\) does not fit on h200-sxm-141gb at tensor_parallel = 1: "
        r"KV pool = 141.0 GiB x 0.9 - weights 131.4 GiB - reserve 1.5 GiB = -6.0 GiB <= 0",
    ),
    # -- parameters within their bounds, on load and on transfer ---------------------------------------------------
    Case(
        "predict with eta_c = -0.5",
        lambda t: _s("predict", _params(t, eta_c=-0.5), _config(t)),
        r"parameter eta_c = -0.5 is outside its bounds \[0.001, 1\]",
    ),
    Case(
        "advise with eta_c = -0.5",
        lambda t: _s(
            "advise", _params(t, eta_c=-0.5), "--model", "opt-125m", "--input-len", 100, "--output-len", 100
        ),
        r"parameter eta_c = -0.5 is outside its bounds",
    ),
    Case(
        "transfer with eta_c = -0.5",
        lambda t: _s("transfer", _params(t, eta_c=-0.5), "--gpu", "mi300x", "--out", t / "o.json"),
        r"parameter eta_c = -0.5 is outside its bounds",
    ),
    Case(
        "transfer an unknown variant",
        lambda t: _s("transfer", _params(t, variant="papr"), "--gpu", "mi300x", "--out", t / "o.json"),
        r"params.json: field 'variant': unknown model variant 'papr'; closest known: paper",
    ),
    Case(
        "transfer a string parameter",
        lambda t: _s("transfer", _params(t, alpha="fast"), "--gpu", "mi300x", "--out", t / "o.json"),
        r"parameter 'alpha' is 'fast', not a finite number",
    ),
    Case(
        "transfer a negative parameter",
        lambda t: _s("transfer", _params(t, gamma=-1e-6), "--gpu", "mi300x", "--out", t / "o.json"),
        r"parameter gamma = -1e-06 is outside its bounds",
    ),
    # -- duplicates: after alias normalization, both sides by file and line; blank lines counted -------------------
    Case(
        "conflicting duplicates differing by a model alias (case)",
        lambda t: _s("fit", _alias_rows(t, "model", "OPT-125M"), "--out", t / "p.json"),
        r"alias.csv line 2 and \S*alias.csv line \d+ \(throughput_tok_s",
    ),
    Case(
        "conflicting duplicates differing by a GPU alias",
        lambda t: _s("fit", _alias_rows(t, "gpu", "h100-64gb"), "--out", t / "p.json"),
        r"alias.csv line 2 and \S*alias.csv line \d+",
    ),
    Case(
        "conflicting duplicates across two files",
        lambda t: _s("fit", *_two_files(t), "--out", t / "p.json"),
        r"a.csv line 2 and \S*b.csv line 2",
    ),
    Case(
        "a blank line before a bad row",
        lambda t: _s("fit", _blank_line_rows(t), "--out", t / "p.json"),
        r"runs.csv line 6: field 'batch_size' is -4",
    ),
    Case(
        "fit an unknown GPU",
        lambda t: _s("fit", _measured(t, gpu="h100-sxn"), "--out", t / "p.json"),
        r"runs.csv line 2: field 'gpu': unknown GPU 'h100-sxn'",
    ),  # -- a config file or folder named by --model or a `model` column is an input like any other --------
    Case(
        "advise --curve the --model config.json",
        lambda t: _s(
            "advise",
            _params(t),
            "--model",
            _model_folder(t) / "config.json",
            "--input-len",
            100,
            "--output-len",
            100,
            "--curve",
            t / "m" / "config.json",
        ),  # fmt: skip
        r"--curve \S*m/config.json: is also an input; choose another output file",
    ),
    Case(
        "advise --curve inside the --model folder",
        lambda t: _s(
            "advise",
            _params(t),
            "--model",
            _model_folder(t),
            "--input-len",
            100,
            "--output-len",
            100,
            "--curve",
            t / "m" / "curve.csv",
        ),  # fmt: skip
        r"--curve \S*m/curve.csv: lies inside the input folder",
    ),
    Case(
        "predict --out the config.json the grid's model column names",
        lambda t: _s("predict", _params(t), _grid_naming_config(t), "--out", t / "m" / "config.json"),
        r"--out \S*m/config.json: is also an input",
    ),
    Case(
        "fit --out the config.json the table's model column names",
        lambda t: _s("fit", _runs_naming_config(t), "--out", t / "m" / "config.json"),
        r"--out \S*m/config.json: is also an input",
    ),
    Case(
        "plan --out the folder of the --model config.json",
        lambda t: _s("plan", "--model", _model_folder(t) / "config.json", "--gpu", GPU, "--out", t / "m"),
        r"--out \S*/m: holds the input \S*config.json; choose another output folder",
    ),
    Case(
        "bench model --out the folder of its source config.json",
        lambda t: _s("bench", "model", _model_folder(t) / "config.json", "--divide", 2, "--out", t / "m"),
        r"--out \S*/m: holds the input \S*config.json",
    ),
    Case(
        "transfer --out the input parameter file",
        lambda t: _s("transfer", _params(t), "--gpu", "mi300x", "--out", t / "params.json"),
        r"--out \S*params.json: is also an input",
    ),
    Case(
        "reproduce --build-dir the notebook folder",
        lambda t: _s("reproduce", "--notebook-dir", (t / "nb").mkdir() or t / "nb", "--build-dir", t / "nb"),
        r"--build-dir \S*nb: is also an input folder",
    ),
    # -- refusals before any write; a plan folder is replaced whole or not at all ------------------------
    Case(
        "plan slurm --time bogus creates nothing",
        lambda t: _slurm_plan(t, "--time", "bogus"),
        r"time limit 'bogus': use Slurm's format",
    ),
    Case(
        "plan slurm --partition with ; creates nothing",
        lambda t: _slurm_plan(t, "--partition", "gpu;rm"),
        r"partition 'gpu;rm': no spaces or shell characters allowed",
    ),
    Case(
        "plan slurm missing --env-file creates nothing",
        lambda t: _slurm_plan(t, "--env-file", t / "site.env"),
        r"--env-file \S*site.env: no such file",
    ),
    Case(
        "plan slurm --time bogus over an existing plan changes nothing",
        lambda t: (_existing_plan(t), _slurm_plan(t, "--time", "bogus"))[1],
        r"time limit 'bogus'",
    ),
    Case(
        "plan --out a read-only folder",
        lambda t: _s("plan", "--model", "llama-2-7b", "--gpu", GPU, "--out", _read_only_folder(t) / "plan"),
        r"(cannot write into|is not writable).*choose another output folder",
    ),
    Case(
        "plan --out a new folder inside a read-only folder",
        lambda t: _s("plan", "--model", "llama-2-7b", "--gpu", GPU, "--out", _read_only_folder(t) / "plan"),
        r"plan: (cannot write into|folder \S+ is not writable).*choose another output folder",
    ),
    # -- values a later command would refuse are refused when given -------------------------------------
    Case(
        "fit --fix eta_c=2 (outside its bounds)",
        lambda t: _s("fit", _measured(t), "--out", t / "p.json", "--fix", "eta_c=2"),
        r"--fix eta_c=2: outside the bounds \[0.001, 1\] of eta_c",
    ),
    Case(
        "fit --fix eta_c=nan",
        lambda t: _s("fit", _measured(t), "--out", t / "p.json", "--fix", "eta_c=nan"),
        r"--fix 'eta_c=nan': nan is not a finite number",
    ),
    Case(
        "fit --fix t_fixed=-inf",
        lambda t: _s("fit", _measured(t), "--out", t / "p.json", "--fix", "t_fixed=-inf"),
        r"--fix 't_fixed=-inf': -inf is not a finite number",
    ),
    Case(
        "ingest 9 of 12 prompts completed and no 'failed' field",
        lambda t: _s(
            "data", "ingest", _result_9_of_12(t), "--gpu", GPU, "--batch-size", 16, "--out", t / "o.csv"
        ),
        r"partial.json: 9 of 12 requested prompts completed and the file has no 'failed' field",
    ),
    Case(
        "ingest one result file with --out that file",
        lambda t: _s(
            "data", "ingest", _result_9_of_12(t) / "partial.json", "--out", t / "runs" / "partial.json"
        ),
        r"is also an input",
    ),
    # -- every numeric option range-checked, NaN included ------------------------------------------------
    Case(
        "advise --gpu-memory-utilization nan",
        lambda t: _advise(t, "--gpu-memory-utilization", "nan"),
        r"argument --gpu-memory-utilization: nan must be in \(0, 1\]",
    ),
    Case(
        "advise --gpu-memory-utilization 0 (not 'does not fit')",
        lambda t: _advise(t, "--gpu-memory-utilization", 0),
        r"argument --gpu-memory-utilization: 0 must be in \(0, 1\]",
    ),
    Case(
        "advise --epsilon nan",
        lambda t: _advise(t, "--epsilon", "nan"),
        r"epsilon nan is outside \(0, 1\]",
    ),
    Case(
        "advise --reserve-gb nan",
        lambda t: _advise(t, "--reserve-gb", "nan"),
        r"argument --reserve-gib/--reserve-gb: nan is not a finite number",
    ),
    Case(
        "plan --gpu-memory-utilization 1.5",
        lambda t: _s(
            "plan",
            "--model",
            "llama-2-7b",
            "--gpu",
            GPU,
            "--gpu-memory-utilization",
            1.5,
            "--out",
            t / "plan",
        ),  # fmt: skip
        r"argument --gpu-memory-utilization: 1.5 must be in \(0, 1\]",
    ),
    Case(
        "plan --port 70000",
        lambda t: _s("plan", "--model", "llama-2-7b", "--gpu", GPU, "--port", 70000, "--out", t / "plan"),
        r"argument --port: 70000 is not a TCP port \(1..65535\)",
    ),
    Case(
        "profile campaign --budget-s nan",
        lambda t: _s("profile", "campaign", "--budget-s", "nan", "--gpu", "h200", "--dry-run"),
        r"budget must be > 0 seconds, got nan",
    ),
    Case(
        "peers --n-starts -1",
        lambda t: _s("peers", "--n-starts", -1, "--table"),
        r"argument --n-starts: -1 must be a whole number >= 0",
    ),
    Case(
        "a missing required option is one line too",
        lambda t: _s("advise", _params(t), "--input-len", 100, "--output-len", 100),
        r"the following arguments are required: --model; see `slim advise --help`",
    ),
    # -- models that cannot exist: refused by the config reader, naming the key ---------------------------------
    Case(
        "models: more experts per token than experts",
        lambda t: _s("models", _impossible(t, MOE_CONFIG, num_experts_per_tok=9)),
        r"key 'num_experts_per_tok' is 9: a token is routed to 1 to 8 experts",
    ),
    Case(
        "models: no experts per token",
        lambda t: _s("models", _impossible(t, MOE_CONFIG, num_experts_per_tok=0)),
        r"key 'num_experts_per_tok' is 0",
    ),
    Case(
        "models: zero experts in an MoE config, not read as dense",
        lambda t: _s("models", _impossible(t, MOE_CONFIG, num_local_experts=0)),
        r"key 'num_local_experts' is 0: a mixture of experts routes among 2 to",
    ),
    Case(
        "models: one expert",
        lambda t: _s("models", _impossible(t, MOE_CONFIG, num_local_experts=1)),
        r"key 'num_local_experts' is 1",
    ),
    Case(
        "models: a billion experts",
        lambda t: _s("models", _impossible(t, MOE_CONFIG, num_local_experts=1000000000)),
        r"key 'num_local_experts' is 1000000000: a mixture of experts routes among 2 to 16384",
    ),
    Case(
        "models: an expert FFN width of 0",
        lambda t: _s("models", _impossible(t, MOE_CONFIG, intermediate_size=0)),
        r"key 'intermediate_size' must be a positive integer, got 0",
    ),
    Case(
        "models: zero routed experts with latent attention",
        lambda t: _s("models", _impossible(t, MLA_CONFIG, n_routed_experts=0)),
        r"key 'n_routed_experts' is 0",
    ),
    Case(
        "models: no layer is a mixture of experts",
        lambda t: _s("models", _impossible(t, MLA_CONFIG, first_k_dense_replace=3)),
        r"no layer of the 3 is a mixture of experts",
    ),
    Case(
        "models: an MoE layer step of 0",
        lambda t: _s("models", _impossible(t, MLA_CONFIG, moe_layer_freq=0)),
        r"key 'moe_layer_freq' must be a positive integer, got 0",
    ),
    Case(
        "models: kv_lora_rank 0",
        lambda t: _s("models", _impossible(t, MLA_CONFIG, kv_lora_rank=0)),
        r"key 'kv_lora_rank' must be a positive integer, got 0",
    ),
    Case(
        "models: qk_rope_head_dim 0",
        lambda t: _s("models", _impossible(t, MLA_CONFIG, qk_rope_head_dim=0)),
        r"key 'qk_rope_head_dim' must be a positive integer",
    ),
    Case(
        "models: max_position_embeddings 0",
        lambda t: _s("models", _impossible(t, MOE_CONFIG, max_position_embeddings=0)),
        r"key 'max_position_embeddings' is 0: the longest sequence the model takes must be positive",
    ),
    Case(
        "bench model --kv-heads 5 for 4 query heads",
        lambda t: _s(
            "bench", "model", "llama-2-7b", "--divide", 8, "--heads", 4, "--kv-heads", 5, "--out", t / "m"
        ),
        r"llama-2-7b as scaled: 4 query heads are not a multiple of 5 KV heads",
    ),
    Case(
        "models ./nope/ says no config.json is there, not an unknown model",
        lambda t: _s("models", "./nope/"),
        r"model ./nope/: no config.json there \(no such file or folder\)",
    ),
    Case(
        "fit a table with a column named twice",
        lambda t: _s("fit", _repeated_column(t), "--out", t / "p.json"),
        r"runs.csv: column 'batch_size' appears twice in the header; keep one",
    ),
    Case(
        "predict a table with a column named twice",
        lambda t: _s("predict", _params(t), _repeated_column(t)),
        r"runs.csv: column 'batch_size' appears twice in the header",
    ),
    Case(
        "fit a 1 MB model name: the message quotes 80 characters of it",
        lambda t: _s("fit", _measured(t, model="x" * 1_000_000), "--out", t / "p.json"),
        r"x{80}\.\.\. \(1000000 characters\)",
    ),
    Case(
        "advise --max-batch 2**62",
        lambda t: _advise(t, "--max-batch", 2**62),
        r"argument --max-batch: 4611686018427387904 must be a whole number in 1..1048576",
    ),
    # -- messages that say what is wrong --------------------------------------------------------------------
    Case(
        "--model ./nope/ says no config.json is there",
        lambda t: _s("advise", _params(t), "--model", "./nope/", "--input-len", 100, "--output-len", 100),
        r"--model ./nope/: no config.json there \(no such file or folder\)",
    ),
    Case(
        "--model a folder without config.json",
        lambda t: _s(
            "plan", "--model", (t / "empty").mkdir() or t / "empty", "--gpu", GPU, "--out", t / "plan"
        ),
        r"--model \S*empty: no config.json in that folder",
    ),
    Case(
        "fit --gpu of another GPU than the rows' speaks of the fit",
        lambda t: _s("fit", _measured(t), "--gpu", "a100-sxm-80gb", "--out", t / "p.json"),
        r"^slim fit: error: rows for GPU\(s\) h100-sxm-80gb but the fit was asked for a100-sxm-80gb; fit each GPU's",
    ),
    Case(
        "plan an fp8-only model without --quantization",
        lambda t: _s("plan", "--model", "llama-3-70b", "--gpu", "h200", "--out", t / "plan"),
        r"does not fit in the KV cache: .* fp8 weights \(quantization\)",
    ),
    Case(
        "advise fp4 weights for a 16-bit checkpoint (vLLM would refuse the printed flag)",
        lambda t: _advise(t, "--quantization", "fp4"),
        r"--quantization fp4: the checkpoint of opt-125m is 16-bit: fp4 weights are served from an fp4 checkpoint",
    ),
    Case(
        "plan nvfp4 weights for a 16-bit checkpoint",
        lambda t: _s(
            "plan", "--model", "llama-2-7b", "--gpu", "b200", "--quantization", "nvfp4", "--out", t / "p"
        ),
        r"--quantization nvfp4: the checkpoint of llama-2-7b is 16-bit",
    ),
    Case(
        "plan a batch size above the server's token budget",
        lambda t: _s(
            "plan",
            "--model",
            "opt-125m",
            "--gpu",
            "a100-sxm-80gb",
            "--input-len",
            128,
            "--output-len",
            64,
            128,
            "--batch-sizes",
            8,
            16,
            4096,
            "--out",
            t / "p",
        ),  # fmt: skip
        r"batch size\(s\) \[4096\] exceed the token budget of 2048 per step",
    ),
    Case(
        "bench table of a campaign whose manifest is garbled",
        lambda t: _s("bench", "table", _garbled_campaign(t), "--out", t / "tables"),
        r"manifest.json: not a readable manifest",
    ),
    Case(
        "fit a table whose model name is longer than a file name",
        lambda t: _s(
            "fit",
            _rows(
                t,
                "model,gpu,batch_size,input_len,output_len,throughput_tok_s\n"
                + "m" * 400
                + f",{GPU},8,128,64,1000\n",
            ),
            "--out",
            t / "p.json",
        ),  # fmt: skip
        r"unknown model 'm{20}",
    ),
    Case(
        "fit --out a link that leads to itself",
        lambda t: _s("fit", _measured(t), "--out", _link_loop(t)),
        r"a link that leads to itself; choose another output file",
    ),
    Case(
        "ingest a folder that is a link to itself",
        lambda t: _s("data", "ingest", _link_loop(t), "--gpu", GPU),
        r"a link that leads to itself or nowhere; give the folder of the results",
    ),
    Case(
        "models: a folder whose config.json is a folder",
        lambda t: (t / "m" / "config.json").mkdir(parents=True) or _s("models", t / "m"),
        r"its config.json is a folder",
    ),
    Case(
        "a config with model_type mamba is refused, not read as a Llama decoder",
        lambda t: _s(
            "advise", _params(t), "--model", _mamba_folder(t), "--input-len", 100, "--output-len", 100
        ),
        r"model_type 'mamba' is a state-space",
    ),
    Case(
        "predict a folder given as its table",
        lambda t: _s("predict", _params(t), _user_folder(t)),
        r"notes: is a folder; give the path of a CSV table",
    ),
    Case(
        "bench model --out a folder holding the user's files",
        lambda t: _s("bench", "model", "opt-125m", "--out", _user_folder(t)),
        r"holds files that `slim bench model` did not write \(README.txt\)",
    ),
    Case(
        "fit: a negative mean TTFT",
        lambda t: _s("fit", _measured(t, mean_ttft_ms=-5.0), "--out", t / "p.json"),
        r"mean_ttft_ms = -5 is not a measured latency",
    ),
    Case(
        "fit: a mean TPOT of 0 ms with more than one output token",
        lambda t: _s("fit", _measured(t, mean_tpot_ms=0.0), "--out", t / "p.json"),
        r"mean_tpot_ms = 0 is not a measured latency",
    ),
    Case(
        "fit: a mean TTFT of 1e308 ms",
        lambda t: _s("fit", _measured(t, mean_ttft_ms=1e308), "--out", t / "p.json"),
        r"mean_ttft_ms = 1e\+308 is not a measured latency",
    ),
    Case(
        "predict with a standard error written as NaN (null is how an unknown one is written)",
        lambda t: _s("predict", _params(t, stderr={"eta_c": float("nan")}), _config(t)),
        r"field 'stderr' of 'eta_c' is nan",
    ),
]


def _snapshot(tmp: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for p in sorted(tmp.rglob("*")):
        if p.is_symlink():
            out[str(p)] = "link:" + os.readlink(p)
        elif p.is_file():
            out[str(p)] = (p.read_bytes(), p.stat().st_mtime_ns)
        elif not p.is_dir():
            out[str(p)] = "special:" + oct(p.stat().st_mode)
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_clean_line_and_destroys_nothing(case, tmp_path, capsys):
    argv = case.argv(tmp_path)
    before = _snapshot(tmp_path)
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse's refusals (a value out of range, a missing option) exit 2
        rc = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and "warning:" not in ln]
    assert rc == 2, f"{case.name}: exit status {rc}, stderr {err!r}"
    assert len(lines) == 1, f"{case.name}: not one line: {err!r}"
    assert "Traceback" not in err
    assert re.search(case.message, lines[0]), (case.name, lines[0])
    assert _snapshot(tmp_path) == before, f"{case.name}: a file changed"
    assert not list(tmp_path.rglob(".*.tmp")), f"{case.name}: a temporary file was left"


def test_every_issue_case_is_covered():
    """Every audited bad input is one case above (65 from the first two audits, and those added since)."""
    assert len(CASES) >= 32 + 33
    assert len({c.name for c in CASES}) == len(CASES)


def test_dash_writes_to_standard_output(tmp_path, capsys):
    assert main(_s("predict", _params(tmp_path), _config(tmp_path), "--out", "-")) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("model,batch_size,input_len,output_len,pred_throughput_tok_s")
    assert not (tmp_path / "-").exists()


def test_no_memory_limit_never_prints_a_negative_saving(tmp_path, capsys):
    rc = main(_s("advise", _params(tmp_path), "--model", "opt-6.7b", "--input-len", 1000, "--output-len", 1000,
                 "--batch-sizes", 8, 64, 512, "--no-memory-limit"))  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    kv = next(ln for ln in out.splitlines() if ln.startswith("KV cache"))
    assert "saved -" not in kv
    if "B_cap = 512" in out:  # 512 requests of 2,000 tokens need more than an 80 GB GPU's pool
        assert "MORE than the default allocation" in kv


def test_profile_help_has_no_placeholder(capsys):
    with pytest.raises(SystemExit):
        main(["profile", "--help"])
    out = capsys.readouterr().out
    assert "{OUTPUTS_NOTE}" not in out and "replaced atomically" in out


# -- the valid neighbours of the cases above work -----------------------------------------------------------


def test_plan_takes_the_advisors_precision_options(tmp_path, capsys):
    """Llama-3-70B on one H200 fits only in fp8: the plan sizes its KV cache so and passes the flags to vLLM."""
    argv = _s("plan", "--model", "llama-3-70b", "--gpu", "h200", "--quantization", "fp8", "--kv-cache-dtype", "fp8",
              "--gpu-memory-utilization", 0.95, "--out", tmp_path / "plan")  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    plan = pd.read_csv(tmp_path / "plan" / "plan.csv")
    assert set(plan["quantization"]) == {"fp8"} and set(plan["gpu_memory_utilization"]) == {0.95}
    serve = [ln for ln in (tmp_path / "plan" / "run_plan.sh").read_text().splitlines() if "vllm serve" in ln]
    assert serve and all(
        "--quantization fp8 --kv-cache-dtype fp8 --gpu-memory-utilization 0.95" in ln for ln in serve
    )
    slurm = _s("plan", "--model", "llama-3-70b", "--gpu", "h200", "--quantization", "fp8", "--scheduler", "slurm",
               "--out", tmp_path / "array")  # fmt: skip
    assert main(slurm) == 0
    assert "--quantization fp8" in (tmp_path / "array" / "slurm_array.sh").read_text()


def test_ingest_reads_one_result_file(tmp_path, capsys):
    runs = _runs_folder(tmp_path)
    out = tmp_path / "one.csv"
    assert main(_s("data", "ingest", runs / "bench-serve-c16.json", "--out", out)) == 0, (
        capsys.readouterr().err
    )
    table = pd.read_csv(out)
    assert list(table["source_file"]) == ["bench-serve-c16.json"] and table["batch_size"].iloc[0] == 16


def test_a_new_plan_replaces_the_old_one_whole(tmp_path, capsys):
    """Over a local plan, a Slurm plan leaves no run_plan.sh of the old one; files that are not the plan's stay."""
    plan = _existing_plan(tmp_path)
    (plan / "results").mkdir()
    (plan / "results" / "kept.json").write_text("{}")
    assert main(_slurm_plan(tmp_path, "--time", "01:00:00")) == 0, capsys.readouterr().err
    names = sorted(p.name for p in plan.iterdir())
    assert names == [
        ".slim-owner",
        "README.txt",
        "logs",
        "plan.csv",
        "results",
        "slurm.env",
        "slurm_array.sh",
        "slurm_tasks.tsv",
    ]
    assert pd.read_csv(plan / "plan.csv")["model"].iloc[0] == "llama-2-7b"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_gpus_with_a_tensor_parallel_degree_search_that_degree_only(tmp_path, capsys):
    """--gpus 8 --tensor-parallel 2: four TP2 replicas per node, no other degree."""
    argv = _s("advise", _params(tmp_path), "--model", "llama-2-7b", "--input-len", 250, "--output-len", 260,
              "--gpus", 8, "--tensor-parallel", 2, "--format", "json")  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    ranked = json.loads(capsys.readouterr().out)["ranked"]
    assert ranked and {r["tensor_parallel"] for r in ranked} == {2} and {r["replicas"] for r in ranked} == {4}


@pytest.mark.parametrize("value", ["fp4", "nvfp4"])
def test_fp4_is_printed_as_the_flag_vllm_takes(value, tmp_path, capsys):
    """SLIM's fp4 and nvfp4 are NVFP4, which vLLM serves from a ModelOpt NVFP4 checkpoint as --quantization
    modelopt_fp4 (it has no fp4 or nvfp4)."""
    ckpt = tmp_path / "llama-nvfp4"
    ckpt.mkdir()
    shutil.copy(Path(__file__).parent / "fixtures" / "configs" / "llama-3.1-8b.json", ckpt / "config.json")
    (ckpt / "hf_quant_config.json").write_text('{"quantization": {"quant_algo": "NVFP4"}}')
    argv = _s("advise", _params(tmp_path), "--model", ckpt, "--input-len", 250, "--output-len", 260,
              "--quantization", value)  # fmt: skip
    main(argv)
    line = next(ln for ln in capsys.readouterr().out.splitlines() if "vllm serve" in ln)
    assert "--quantization modelopt_fp4" in line and f"--quantization {value} " not in line + " "
    plan = _s("plan", "--model", ckpt, "--gpu", "b200", "--quantization", value, "--out", tmp_path / "plan")
    assert main(plan) == 0, capsys.readouterr().err
    serve = [ln for ln in (tmp_path / "plan" / "run_plan.sh").read_text().splitlines() if "vllm serve" in ln]
    assert serve and all("--quantization modelopt_fp4 " in ln for ln in serve)
    assert set(pd.read_csv(tmp_path / "plan" / "plan.csv")["quantization"]) == {value}


@pytest.mark.parametrize(
    ("library", "argv", "message"),
    [
        ("tokenizers", ["bench", "model", "opt-1.3b", "--divide", "8", "--out", "{t}/m8"],
         r"tokenizer is trained with `tokenizers` \(pip install 'slimlib\[engine\]'"),
        ("torch", ["bench", "run", "{plan}", "--out", "{t}/camp", "--engine-python", sys.executable],
         r"the host micro-benchmark needs PyTorch \(pip install 'slimlib\[profiling\]'"),
    ],
)  # fmt: skip
def test_a_missing_optional_library_is_one_line_naming_its_extra(
    library, argv, message, tmp_path, monkeypatch, capsys
):
    import builtins

    real = builtins.__import__

    def without(name, *args, **kwargs):
        if name == library:
            raise ImportError(f"No module named {library!r}")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without)
    plan = str(_existing_plan(tmp_path) / "plan.csv") if "{plan}" in argv else ""
    rc = main([a.replace("{t}", str(tmp_path)).replace("{plan}", plan) for a in argv])
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip() and "warning:" not in ln]
    assert rc == 2 and len(lines) == 1 and re.search(message, lines[0]), lines


def _every_subcommand(t: Path) -> dict[str, list[str]]:
    """One invocation of each `slim` subcommand with an input that is not there (or a name nobody knows)."""
    miss = t / "missing.csv"
    return {
        "fit": _s("fit", miss, "--out", t / "p.json"),
        "predict": _s("predict", t / "nope.json", miss),
        "advise": _s("advise", t / "nope.json", "--model", "opt-125m", "--input-len", 10, "--output-len", 10),
        "plan": _s("plan", "--model", t / "nope" / "config.json", "--gpu", "h100", "--out", t / "plan"),
        "transfer": _s("transfer", t / "nope.json", "--gpu", "h200", "--out", t / "t.json"),
        "models": _s("models", t / "nope"),
        "gpus": _s("gpus", "no-such-gpu"),
        "data build": _s("data", "build", "--raw", t / "noraw", "--out", t / "dataout"),
        "data ingest": _s("data", "ingest", t / "noresults", "--out", t / "r.csv"),
        "data fetch": _s("data", "fetch", "--dest", t / "nodir" / "sub"),
        "evaluate": _s("evaluate", "--scenario", "no-such-scenario"),
        "peers": _s("peers", "--tools", "no-such-tool"),
        "reproduce": _s(
            "reproduce", "--notebook-dir", t / "nonb", "--build-dir", t / "b", "--figures-dir", t / "f"
        ),
        "nbstrip": _s("nbstrip", t / "nope.ipynb"),
        "profile run": _s(
            "profile",
            "run",
            "--model",
            "no-such-model",
            "--batch-size",
            1,
            "--input-len",
            8,
            "--output-len",
            8,
            "--device",
            "cpu",
        ),  # fmt: skip
        "profile tidy": _s("profile", "tidy", t / "nocamp", "--out", t / "kt"),
        "profile campaign": _s("profile", "campaign", "--budget-s", 600, "--gpu", "no-such-gpu", "--dry-run"),
        "bench campaign": _s("bench", "campaign", "--out", t / "c", "--vllm", t / "nope" / "vllm"),
        "bench model": _s("bench", "model", "no-such-model", "--out", t / "m"),
        "bench run": _s("bench", "run", miss, "--out", t / "c", "--engine-python", sys.executable),
        "bench table": _s("bench", "table", t / "nocamp", "--out", t / "t.csv"),
        "bench compare": _s("bench", "compare", t / "nocamp"),
        "bench gemm": _s("bench", "gemm", "--engine-python", t / "nopy", "--out", t / "g"),
        "bench attention": _s("bench", "attention", "--engine-python", t / "nopy", "--out", t / "a"),
        "bench offline": _s(
            "bench", "offline", "--engine-python", t / "nopy", "--models-dir", t / "nom", "--out", t / "o"
        ),  # fmt: skip
    }


def test_every_subcommand_refuses_a_missing_input_in_one_line(tmp_path, capsys):
    """Each subcommand of `slim` (every command and every `data`, `profile` and `bench` subcommand) given an input
    that is not there: exit status 2, one line naming it, no traceback, nothing written."""
    from slimlib.cli.main import build_parser

    cases = _every_subcommand(tmp_path)

    def names(parser, prefix=""):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    yield from names(sub, f"{prefix}{name} ") if sub._subparsers else [f"{prefix}{name}"]

    assert sorted(names(build_parser())) == sorted(cases)  # every subcommand, and only those
    for name, argv in cases.items():
        try:
            rc = main(argv)
        except SystemExit as exc:
            rc = exc.code
        err = capsys.readouterr().err
        lines = [ln for ln in err.splitlines() if ln.strip() and "warning:" not in ln]
        assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (name, rc, err)
        assert lines[0].startswith(f"slim {name.split()[0]}"), (name, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_an_empty_frontier_leaves_the_previous_one(tmp_path, capsys):
    front = tmp_path / "fr.csv"
    for name in ("fr.csv", "fr.pdf", "fr.png"):
        (tmp_path / name).write_text("old\n")
    before = _snapshot(tmp_path)
    rc = main(_advise(tmp_path, "--ttft-ms", 0.001, "--gpus", 1, "--frontier", front))
    err = capsys.readouterr().err
    assert rc == 1 and "the frontier is empty: nothing written" in err
    assert {k: v for k, v in _snapshot(tmp_path).items() if "fr." in k} == {
        k: v for k, v in before.items() if "fr." in k
    }


def test_a_plan_quotes_the_model_it_records(tmp_path, capsys):
    import subprocess

    folder = tmp_path / "sub $(touch PWNED),x"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_LLAMA))
    out = tmp_path / "plan"
    args = _s("plan", "--model", folder, "--gpu", GPU, "--input-len", 250, "--output-len", 130, "--out", out)
    assert main(args) == 0
    capsys.readouterr()
    echo = next(
        ln for ln in (out / "run_plan.sh").read_text().splitlines() if "echo" in ln and '>> "$SIDECAR"' in ln
    )
    sidecar = tmp_path / "side.csv"
    subprocess.run(["bash", "-c", echo.split(" && ", 1)[1]], cwd=tmp_path, env={**os.environ, "SIDECAR": str(sidecar)},
                   check=True)  # fmt: skip
    assert not (tmp_path / "PWNED").exists()
    row = pd.read_csv(sidecar, header=None).iloc[0]
    assert row[4] == str(folder)  # the path as given, which `slim fit` reads back


def test_a_local_folder_with_a_registry_name_is_read_and_said(tmp_path):
    import subprocess

    folder = tmp_path / "opt-125m"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(_LLAMA))
    code = "import sys; from slimlib.cli.main import run; sys.exit(run(sys.argv[1:]))"

    def slim(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", code, *args], cwd=tmp_path, capture_output=True, text=True
        )

    bare = slim("models", "opt-125m")
    assert (
        bare.returncode == 0 and " 2048 " in bare.stdout
    )  # the local config's width (the registry's is 768)
    # said once, though the command reads the model more than once
    assert bare.stderr.count("read from the local folder 'opt-125m'") == 1, bare.stderr
    explicit = slim("models", "./opt-125m")
    assert explicit.returncode == 0 and "local folder" not in explicit.stderr


def test_an_output_that_cannot_be_replaced_is_one_line(tmp_path, capsys, monkeypatch):
    out = tmp_path / "pred.csv"
    out.write_text("old\n")

    def refuse(src, dst):
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "replace", refuse)
    rc = main(_s("predict", _params(tmp_path), _config(tmp_path), "--out", out))
    err = capsys.readouterr().err
    assert rc == 2 and "pred.csv: cannot replace it (Operation not permitted)" in err
    assert out.read_text() == "old\n" and not list(tmp_path.glob(".*.tmp"))


#: a small Llama-style config (the shapes of a 1B model)
_LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192,
    "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 16, "vocab_size": 128256,
    "max_position_embeddings": 8192, "torch_dtype": "bfloat16", "rms_norm_eps": 1e-5, "hidden_act": "silu",
}  # fmt: skip


def test_an_infeasible_slo_writes_the_curve_says_so_and_exits_1(tmp_path, capsys):
    """No batch size meets the SLO: the predicted curve (every candidate, none feasible) is still written, the
    output says so, and the exit status is 1."""
    curve = tmp_path / "curve.csv"
    assert main(_advise(tmp_path, "--slo-s", 1e-6, "--curve", curve)) == 1
    out = capsys.readouterr().out
    assert "no feasible batch size" in out
    assert f"none feasible) to {curve}" in out
    df = pd.read_csv(curve)
    assert len(df) > 1 and not df["meets_slo"].any()


def _unprivileged() -> list[str] | None:
    """The command prefix that runs `slim` without root's right to ignore file modes (none needed when not root);
    None when root cannot drop to `nobody` here."""
    if os.geteuid() != 0:
        return [sys.executable, "-m", "slimlib.cli.main"]
    prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable, "-m"]
    try:
        ok = (
            subprocess.run(
                [*prefix, "slimlib.cli.main", "--help"], capture_output=True, timeout=60
            ).returncode
            == 0
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [*prefix, "slimlib.cli.main"] if ok else None


def test_file_modes_are_one_line_and_destroy_nothing():
    """An unreadable input and outputs in folders that cannot be written, tried as a user the modes bind: exit
    status 2, one line naming the path, nothing written."""
    slim = _unprivileged()
    if slim is None:
        pytest.skip("running as root without setpriv to drop to nobody: file modes do not bind")
    with tempfile.TemporaryDirectory() as d:
        t = Path(d)
        t.chmod(0o755)
        runs, params = _measured(t), _params(t)
        locked = t / "locked.csv"
        locked.write_text(runs.read_text())
        locked.chmod(0o000)
        free, mpl = t / "free", t / "mpl"  # writable by whoever runs the command
        for folder in (free, mpl):
            folder.mkdir()
            folder.chmod(0o777)
        ro = t / "ro"
        ro.mkdir()
        (ro / "old.json").write_text("{}")
        ro.chmod(0o555)
        for p in (runs, params):
            p.chmod(0o644)
        cases = {
            "unreadable table": (["fit", locked, "--out", free / "p.json"], r"locked.csv"),
            "fit --out in a read-only folder": (["fit", runs, "--out", ro / "p.json"], r"ro/p.json"),
            "fit --out over a file in a read-only folder": (
                ["fit", runs, "--out", ro / "old.json"],
                r"old.json",
            ),
            "advise --frontier in a read-only folder": (
                _advise(t, "--gpus", 1, "--frontier", ro / "f.csv"),
                r"ro/f.csv",
            ),
            "plan --out in a read-only folder": (
                ["plan", "--model", "opt-125m", "--gpu", GPU, "--out", ro / "plan"],
                r"ro/plan",
            ),
        }
        before = _snapshot(ro), runs.read_bytes(), params.read_bytes()
        env = {
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
            "MPLCONFIGDIR": str(mpl),
        }
        try:
            for name, (argv, pattern) in cases.items():
                res = subprocess.run(
                    [*slim, *_s(*argv)], capture_output=True, text=True, env=env, timeout=300
                )
                lines = [ln for ln in res.stderr.splitlines() if ln.strip() and "warning:" not in ln]
                assert res.returncode == 2, f"{name}: exit status {res.returncode}, stderr {res.stderr!r}"
                assert len(lines) == 1 and "Traceback" not in res.stderr, f"{name}: {res.stderr!r}"
                assert re.search(pattern, lines[0]), (name, lines[0])
                assert (_snapshot(ro), runs.read_bytes(), params.read_bytes()) == before, (
                    f"{name}: a file changed"
                )
                assert not list(free.iterdir()), name
        finally:
            ro.chmod(0o755)
