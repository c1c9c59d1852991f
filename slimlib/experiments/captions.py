"""Ready captions for every output in `figures/`, generated into `figures/CAPTIONS.md` from one registry.

Naming rule: an output that reproduces (or stands in for) a paper item is named ``figNN_`` / ``tableNN_`` with the
paper's number; everything else carries a topic prefix (``eval_``, ``bca_``, ``kernels_``, ...). Each registry
entry gives the paper item, the status (one of "reproduced", "proxy (what it stands in for)", "extension (not in
the paper)"), the caption and the data source with GPU and engine version.

To add outputs (e.g. a new notebook's), add one `Caption` per output stem (file name without extension) to
`CAPTIONS` below, then rerun the notebook: its last cell calls `write_captions(figures_dir)`. `tests/test_captions.py`
fails while a file in `figures/` has no entry, or an entry's name reuses a paper number for another item.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from slimlib.errors import DataError
from slimlib.io import write_text

#: Paper items by output-name prefix number (SLIM paper: Figs. 1-8, Tables I-II).
PAPER_FIGURES = {f"fig{n:02d}": f"Fig. {n}" for n in range(1, 9)}
PAPER_TABLES = {"table01": "Table I", "table02": "Table II"}
STATUSES = ("reproduced", "proxy", "extension")
CAPTIONS_FILE = "CAPTIONS.md"
_PAPER_PREFIX = re.compile(r"^(fig\d\d|table\d\d)_")

# Data sources (GPU and engine version named in each).
MEMGAP_ONLINE = (
    "vLLMBatchingMemoryGap public measurements (Recasens et al., arXiv:2503.08311, commit a918634), online "
    "`benchmark_serving` runs: vLLM 0.5.2 on one H100 SXM 64 GB; `data/memgap-online.csv`"
)
MEMGAP_OFFLINE = (
    "vLLMBatchingMemoryGap public measurements (arXiv:2503.08311, commit a918634), offline batch runs: vLLM 0.5.2 "
    "on one H100 SXM 64 GB; `data/memgap-offline.csv`"
)
MEMGAP_TELEMETRY = (
    "vLLMBatchingMemoryGap `nvidia-smi dmon` telemetry of the online runs (arXiv:2503.08311, commit a918634): "
    "vLLM 0.5.2 on one H100 SXM 64 GB; `data/memgap-telemetry.csv`"
)
VIDUR = (
    "Vidur operator profiles (github.com/microsoft/vidur, commit e2d00e9): A100-SXM 80 GB, FlashAttention "
    "backend, hidden size 8192 with 64/8 query/KV heads at tensor parallelism 2 (CodeLlama-34B shapes); "
    "`data/vidur-attention.csv`, `data/vidur-mlp.csv`"
)
KIT = (
    "slimlib GPU-kit campaigns (`data/kit-*.csv`): slimlib's minimal static-batch PyTorch engine with random "
    "weights, not vLLM; GPU, driver, CUDA and torch version as printed on the figure from the campaign manifest"
)
EVAL = f"{MEMGAP_ONLINE}; {MEMGAP_OFFLINE}"


@dataclass(frozen=True)
class Caption:
    """One output's caption: paper item it corresponds to ("" if none), status, caption text, data source."""

    paper_item: str
    status: str
    text: str
    source: str


_KIT_PROXY = "proxy (slimlib's PyTorch engine stands in for vLLM; same Nsight Compute metrics as the paper)"

