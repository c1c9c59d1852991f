"""Every command block of the README and the documentation runs as written: the blocks are extracted from
README.md and docs/*.md and run by bash in a temporary folder laid out like a checkout (``data/``, ``.venv`` and
``../shared`` reachable as they assume), in document order, a block repeated in several documents once. A block that cannot run here is skipped with its reason below; a new block must be
added to `BLOCKS`, so none is left untested by accident."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from shared_paths import RAW as SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the documents whose blocks are run: the README, then the documentation
DOCUMENTS = (README, *sorted((ROOT / "docs").glob("*.md")))


def document_blocks() -> list[str]:
    """`readme_blocks` of every document of `DOCUMENTS`, in order, a block whose first line came before left out."""
    seen, out = set(), []
    for doc in DOCUMENTS:
        for block in readme_blocks(doc.read_text(encoding="utf-8")):
            if _first(block) not in seen:
                seen.add(_first(block))
                out.append(block)
    return out


#: first line of each block -> None (run it) or the reason it is not run here
BLOCKS: dict[str, str | None] = {
    "slimlib/errors.py schema.py metrics.py io.py batchjobs.py   base: exceptions, the input-table schema, MAPE, atomic writes": (
        "the package layout, not commands"
    ),
    "bash scripts/reproduce.sh": (
        "sets up .venv and runs every notebook (minutes; helpers must not rebuild the shared venv); "
        "tests/test_cli_reproduce.py and tests/test_notebooks_run.py run `slim reproduce` in quick mode"
    ),
    "slim models": None,
    ".venv/bin/jupyter lab notebooks/": (
        "starts an interactive JupyterLab server that runs until stopped; tests/test_plotting.py checks that every "
        "notebook writes into the repository's figures/ from any working directory"
    ),
    "slim plan --model llama-2-7b --gpu h100-sxm-64gb --input-len 250 --output-len 130 520 --out plan/": None,
    "slim advise params.json --model llama-2-7b --input-len 250 --output-len 260 --slo-s 30 --epsilon 0.3": None,
    "source .venv/bin/activate": None,
    "slim plan --model llama-2-7b --gpu h100-sxm-80gb --input-len 512 --output-len 128 512 \\": (
        "needs Slurm (`sbatch`) and GPUs; tests/test_slurm_plan.py runs the same loop with a fake sbatch"
    ),
    "mkdir -p example": None,
    "slim advise example/params.json --model llama-2-7b --input-len 250 --output-len 260 --ttft-ms 2000 --tpot-ms 40 \\": None,
    "slim bench campaign --out data/engine-cpu-amx --engine-python .venv-engine/bin/python \\": (
        "the served-latency campaign on the AMX host (85 min on 2 cores, the machine to itself, on a host whose "
        "micro-benchmark matches the device `cpu-amx`); the same loop as the next block's"
    ),
    "scripts/engine_env.sh && slim bench campaign --out camp --engine-python .venv-engine/bin/python \\": (
        "the full CPU-engine campaign (hours on 2 cores; --dry-run prints the estimate, and it needs the machine to itself); "
        "scripts/test_engine.sh (run by .ci/run) runs the same plan -> bench -> ingest -> fit -> advise loop on three "
        "configurations"
    ),
}


def readme_blocks(text: str) -> list[str]:
    """Fenced blocks, and indented blocks (4+ spaces after a blank line) that start with a command."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        line = lines[i]
        if line.strip().startswith("```"):
            j = i + 1
            while not lines[j].strip().startswith("```"):
                j += 1
            blocks.append("\n".join(lines[i + 1 : j]))
            i = j + 1
            continue
        if re.match(r"^ {4,}(slim|bash|python|\(cd) ", line) and i > 0 and not lines[i - 1].strip():
            indent = len(line) - len(line.lstrip())
            j = i
            while j < len(lines) and lines[j].strip() and len(lines[j]) - len(lines[j].lstrip()) >= indent:
                j += 1
            blocks.append("\n".join(ln[indent:] for ln in lines[i:j]))
            i = j
            continue
        i += 1
    return blocks


def _first(block: str) -> str:
    """A block's name in `BLOCKS`: its first line without a trailing comment."""
    return re.split(r"\s+#\s", block.splitlines()[0].strip())[0].strip()


def test_every_readme_block_is_known():
    firsts = [_first(b) for b in document_blocks()]
    assert sorted(set(firsts)) == sorted(BLOCKS), (
        "classify each README block in BLOCKS (run it, or say why not)"
    )


def _checkout(tmp: Path) -> Path:
    """A folder laid out as the README assumes: the repository (data/, notebooks/, .venv) and ../shared."""
    repo = tmp / "repo"
    repo.mkdir()
    for name in ("data", "notebooks", "scripts"):
        (repo / name).symlink_to(ROOT / name)
    (repo / ".venv").symlink_to(Path(sys.prefix))  # the environment running the tests
    (tmp / "shared").mkdir()
    (tmp / "shared" / "data").symlink_to(SHARED_DATA)
    # the user's own files that the commands name (runs.csv, grid.csv, params.json): real public runs of one GPU
    rows = [ln for i, ln in enumerate((ROOT / "data" / "llmib-runs.csv").read_text().splitlines())
            if i == 0 or ",mi250-gcd," in ln]  # fmt: skip
    (repo / "runs.csv").write_text("\n".join(rows) + "\n")
    return repo


def test_readme_commands_run_as_written(tmp_path):
    if not SHARED_DATA.is_dir():
        pytest.skip(f"the raw mirror {SHARED_DATA} is not here (the worked example reads it)")
    repo = _checkout(tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env["PATH"]])
    env["MPLBACKEND"] = "Agg"
    ran = []
    setup = (
        "set -euo pipefail\n"
        "[ -f grid.csv ] || cut -d, -f6,9-12 runs.csv > grid.csv\n"  # model, tensor_parallel, B, IL, OL
        "[ -f params.json ] || slim fit runs.csv --out params.json > /dev/null 2>&1\n"
    )
    for block in document_blocks():
        first = _first(block)
        if BLOCKS[first] is not None:
            continue
        script = setup + block + "\n"
        proc = subprocess.run(
            ["bash", "-c", script], cwd=repo, env=env, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, (
            f"documentation block `{first}` failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        ran.append(first)
    assert len(ran) == sum(v is None for v in BLOCKS.values())
    # what the blocks were to produce
    assert (repo / "plan" / "run_plan.sh").is_file()
    assert (repo / "example" / "params.json").is_file() and (repo / "example" / "mi300x.json").is_file()
    assert (repo / "pred.csv").is_file()
