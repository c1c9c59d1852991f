"""Parser of Argonne's LLM-Inference-Bench results (``../shared/data/llm-inference-bench/Plots/All_results.csv``).

Chitty-Venkata et al., "LLM-Inference-Bench: Inference Benchmarking of Large Language Models on AI Accelerators",
arXiv:2411.00136 (BSD-3-Clause). Each row is one static batch of ``B`` prompts with ``IL = OL = L`` tokens
(``Input Output Length``), ``Latency`` the seconds for the whole batch, ``Throughput = B (IL + OL) / Latency``.

Two tables (`build_llmib_tables`):

* ``llmib-runs``: one row per measured configuration, with ``model`` and ``gpu`` as registry names and the
  ``tensor_parallel`` degree (devices the model is split over).
* ``llmib-exclusions``: every other data row of the file, with its reason:
  ``llama_cpp_per_sequence`` (llama.cpp reports a per-sequence throughput ``2L / Latency``, not comparable),
  ``duplicate_repeat`` (a later repeat of a configuration; the first occurrence is kept, the detail gives the
  latency difference), ``exceeds_context`` (``IL + OL`` beyond the model's context window),
  ``throughput_mismatch`` (``Throughput`` differs from ``B (IL + OL) / Latency`` by more than 0.1 %) and
  ``below_roofline`` (a latency shorter than the weight reads alone allow:
  ``OL x active weight bytes / (TP x BW)`` at the registry's peak bandwidth) and ``above_larger_batch`` (a
  latency more than `LARGER_BATCH_RTOL` above that of a larger batch of the same configuration: a static batch of
  ``B' > B`` prompts runs every step a batch of ``B`` does with more sequences in it, so it cannot finish sooner;
  on the file these are the first batch of a sweep, ``B = 1``, 22-126% above ``B = 16``, a warm-up the run kept).

Which device an "AMD MI250 GPU" is. The MI250 card carries two 64 GB dies that ROCm exposes as two GPUs. The
file's ``Num of Hardware`` counts cards, not dies, and the runs used tensor parallel ``2 x Num``:
(1) Mixtral-8x7B (87 GiB of fp16 weights) runs with ``Num of Hardware = 1``: it does not fit one 64 GB die, it
fits the 128 GB card; (2) Llama-2-70B and Llama-3-70B (128.5 and 131.4 GiB) run with ``Num = 2``: they do not
fit two dies (128 GiB) and fit two cards; (3) the upstream MI250 run script
(``vLLM/MI250/run-throughput-bench.sh``) loops ``--tensor-parallel-size`` over 4 and 8, while the file's MI250
rows have ``Num of Hardware`` 2 and 4 (besides 1). `mi250_evidence` computes (1) and (2) from the registry.
So MI250 rows get ``gpu = mi250-gcd`` and ``tensor_parallel = 2 x Num``; MI300X rows ``gpu = mi300x`` and
``tensor_parallel = Num``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from slimlib.errors import DataError, UnknownNameError
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu

LLMIB_NAME = "llm-inference-bench"
RESULTS = Path("Plots") / "All_results.csv"
RAW_COLUMNS = (
    "Hardware", "Num of Hardware", "Framework", "Model", "Input Output Length", "Batch Size", "Latency",
    "Throughput",
)  # fmt: skip

#: raw ``Hardware`` -> (gpu name, dies per counted device). Registry names for AMD; the others are not in the
#: GPU registry and keep a plain slug.
HARDWARE = {
    "AMD MI250 GPU": ("mi250-gcd", 2),
    "AMD MI300X GPU": ("mi300x", 1),
    "Intel Max 1550": ("intel-max-1550", 1),
    "Intel PVC GPU": ("intel-pvc", 1),
    "Habana Gaudi2": ("gaudi2", 1),
    "SambaNova SN40L": ("sn40l", 1),
}
KEYS = ("hardware", "n_hardware", "framework", "hf_id", "input_len", "batch_size")
THROUGHPUT_RTOL = 1e-3
#: how far a run's latency may lie above a larger batch's of its configuration (``above_larger_batch``): 4x the
#: file's largest latency difference between repeats of one configuration (2.3%, ``duplicate_repeat`` details)
LARGER_BATCH_RTOL = 0.10

RUN_COLUMNS = (
    "source_line", "hardware", "n_hardware", "framework", "hf_id", "model", "gpu", "gpu_in_registry",
    "tensor_parallel", "batch_size", "input_len", "output_len", "e2e_s", "throughput_tok_s", "n_repeats",
)  # fmt: skip
EXCLUSION_COLUMNS = (
    "source_line", "hardware", "n_hardware", "framework", "hf_id", "batch_size", "input_len", "reason", "detail",
)  # fmt: skip
REASONS = (
    "llama_cpp_per_sequence", "duplicate_repeat", "exceeds_context", "throughput_mismatch", "below_roofline",
    "above_larger_batch",
)  # fmt: skip


def read_results(path: str | Path) -> pd.DataFrame:
    """The raw results file with checked columns, renamed, and ``source_line`` (1-based line in the file)."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: LLM-Inference-Bench results file not found; point --raw at ../shared/data")
    raw = pd.read_csv(p)
    missing = [c for c in RAW_COLUMNS if c not in raw.columns]
    if missing:
        raise DataError(
            f"{p}: missing column(s) {missing}; expected the upstream Plots/All_results.csv layout"
        )
    df = raw.rename(
        columns={
            "Hardware": "hardware", "Num of Hardware": "n_hardware", "Framework": "framework", "Model": "hf_id",
            "Input Output Length": "input_len", "Batch Size": "batch_size", "Latency": "e2e_s",
            "Throughput": "throughput_tok_s",
        }
    )  # fmt: skip
    df.insert(0, "source_line", np.arange(2, len(df) + 2))
    for c in ("n_hardware", "input_len", "batch_size", "e2e_s", "throughput_tok_s"):
        bad = pd.to_numeric(df[c], errors="coerce").isna()
        if bad.any():
            line = int(df.loc[bad.idxmax(), "source_line"])
            raise DataError(f"{p}, line {line}: field {c!r} is not a number; fix or remove the row")
    unknown = sorted(set(df["hardware"]) - set(HARDWARE))
    if unknown:
        raise DataError(f"{p}: unknown Hardware value(s) {unknown}; add them to slimlib.data.llmib.HARDWARE")
    df["output_len"] = df["input_len"]
    return df