#: Output stem -> caption. Keep one entry per stem written to figures/.
CAPTIONS: dict[str, Caption] = {
    # notebook 01
    "fig01_plateau": Caption(
        "Fig. 1",
        "reproduced (other models and vLLM version than the paper)",
        "Throughput plateau: (a) total-token throughput and (b) mean inter-token latency of online serving "
        "against the batch-size cap; (c) end-to-end latency of one offline batch. Circles mark the knee, "
        "crosses the first cap at which the KV cache is full or vLLM preempts.",
        f"{MEMGAP_ONLINE}; {MEMGAP_OFFLINE}",
    ),
    "fig01_plateau_summary": Caption(
        "Fig. 1",
        "reproduced (numbers behind the figure)",
        "Knee, throughput at the knee as a share of the maximum, ITL growth to the knee and first KV-full cap "
        "per model.",
        MEMGAP_ONLINE,
    ),
    # notebook 02
    "fig02_saturation": Caption(
        "Fig. 2",
        "reproduced (batch-size and output-length panels; the public data has no input-length sweep)",
        "Throughput saturation against the batch-size cap for output lengths 130-520, one panel per model; "
        "circles mark each curve's knee.",
        MEMGAP_ONLINE,
    ),
    "fig02_active_context": Caption(
        "Fig. 2",
        "reproduced (active-context view of Eq. 3)",
        "Throughput against the mean active context A = C (IL + OL/2) (Eq. 3): (a) online fixed-length runs, "
        "(b) offline batch sweeps.",
        f"{MEMGAP_ONLINE}; {MEMGAP_OFFLINE}",
    ),
    "fig02_knees": Caption(
        "Fig. 2",
        "reproduced (numbers behind the figure)",
        "Knee per model and output length, with the maximum throughput and the active context at the knee.",
        MEMGAP_ONLINE,
    ),
    # notebook 03
    "fig03_prefill_decode": Caption(
        "Fig. 3",
        "reproduced (batch-size panel only; no IL/OL sweep with valid timings in the public data)",
        "Prefill/decode split against the batch size (IL = 161, OL = 338): (a) decode share of "
        "prefill + decode time, (b) absolute phase times.",
        MEMGAP_OFFLINE,
    ),
    "fig03_prefill_decode_summary": Caption(
        "Fig. 3",
        "reproduced (numbers behind the figure)",
        "Prefill and decode time and shares of the large-batch summary runs, one per model.",
        MEMGAP_OFFLINE,
    ),
    # notebook 04
    "fig04_gpu_utilization_proxy": Caption(
        "Fig. 4",
        "proxy (nvidia-smi duty cycles and board power stand in for the paper's Tensor-Core, SM-issue and "
        "DRAM-read counters)",
        "GPU activity against the batch-size cap: (a) SM duty cycle (share of time any kernel runs), "
        "(b) memory duty cycle (share of time device memory is read or written), (c) mean board power. Duty "
        "cycles, not the paper's counters; clock-throttled runs are flagged.",
        MEMGAP_TELEMETRY,
    ),
    # notebook 05
    "fig05_decode_breakdown": Caption(
        "Fig. 5",
        "proxy (Vidur per-operator timings on an A100 stand in for vLLM kernel shares on an H100)",
        "Decode-step time by operator class: (a) attention, dense GEMMs and other operators against the batch "
        "size at one KV context, (b) attention share against batch size and context.",
        VIDUR,
    ),
    "fig06_attention_roofline": Caption(
        "Fig. 6",
        "proxy (analytic FLOPs and bytes over measured Vidur times stand in for Nsight Compute counters)",
        "Decode attention on the A100 roofline: (a) arithmetic intensity against achieved FLOP/s, "
        "(b) achieved DRAM bandwidth as a share of peak against the KV context.",
        VIDUR,
    ),
    "table01_attention_roofline": Caption(
        "Table I",
        "proxy (analytic FLOPs and bytes over measured Vidur times stand in for Nsight Compute counters)",
        "Attention kernel per batch size and KV context: time, arithmetic intensity, achieved FLOP/s and DRAM "
        "bandwidth. Markdown/LaTeX show a short subset in the paper's shape; the CSV holds every row.",
        VIDUR,
    ),
    # notebook 06
    "table02_mape": Caption(
        "Table II",
        "reproduced (other models, vLLM version and scenarios' lengths than the paper)",
        "Throughput and latency MAPE of every method in every scenario (long form) with bootstrap 95% "
        "intervals over test configurations and the paired comparison with faithful SLIM on the same rows "
        "(mean difference, paired-bootstrap and Wilcoxon signed-rank p-values).",
        EVAL,
    ),
    "table02_mape_throughput": Caption(
        "Table II",
        "reproduced (in the paper's shape: scenarios as rows, methods as columns)",
        "Throughput MAPE (%) with bootstrap 95% interval and the Wilcoxon p-value against faithful SLIM; best "
        "per scenario in bold.",
        EVAL,
    ),
    "table02_mape_latency": Caption(
        "Table II",
        "reproduced (in the paper's shape; online latency is the in-engine request time by Little's law)",
        "E2E-latency MAPE (%) with bootstrap 95% interval and the Wilcoxon p-value against faithful SLIM; best "
        "per scenario in bold.",
        EVAL,
    ),
    "eval_curves": Caption(
        "",
        "extension (not in the paper)",
        "Measured test throughput (filled) and training points (open) of selected curves with every method's "
        "prediction on a dense batch-size grid.",
        EVAL,
    ),
    "eval_parity": Caption(
        "",
        "extension (not in the paper)",
        "Predicted against measured throughput of every test row, one panel per method, coloured by scenario.",
        EVAL,
    ),
    "eval_slim_params": Caption(
        "",
        "extension (not in the paper)",
        "Fitted SLIM parameters (faithful and extended model) per scenario and fold: estimate, standard error "
        "and normal-approximation 95% interval, with units; parameters at a bound are flagged.",
        EVAL,
    ),
    # notebook 07
    "bca_curves": Caption(
        "",
        "extension (not in the paper): figure of the SLIM-BCA evaluation of Sec. VII-B1",
        "Measured throughput and E2E curves per model and output length with the tight-SLO recommendation of "
        "faithful SLIM-BCA (+, Eq. 13 on the paper model) and of the project's variant (x, extended model with "
        "KV-memory constraint); squares mark the measured best configuration.",
        MEMGAP_ONLINE,
    ),
    "bca_recommendations": Caption(
        "Sec. VII-B1",
        "reproduced (faithful SLIM-BCA) and extension (project variant), labelled per row",
        "B_cap per model, output length, SLO and advisor variant against the measured best configuration: "
        "quality (throughput at B_cap / best, %), SLO violation, measured efficiency.",
        MEMGAP_ONLINE,
    ),
    "bca_summary": Caption(
        "Sec. VII-B1",
        "reproduced (faithful SLIM-BCA) and extension (project variant), labelled per row",
        "Per advisor variant and SLO: mean recommendation quality and the MAPE of the predicted throughput at "
        "B_cap, each with a bootstrap 95% interval over curves, and the Wilcoxon p-value of the paired "
        "comparison with faithful SLIM-BCA.",
        MEMGAP_ONLINE,
    ),
    "bca_effort": Caption(
        "Sec. VII-B2",
        "reproduced (project variant of SLIM-BCA)",
        "Profiling effort (runs, GPU-seconds) against recommendation quality for k calibration runs per curve.",
        MEMGAP_ONLINE,
    ),
    "bca_quality_vs_effort": Caption(
        "",
        "extension (not in the paper): figure of the Sec. VII-B2 evaluation",
        "Mean and worst recommendation quality against profiling GPU-hours for k calibration runs per curve.",
        MEMGAP_ONLINE,
    ),
    "bca_memory": Caption(
        "Sec. VII-B3",
        "reproduced (faithful and project variants, labelled per row)",
        "KV-cache memory B_cap needs against vLLM's default allocation, loose SLO.",
        MEMGAP_ONLINE,
    ),
    "bca_memory_saved": Caption(
        "",
        "extension (not in the paper): figure of the Sec. VII-B3 evaluation",
        "Avoidable KV-cache memory (default allocation minus the blocks B_cap needs) per model and output "
        "length, loose SLO, both advisor variants.",
        MEMGAP_ONLINE,
    ),
    # notebook 08 (written only when kit tables exist)
    "fig04_kit_decode_counters": Caption(
        "Fig. 4",
        _KIT_PROXY,
        "Duration-weighted tensor-pipe activity, SM issue and DRAM read bandwidth over a whole decode step.",
        KIT,
    ),
    "fig05_kit_kernel_shares": Caption(
        "Fig. 5", _KIT_PROXY, "Decode-step time by kernel category, sorted by active context.", KIT
    ),
    "fig06_kit_attention_roofline": Caption(
        "Fig. 6", _KIT_PROXY, "The decode attention kernel on the roofline of the profiled GPU.", KIT
    ),
    "table01_kit_attention_roofline": Caption(
        "Table I",
        _KIT_PROXY,
        "Attention kernel per profiled point: time, arithmetic intensity, FLOP/s and DRAM bandwidth.",
        KIT,
    ),
    "fig07_kit_cache_hit_rates": Caption(
        "Fig. 7", _KIT_PROXY, "L1/TEX and L2 hit rates of the attention kernel against active context.", KIT
    ),
    "fig08_kit_stalls_occupancy": Caption(
        "Fig. 8",
        _KIT_PROXY,
        "Long-scoreboard stalls and occupancy of the attention kernel against active context.",
        KIT,
    ),
    "fig07_fig08_kit_attention_memory": Caption(
        "Figs. 7-8", _KIT_PROXY, "Numbers behind the kit's Figs. 7 and 8.", KIT
    ),
}


def paper_item_of(stem: str) -> str | None:
    """The paper item an output name claims by its prefix (``fig06_...`` -> "Fig. 6"), or None."""
    m = _PAPER_PREFIX.match(stem)
    if not m:
        return None
    key = m.group(1)
    return PAPER_FIGURES.get(key) or PAPER_TABLES.get(key) or key


def name_problems(stem: str, caption: Caption | None = None) -> list[str]:
    """Why `stem` (with its registry entry) breaks the naming rule: a paper number that is not the item it is
    captioned as, or a paper item without the paper's prefix; empty when it is fine."""
    caption = caption or CAPTIONS.get(stem)
    claimed = paper_item_of(stem)
    problems = []
    if claimed and not claimed.startswith(("Fig. ", "Table ")):
        problems.append(f"{stem}: prefix {claimed!r} is not a paper item (paper: Figs. 1-8, Tables I-II)")
    if caption is None:
        return problems
    if not caption.status.startswith(STATUSES):
        problems.append(f"{stem}: status {caption.status!r} must start with one of {STATUSES}")
    if claimed and claimed.startswith(("Fig. ", "Table ")):
        first = caption.paper_item.replace("Figs. ", "Fig. ").split("-")[0].strip()
        if first != claimed:
            problems.append(
                f"{stem}: named {claimed} but captioned as {caption.paper_item or 'no paper item'}"
            )
    elif caption.paper_item.startswith(("Fig. ", "Figs. ", "Table ")):
        problems.append(
            f"{stem}: reproduces {caption.paper_item} but lacks the paper's figNN_/tableNN_ prefix"
        )
    return problems