def _arch_or_none(hf_id: str):
    try:
        return get_architecture(hf_id)
    except UnknownNameError:
        return None


def mi250_evidence() -> pd.DataFrame:
    """Weights of the models the file runs on MI250 with ``Num of Hardware`` 1 and 2, against one die and the card.

    Columns: model, n_hardware, weight_gib, fits_dies (``Num`` dies of 64 GB), fits_cards (``Num`` cards of 128 GB).
    """

    die = get_gpu("mi250-gcd").mem_bytes
    rows = []
    for name, num in (("mixtral-8x7b", 1), ("llama-2-70b", 2), ("llama-3-70b", 2)):
        w = serving_config(get_architecture(name)).weights  # vLLM's defaults: the config's 16-bit weights
        rows.append({"model": name, "n_hardware": num, "weight_gib": w / 2**30,
                     "fits_dies": w < num * die, "fits_cards": w < num * 2 * die})  # fmt: skip
    return pd.DataFrame(rows)


def _lower_bound_s(df: pd.DataFrame) -> np.ndarray:
    """``OL x active weight bytes / (TP x BW)`` per row, NaN where the model or GPU is not in a registry."""

    out = np.full(len(df), np.nan)
    for i, (hf, gpu, tp, ol, reg) in enumerate(
        zip(
            df["hf_id"],
            df["gpu"],
            df["tensor_parallel"],
            df["output_len"],
            df["gpu_in_registry"],
            strict=True,
        )
    ):
        a = _arch_or_none(hf)
        if a is None or not reg:
            continue
        out[i] = ol * a.active_params * a.weight_bytes / (tp * get_gpu(gpu).mem_bw)
    return out


def _larger_batch_min(df: pd.DataFrame) -> pd.DataFrame:
    """Per row, the shortest latency of a larger batch of its configuration (`KEYS` but the batch size) among
    `df`'s rows, and the batch size that has it, ``(NaN, NaN)`` for a configuration's largest batch."""
    config = [k for k in KEYS if k != "batch_size"]
    out = pd.DataFrame({"e2e": np.nan, "batch": np.nan}, index=df.index)
    for _, g in df.groupby(config, sort=False):
        g = g.sort_values("batch_size", kind="mergesort")
        b, e = g["batch_size"].to_numpy(float), g["e2e_s"].to_numpy(float)
        for i, idx in enumerate(g.index):
            later = np.flatnonzero(b > b[i])
            if later.size:
                j = later[np.argmin(e[later])]
                out.loc[idx] = (e[j], b[j])
    return out


def parse_results(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs, exclusions) from the results file; every data row lands in exactly one of them."""
    df = read_results(path)
    df["gpu"] = df["hardware"].map(lambda h: HARDWARE[h][0])
    df["tensor_parallel"] = df["n_hardware"] * df["hardware"].map(lambda h: HARDWARE[h][1])
    df["gpu_in_registry"] = df["hardware"].str.startswith("AMD")
    archs = {h: _arch_or_none(h) for h in sorted(set(df["hf_id"]))}
    df["model"] = df["hf_id"].map(lambda h: archs[h].name if archs[h] is not None else h)
    reason = pd.Series("", index=df.index, dtype=object)
    detail = pd.Series("", index=df.index, dtype=object)

    def flag(mask, why, text):
        mask = mask & (reason == "")
        reason[mask] = why
        detail[mask] = text[mask] if isinstance(text, pd.Series) else text

    flag(df["framework"] == "llama.cpp", "llama_cpp_per_sequence",
         "llama.cpp's Throughput is per sequence (2L / Latency), not B (IL + OL) / Latency")  # fmt: skip
    first = df[reason == ""].groupby(list(KEYS), sort=False)["source_line"].transform("min")
    firsts = df.set_index("source_line")
    dup = pd.Series(False, index=df.index)
    dup[first.index] = first.to_numpy() != df.loc[first.index, "source_line"].to_numpy()
    text = pd.Series("", index=df.index, dtype=object)
    for i in np.flatnonzero(dup.to_numpy()):
        j = int(first.loc[df.index[i]])
        ref = float(firsts.loc[j, "e2e_s"])
        text.iloc[i] = (
            f"repeat of line {j}; latency {100 * (df['e2e_s'].iloc[i] / ref - 1):+.2f}% vs that run"
        )
    flag(dup, "duplicate_repeat", text)
    ctx = df["hf_id"].map(lambda h: archs[h].max_position if archs[h] is not None else 0).astype(float)
    over = (ctx > 0) & (df["input_len"] + df["output_len"] > ctx)
    flag(over, "exceeds_context", "IL + OL = " + (2 * df["input_len"]).astype(str) + " > context window "
         + ctx.astype(int).astype(str))  # fmt: skip
    calc = df["batch_size"] * (df["input_len"] + df["output_len"]) / df["e2e_s"]
    rel = (df["throughput_tok_s"] / calc - 1).abs()
    flag(rel > THROUGHPUT_RTOL, "throughput_mismatch",
         "Throughput / (B (IL + OL) / Latency) - 1 = " + rel.map(lambda v: f"{v:.3g}"))  # fmt: skip
    bound = pd.Series(_lower_bound_s(df), index=df.index)
    flag(bound > df["e2e_s"], "below_roofline",
         "latency below the weight-read bound " + bound.map(lambda v: f"{v:.4g} s"))  # fmt: skip
    larger = _larger_batch_min(df[reason == ""]).reindex(df.index)
    flag(df["e2e_s"] > (1 + LARGER_BATCH_RTOL) * larger["e2e"], "above_larger_batch",
         "latency " + (100 * (df["e2e_s"] / larger["e2e"] - 1)).map(lambda v: f"{v:+.1f}%")
         + " vs batch " + larger["batch"].map(lambda v: f"{v:g}") + " of the same configuration")  # fmt: skip

    keep = reason == ""
    runs = df[keep].copy()
    counts = (
        df[keep | (reason == "duplicate_repeat")]
        .groupby(list(KEYS), sort=False)["source_line"]
        .transform("size")
    )
    runs["n_repeats"] = counts[keep].astype(int)
    runs = runs.sort_values(["hardware", "hf_id", "tensor_parallel", "input_len", "batch_size", "source_line"],
                            kind="mergesort")  # fmt: skip
    exc = df[~keep].assign(reason=reason[~keep], detail=detail[~keep]).sort_values("source_line")
    return runs[list(RUN_COLUMNS)].reset_index(drop=True), exc[list(EXCLUSION_COLUMNS)].reset_index(drop=True)


def build_llmib_tables(root: str | Path) -> tuple[dict[str, pd.DataFrame], list[Path]]:
    """The ``llmib-runs`` and ``llmib-exclusions`` tables from the mirror folder `root`, and the raw files read."""
    r = Path(root)
    runs, exc = parse_results(r / RESULTS)
    files = [r / RESULTS] + [f for f in (r / "PROVENANCE.md", r / "LICENSE") if f.is_file()]
    return {"llmib-runs": runs, "llmib-exclusions": exc}, files