def output_stems(figures_dir: str | Path) -> dict[str, list[str]]:
    """Stem -> sorted extensions of the output files in `figures_dir` (CAPTIONS.md and hidden files excluded)."""
    folder = Path(figures_dir)
    if not folder.is_dir():
        raise DataError(
            f"figures folder {str(folder)!r} does not exist; run the notebooks first (slim reproduce)"
        )
    stems: dict[str, list[str]] = {}
    for p in sorted(folder.iterdir()):
        if p.is_file() and p.name != CAPTIONS_FILE and not p.name.startswith("."):
            stems.setdefault(p.stem, []).append(p.suffix.lstrip("."))
    return {k: sorted(v) for k, v in sorted(stems.items())}


def render_captions(stems: dict[str, list[str]], registry: dict[str, Caption] | None = None) -> str:
    """The text of CAPTIONS.md for the outputs `stems` (stem -> extensions)."""
    registry = CAPTIONS if registry is None else registry
    lines = [
        "# Captions of the generated figures and tables",
        "",
        "Generated by `slimlib.experiments.captions` from its registry (do not edit by hand). Names: `figNN_` / "
        "`tableNN_` reproduce or stand in for the paper's item of that number; other outputs carry a topic "
        "prefix. Status: *reproduced*, *proxy* (what it stands in for) or *extension* (not in the paper).",
        "",
    ]
    for stem, exts in stems.items():
        lines.append(f"## {stem}")
        lines.append("")
        lines.append(f"Files: {', '.join(f'`{stem}.{e}`' for e in exts)}")
        lines.append("")
        c = registry.get(stem)
        if c is None:
            lines += ["", "**Caption missing**: add an entry to `slimlib.experiments.captions.CAPTIONS`.", ""]
            continue
        lines += [
            f"Paper item: {c.paper_item or 'none'}. Status: {c.status}.",
            "",
            c.text,
            "",
            f"Data: {c.source}.",
            "",
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


def write_captions(figures_dir: str | Path = "figures") -> Path | None:
    """Write `figures_dir/CAPTIONS.md` for the outputs present there (atomically) and return its path; write
    nothing and return None when the folder holds no output (a notebook that drew nothing adds no file)."""

    if not Path(figures_dir).is_dir():
        return None
    stems = output_stems(figures_dir)
    if not stems:
        return None
    return write_text(Path(figures_dir) / CAPTIONS_FILE, render_captions(stems))


def check_captions(figures_dir: str | Path = "figures") -> list[str]:
    """Problems with `figures_dir`: outputs without a registry entry, names breaking the naming rule, and a
    CAPTIONS.md that does not list exactly the outputs present; empty when all is well."""
    stems = output_stems(figures_dir)
    problems = [
        f"{s}: no caption in slimlib.experiments.captions.CAPTIONS" for s in stems if s not in CAPTIONS
    ]
    for s in stems:
        problems += name_problems(s)
    path = Path(figures_dir) / CAPTIONS_FILE
    if not path.is_file():
        problems.append(f"{path} is missing; run write_captions")
    else:
        listed = re.findall(r"^## (\S+)$", path.read_text(encoding="utf-8"), flags=re.M)
        if listed != list(stems):
            extra, lacking = sorted(set(listed) - set(stems)), sorted(set(stems) - set(listed))
            problems.append(f"{path}: lists {extra} without files and lacks {lacking}; rerun write_captions")
    return problems
