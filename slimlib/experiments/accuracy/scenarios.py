"""Train/validation scenarios of the SLIM evaluation (paper Sec. VII-A, Table II) over the tidy tables in `data/`.

Each scenario is a list of folds (train table, test table); a method is fitted once per fold and its errors are
pooled over the test rows of all folds. Splits depend only on the configuration columns (and, for the pre-knee rule,
on the training curve's own throughput profile), never on a method's validation errors.

Ground truth
------------
* Throughput: the measured total-token throughput ``throughput_tok_s`` in every scenario.
* Latency (``e2e_s``):
  - offline runs (``memgap-offline``, batch of B equal requests, all prefills then all decodes): the logged batch
    E2E ``prefill_s + decode_s``, the quantity of SLIM Eq. 5.
  - online runs (``memgap-online``, advisor family, 2000 requests at rate inf): the benchmark has no E2E field and
    its TTFT is dominated by time in the wait queue (~1000 waiting requests on average). We use the mean in-engine
    residence time from Little's law, ``e2e_s = mean_running_batch / request_throughput_req_s``: the time a request
    spends in the running batch, excluding the queue. It is the counterpart of a batch E2E for the batch that
    actually ran (which is smaller than the cap B where the KV cache or the token budget binds).
* LLMVisor-Agg inputs (``prefill_ms``, the TTFT where a table has no other, and ``mean_itl_ms``): offline,
  derived from the logs as prefill = prefill_s and ITL = decode_s / n_decode_steps (no queueing; the logged
  prefill is the engine's, so offline rows carry no client TTFT). Online, ITL is the
  measured mean ITL; the measured mean TTFT is queueing, so LLMVisor-Agg's prefill is a substitute (``prefill_ms``):
  one engine step (= the mean ITL), because under chunked prefill a 242/250-token prompt is prefilled within one
  mixed step of the 512-token budget.
* Served TTFT and TPOT (``mean_ttft_ms``, ``mean_tpot_ms`` and the ``SERVED_TRUTH`` percentiles, fitted and scored
  as a request of the row's ``client`` sees them): memgap online (a burst of ``num_prompts`` = 2000 requests) and
  the AMX host's campaign (a closed loop of B clients). The engine study's CPU campaign has none: its servers cached
  prefixes and its prompts repeat across runs, so its TTFTs time part of their prefill (its TTFT is LLMVisor-Agg's
  ``prefill_ms`` only, as before).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from slimlib.data import available, load
from slimlib.data.engine_offline import COMMITTED as OFFLINE_DIR
from slimlib.data.engine_offline import offline_medians, read_engine_offline
from slimlib.errors import DataError, UnknownNameError, close_matches_message
from slimlib.experiments.characterization.knees import LINEAR_GAIN, linear_regime
from slimlib.model import equations as eq
from slimlib.model.memory import DEFAULT_BLOCK_SIZE
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import GIB
from slimlib.registry.host_cpu import HOST_CPU_KV_SPACE_GIB
from slimlib.registry.vllm_flags import CPU_OFFLINE_BATCHED_TOKENS, CPU_SERVER_BATCHED_TOKENS

#: the served latencies a scenario table carries where its source measured them (ms): mean TPOT and the
#: requests' percentiles (`slimlib.model.served`)
SERVED_TRUTH = (
    "mean_tpot_ms", *(f"p{q}_{m}_ms" for m in ("ttft", "tpot") for q in (50, 90, 99)),
)  # fmt: skip
#: columns of every scenario table (``prefill_ms``: the prefill time LLMVisor-Agg is fitted to, where it is not
#: the measured TTFT; ``client``, ``num_prompts``: how the requests reached the engine, `slimlib.model.served`)
COLUMNS = (
    "model", "gpu", "batch_size", "input_len", "output_len", "throughput_tok_s", "e2e_s", "mean_ttft_ms",
    "mean_itl_ms", "prefill_ms", *SERVED_TRUTH, "gpu_blocks", "block_size", "max_num_batched_tokens",
    "max_num_seqs", "chunked_prefill", "static_batch", "client", "num_prompts", "source", "curve",
)  # fmt: skip
#: the columns every source of a scenario table gives (the others are empty where it has none)
REQUIRED = ("model", "gpu", "batch_size", "input_len", "output_len", "throughput_tok_s", "e2e_s", "source")
OL_TRAIN = (130, 260, 390)
OL_TEST = 520
MODEL_TRANSFER_OL = 390  # closest to the paper's OL = 384
LARGEST = "llama-2-13b"
SMALLER = ("opt-1.3b", "opt-2.7b", "llama-2-7b")


@dataclass(frozen=True)
class Fold:
    """One fit: a training table and the table it is validated on."""

    label: str
    train: pd.DataFrame
    test: pd.DataFrame


@dataclass(frozen=True)
class Scenario:
    """A named train/validation design; `folds` is empty when the data for it do not exist (`reason` says why)."""

    name: str
    description: str
    throughput_truth: str
    latency_truth: str
    folds: list[Fold] = field(default_factory=list)
    reason: str = ""

    @property
    def available(self) -> bool:
        return bool(self.folds)

    @property
    def n_train(self) -> int:
        return int(sum(len(f.train) for f in self.folds))

    @property
    def n_test(self) -> int:
        return int(sum(len(f.test) for f in self.folds))


# ---------------------------------------------------------------------------------------------------------------
# Ground-truth tables
# ---------------------------------------------------------------------------------------------------------------
def online_runs(online: pd.DataFrame, family: str = "advisor") -> pd.DataFrame:
    """Runs of one online family that measure serving: one server, no profiler, at least one completed request."""
    df = online[
        (online["family"] == family)
        & (online["n_replicas"] == 1)
        & (online["profiler"] == "none")
        & (online["completed"] > 0)
    ]
    if df.empty:
        raise DataError(f"no single-replica, unprofiled runs of family {family!r} in the online table")
    return df


def cpu_kv_blocks(models: pd.Series) -> np.ndarray:
    """KV blocks of the CPU campaign per row of `models`: its KV space (``VLLM_CPU_KVCACHE_SPACE``,
    `slimlib.registry.host_cpu`) in blocks of each model's resolved serving configuration (vLLM's defaults)."""
    names = [str(m) for m in models]
    space = HOST_CPU_KV_SPACE_GIB * GIB
    blocks = {m: serving_config(get_architecture(m)).blocks_in(space) for m in set(names)}
    return np.array([blocks[m] for m in names], dtype=float)


def in_engine_latency_s(runs: pd.DataFrame) -> pd.Series:
    """Mean time a request spends in the running batch, by Little's law: mean running requests / request
    throughput (excludes the wait queue). A run without either quantity is an error naming it."""
    e2e = runs["mean_running_batch"].astype(float) / runs["request_throughput_req_s"].astype(float)
    missing = ~np.isfinite(e2e.to_numpy()) | runs["throughput_tok_s"].isna().to_numpy()
    if missing.any():
        first = runs.index[np.flatnonzero(missing)[0]]
        run = runs.loc[first, "run_id"] if "run_id" in runs.columns else first
        raise DataError(
            f"memgap-online run {run}: no throughput or engine metrics (mean_running_batch) for the latency "
            "ground truth; rebuild data/ with `slim data build` or exclude the run"
        )
    return e2e


def online_table(online: pd.DataFrame | None = None) -> pd.DataFrame:
    """Advisor runs (fixed lengths, one server, no profiler) in the scenario layout; preempted runs are kept:
    they are the measured plateau, and the extended model accounts for the KV limit that causes them."""
    df = online_runs(load("memgap-online") if online is None else online)
    out = pd.DataFrame(
        {
            "model": df["model"].astype(str),
            "gpu": df["gpu"].astype(str),
            "batch_size": df["batch_size"].astype(float),
            "input_len": df["input_len"].astype(float),
            "output_len": df["output_len"].astype(float),
            "throughput_tok_s": df["throughput_tok_s"].astype(float),
            "e2e_s": in_engine_latency_s(df),
            "mean_ttft_ms": df["mean_ttft_ms"].astype(float),
            "mean_itl_ms": df["mean_itl_ms"].astype(float),
            "prefill_ms": df["mean_itl_ms"].astype(float),  # substitute: one engine step (see module doc)
            "mean_tpot_ms": df["mean_tpot_ms"].astype(float),
            "p50_ttft_ms": df["median_ttft_ms"].astype(float),
            "p99_ttft_ms": df["p99_ttft_ms"].astype(float),
            "p50_tpot_ms": df["median_tpot_ms"].astype(float),
            "p99_tpot_ms": df["p99_tpot_ms"].astype(float),
            "gpu_blocks": df["gpu_blocks"].astype(float),
            "block_size": df["block_size"].astype(float),
            "chunked_prefill": df["chunked_prefill"].astype(bool),
            "max_num_batched_tokens": df["max_num_batched_tokens"].astype(float),
            "static_batch": False,  # continuous batching from a queue of 2000 requests
            "client": "burst",  # --request-rate inf, no --max-concurrency: every request at once
            "num_prompts": df["num_prompts"].astype(float),
            "max_num_seqs": df["max_num_seqs"].astype(float),  # = batch_size: the server's cap
            "source": "online",
        }
    )
    return _finish(out)


def offline_table(offline: pd.DataFrame | None = None) -> pd.DataFrame:
    """Offline runs with valid timing (no profiler or Nsight Systems), not preempted; repeats of one configuration
    (the same point in several analysis folders) are averaged: mean E2E, throughput recomputed by Eq. 6."""

    df = load("memgap-offline") if offline is None else offline
    df = df[df["timing_valid"].astype(bool) & ~df["preempted"].astype(bool)].copy()
    df["ttft"] = 1000.0 * df["prefill_s"].astype(float)
    df["itl"] = 1000.0 * df["decode_s"].astype(float) / df["n_decode_steps"].astype(float)
    keys = ["model", "gpu", "batch_size", "input_len", "output_len"]
    g = df.groupby(keys, sort=True, as_index=False).agg(
        e2e_s=("e2e_s", "mean"), prefill_ms=("ttft", "mean"), mean_itl_ms=("itl", "mean"),
        gpu_blocks=("gpu_blocks", "median"),
    )  # fmt: skip
    g["mean_ttft_ms"] = np.nan  # the logged batch prefill, in the engine: LLMVisor-Agg's, not a client's TTFT
    for c in ("batch_size", "input_len", "output_len", "gpu_blocks"):
        g[c] = g[c].astype(float)
    g["throughput_tok_s"] = eq.throughput(g["batch_size"], g["input_len"], g["output_len"], g["e2e_s"])
    g["block_size"] = 16.0  # vLLM default; the offline logs give the block count only
    g["chunked_prefill"] = False
    g["static_batch"] = True  # one batch of B equal requests, started together
    g["source"] = "offline"
    return _finish(g)


def _finish(df: pd.DataFrame) -> pd.DataFrame:
    """The table in `COLUMNS` order, sorted, with its curves; a column its source has not is empty, but
    ``prefill_ms`` is the TTFT where the source has no other value."""
    missing = [c for c in REQUIRED if c not in df.columns]
    if missing:
        raise DataError(
            f"scenario table of {df['source'].iloc[0] if 'source' in df else '?'} lacks {missing}"
        )
    df = df.reindex(columns=[c for c in COLUMNS if c != "curve"])
    df["prefill_ms"] = df["prefill_ms"].fillna(df["mean_ttft_ms"])
    df["curve"] = (
        df["model"] + " IL=" + df["input_len"].round().astype(int).astype(str)
        + " OL=" + df["output_len"].round().astype(int).astype(str)
    )  # fmt: skip
    df = df.sort_values(["model", "input_len", "output_len", "batch_size"], kind="mergesort")
    return df[list(COLUMNS)].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------
# The pre-knee rule
# ---------------------------------------------------------------------------------------------------------------
def pre_knee_points(batch_size, throughput, n: int = 3, knee_gain: float = LINEAR_GAIN) -> np.ndarray:
    """Positions of the `n` training points of one curve (same order as the inputs).

    The pre-knee run is `slimlib.experiments.characterization.knees.linear_regime` over B >= 2 (each doubling of B gains at least
    `knee_gain`); from it we take its smallest point, its largest point and the point closest to their geometric
    mean. When the run has fewer than `n` points, the `n` smallest batch sizes >= 2 are used.
    """
    b = np.asarray(batch_size, dtype=float)
    pos = np.flatnonzero(b >= 2)
    pos = pos[np.argsort(b[pos], kind="mergesort")]
    if len(pos) <= n:
        return np.sort(pos)
    run = list(linear_regime(b, throughput, min_batch=2.0, gain=knee_gain))
    if len(run) < n:
        return np.sort(pos[:n])
    if n == 1:
        return np.array([run[0]])
    chosen = [run[0], run[-1]]
    inner = run[1:-1]
    while len(chosen) < n and inner:
        target = np.exp(np.mean(np.log(b[chosen])))
        j = int(np.argmin([abs(np.log(b[i] / target)) for i in inner]))
        chosen.append(inner.pop(j))
    return np.sort(np.array(chosen))


def same_curve_split(table: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Three pre-knee points of every curve to train (pooled into one fit), the other points to validate."""
    train_idx: list[int] = []
    for _, g in table.groupby("curve", sort=True):
        sel = pre_knee_points(g["batch_size"].to_numpy(), g["throughput_tok_s"].to_numpy())
        train_idx.extend(g.index[sel])
    mask = table.index.isin(train_idx)
    return table[mask].reset_index(drop=True), table[~mask].reset_index(drop=True)


# ---------------------------------------------------------------------------------------------------------------
# The scenarios
# ---------------------------------------------------------------------------------------------------------------
_TRUTH_ONLINE_T = "measured total-token throughput (memgap-online, advisor)"
_TRUTH_ONLINE_L = "in-engine request latency by Little's law (mean running batch / request throughput)"
_TRUTH_OFFLINE_T = "measured total-token throughput (memgap-offline, B(IL+OL)/E2E)"
_TRUTH_OFFLINE_L = "logged batch E2E (prefill + decode)"


def _ol(df, values):
    return df[df["output_len"].round().isin(values)]


def build_scenarios(
    online: pd.DataFrame | None = None,
    offline: pd.DataFrame | None = None,
    kit: pd.DataFrame | None = None,
) -> list[Scenario]:
    """All scenarios of the evaluation, in table order. Tables default to the committed data (`datasets.load`);
    `kit` is the GPU kit's ``kit-runs`` table when one exists (its input-length sweep is the input-length row,
    "no data" without one); the IL = OL context transfer on LLM-Inference-Bench (`context_scenario`) is its own
    row, ``context-transfer``, after it."""
    on = online_table(online) if online is None or "family" in online.columns else online
    off = offline_table(offline) if offline is None or "timing_valid" in offline.columns else offline
    out = []

    tr, te = same_curve_split(on)
    out.append(Scenario(
        "same-curve", "every (model, OL) curve of the online advisor sweep: 3 pre-knee batch sizes per curve "
        "train one global fit, the other batch sizes validate", _TRUTH_ONLINE_T, _TRUTH_ONLINE_L,
        [Fold("all curves", tr, te)],
    ))  # fmt: skip
    tr, te = same_curve_split(off)
    out.append(Scenario(
        "same-curve-offline", "the same on the offline batch sweeps (IL=161, OL=338, four models)",
        _TRUTH_OFFLINE_T, _TRUTH_OFFLINE_L, [Fold("all curves", tr, te)],
    ))  # fmt: skip

    folds = []
    for model, g in on.groupby("model", sort=True):
        tr, te = _ol(g, OL_TRAIN), _ol(g, [OL_TEST])
        if len(tr) and len(te):
            folds.append(Fold(str(model), tr.reset_index(drop=True), te.reset_index(drop=True)))
    out.append(Scenario(
        "output-length-transfer", f"per model: fit OL in {list(OL_TRAIN)}, validate OL={OL_TEST}",
        _TRUTH_ONLINE_T, _TRUTH_ONLINE_L, folds,
    ))  # fmt: skip

    at = _ol(on, [MODEL_TRANSFER_OL])
    out.append(Scenario(
        "model-transfer", f"OL={MODEL_TRANSFER_OL}: fit {', '.join(SMALLER)}, validate {LARGEST}",
        _TRUTH_ONLINE_T, _TRUTH_ONLINE_L,
        [Fold(LARGEST, at[at["model"].isin(SMALLER)].reset_index(drop=True),
              at[at["model"] == LARGEST].reset_index(drop=True))],
    ))  # fmt: skip
    out.append(Scenario(
        "model-transfer-opt", f"OL={MODEL_TRANSFER_OL}: fit opt-1.3b, validate opt-2.7b",
        _TRUTH_ONLINE_T, _TRUTH_ONLINE_L,
        [Fold("opt-2.7b", at[at["model"] == "opt-1.3b"].reset_index(drop=True),
              at[at["model"] == "opt-2.7b"].reset_index(drop=True))],
    ))  # fmt: skip

    small = on[on["model"].isin(SMALLER)]
    combo_train = pd.concat([_ol(small, [MODEL_TRANSFER_OL]), _ol(small, OL_TRAIN)]).drop_duplicates()
    combo_test = _ol(on[on["model"] == LARGEST], [OL_TEST])
    out.append(Scenario(
        "combined", f"union of the model- and output-length-transfer training sets without {LARGEST} "
        f"(smaller models, OL in {list(OL_TRAIN)}); validate {LARGEST} at OL={OL_TEST}, unseen in both",
        _TRUTH_ONLINE_T, _TRUTH_ONLINE_L,
        [Fold(f"{LARGEST} OL={OL_TEST}", combo_train.sort_index().reset_index(drop=True),
              combo_test.reset_index(drop=True))],
    ))  # fmt: skip

    # The paper's input-length row (fit IL in {128, 512}, validate 1024 at OL = 256): a kit sweep of our own where
    # one exists, and the CPU-engine campaign's sweep under its own label; "no data" when neither exists.
    kit_scenario = input_length_scenario(kit)
    if kit_scenario.available or not available(ENGINE_TABLE):
        out.append(kit_scenario)
    if available(ENGINE_TABLE):
        out.append(engine_input_length_scenario())
    # A different experiment under its own name (never the paper's row): IL = OL static batches on AMD GPUs.
    if available("llmib-runs"):
        out.append(context_scenario())
    return out


def input_length_scenario(kit: pd.DataFrame | None = None) -> Scenario:
    """Input-length transfer: per (model, GPU, OL) with >= 3 input lengths, fit the smaller ILs, validate the
    largest. Uses the GPU kit's ``kit-runs`` table; without one the scenario reports "no data"."""
    name, desc = (
        "input-length-transfer",
        "per (model, OL) with >= 3 input lengths: fit the smaller ILs, validate the largest",
    )
    if kit is None:
        kit = load("kit-runs") if available("kit-runs") else None
    if kit is None or len(kit) == 0:
        return Scenario(name, desc, "kit-runs throughput", "kit-runs e2e_s", [],
                        reason="no data: no table with an input-length sweep (kit-runs) exists yet")  # fmt: skip
    k = kit.copy()
    for c, default in (("mean_ttft_ms", np.nan), ("mean_itl_ms", np.nan), ("gpu_blocks", np.nan),
                       ("block_size", 16.0), ("chunked_prefill", False), ("static_batch", False)):  # fmt: skip
        if c not in k.columns:
            k[c] = default
    if "prefill_s" in k.columns and "decode_s" in k.columns:
        k["prefill_ms"] = 1000.0 * k["prefill_s"]  # in the engine: LLMVisor-Agg's, not a client's TTFT
        k["mean_ttft_ms"] = np.nan
        k["mean_itl_ms"] = 1000.0 * k["decode_s"] / np.maximum(k["output_len"] - 1, 1)
    k["source"] = "kit"
    k = _finish(k)
    folds = []
    for key, g in k.groupby(["model", "gpu", "output_len"], sort=True):
        ils = np.sort(g["input_len"].unique())
        if len(ils) >= 3:
            folds.append(Fold(" ".join(map(str, key)), g[g["input_len"] < ils[-1]].reset_index(drop=True),
                              g[g["input_len"] == ils[-1]].reset_index(drop=True)))  # fmt: skip
    reason = "" if folds else "no data: kit-runs has no (model, OL) with >= 3 input lengths"
    return Scenario(name, desc, "kit-runs throughput", "kit-runs e2e_s", folds, reason)


# ---------------------------------------------------------------------------------------------------------------
# LLM-Inference-Bench (static batches, IL = OL, AMD GPUs): the context-length transfer
# ---------------------------------------------------------------------------------------------------------------
#: registry GPU -> tensor-parallel degree of one benchmark device (MI250: the card's two dies)
DEVICES = {"mi300x": 1, "mi250-gcd": 2}
DEVICE_LABEL = {"mi300x": "MI300X", "mi250-gcd": "MI250"}
CONTEXT_TRAIN_MAX = 256
CONTEXT_TEST_MIN = 512
LLMIB_COLUMNS = ("model", "gpu", "tensor_parallel", "batch_size", "input_len", "output_len", "throughput_tok_s",
           "e2e_s", "static_batch", "chunked_prefill", "curve", "source_line")  # fmt: skip
TRUTH_T = "measured total-token throughput B (IL + OL) / Latency (LLM-Inference-Bench)"
TRUTH_L = "measured batch latency (LLM-Inference-Bench Latency)"


def llmib_table(runs: pd.DataFrame | None = None) -> pd.DataFrame:
    """The vLLM rows of registered GPUs of ``llmib-runs`` in the scenario layout (float configuration columns)."""
    df = load("llmib-runs") if runs is None else runs
    df = df[df["gpu_in_registry"].astype(bool) & (df["framework"] == "vLLM")]
    out = pd.DataFrame({
        "model": df["model"].astype(str), "gpu": df["gpu"].astype(str),
        **{c: df[c].astype(float) for c in ("tensor_parallel", "batch_size", "input_len", "output_len",
                                            "throughput_tok_s", "e2e_s")},
        "source_line": df["source_line"].astype(int),
        "static_batch": True,  # LLM-Inference-Bench runs B equal requests together
        # whole prompts per step: the benchmark does not say; vLLM 0.6.1 chunks by default only above 32K of
        # context (the Qwen2 models' 128K would qualify unless the runs set --max-model-len)
        "chunked_prefill": False,
    })  # fmt: skip
    out["curve"] = (out["model"] + " " + out["gpu"] + " TP=" + out["tensor_parallel"].astype(int).astype(str)
                    + " L=" + out["input_len"].astype(int).astype(str))  # fmt: skip
    out = out.sort_values(["gpu", "model", "tensor_parallel", "input_len", "batch_size"], kind="mergesort")
    return out[list(LLMIB_COLUMNS)].reset_index(drop=True)


def device_rows(t: pd.DataFrame, gpu: str) -> pd.DataFrame:
    return t[(t["gpu"] == gpu) & (t["tensor_parallel"] == DEVICES[gpu])]


def context_scenario(table: pd.DataFrame | None = None, name: str = "context-transfer") -> Scenario:
    """Per device: fit L <= 256, validate L >= 512 (all models of the device in one fit)."""
    t = llmib_table() if table is None else table
    folds = []
    for gpu in DEVICES:
        d = device_rows(t, gpu)
        tr, te = d[d["input_len"] <= CONTEXT_TRAIN_MAX], d[d["input_len"] >= CONTEXT_TEST_MIN]
        if len(tr) and len(te):
            folds.append(Fold(DEVICE_LABEL[gpu], tr.reset_index(drop=True), te.reset_index(drop=True)))
    return Scenario(
        name,
        f"IL = OL context transfer (LLM-Inference-Bench): per device (one MI300X, one MI250 card), fit "
        f"L <= {CONTEXT_TRAIN_MAX}, validate L >= {CONTEXT_TEST_MIN}",
        TRUTH_T, TRUTH_L, folds, "" if folds else "no data: llmib-runs has no AMD vLLM rows",
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# The project's CPU-engine campaign (vLLM's CPU build, random weights): the paper's input-length design
# ---------------------------------------------------------------------------------------------------------------
ENGINE_TABLE = "engine-cpu-medians"
#: the AMX host's campaign (prefix caching off, a closed loop of B clients): served TTFT and TPOT
AMX_TABLE = "engine-cpu-amx-medians"
ENGINE_IL_ROW = "input-length-transfer (vLLM CPU engine)"
ENGINE_TRUTH_T = (
    "measured total-token throughput, median over the repeats that pass the physical checks (vllm bench serve "
    "on vLLM's CPU build, random weights)"
)
ENGINE_TRUTH_L = (
    "measured mean request E2E latency, median over the passing repeats (k waves of B requests at cap B)"
)


def engine_eval_rows(medians: pd.DataFrame | None = None, table: str = ENGINE_TABLE) -> pd.DataFrame:
    """A CPU campaign's medians (one row per configuration, medians over passing repeats; default
    ``engine-cpu-medians``) in the scenario layout: E2E is the client's mean request E2E, the KV blocks follow from
    the campaign's KV space (`slimlib.registry.host_cpu`), chunked prefill is on (vLLM V1) with the CPU server's
    token budget. ``engine-cpu``'s TTFT is LLMVisor-Agg's ``prefill_ms`` only (module docstring); a campaign
    without prefix caching (``engine-cpu-amx``) carries its served latencies and client."""
    df = load(table) if medians is None else medians
    if "repeat" in df.columns:
        raise DataError(
            f"got a runs table (it has 'repeat'); the engine's fits and scores read the medians ({table})"
        )
    out = pd.DataFrame({
        "model": df["model"].astype(str), "gpu": df["gpu"].astype(str),
        **{c: df[c].astype(float) for c in ("batch_size", "input_len", "output_len", "throughput_tok_s", "e2e_s",
                                            "mean_ttft_ms", "mean_itl_ms")},
    })  # fmt: skip
    out["prefill_ms"] = out["mean_ttft_ms"]
    if table == ENGINE_TABLE:
        out["mean_ttft_ms"] = np.nan  # prefix-cached prefills (module docstring)
        out["static_batch"] = True  # one wave of B equal requests at --max-concurrency B
    else:
        for c in SERVED_TRUTH:
            out[c] = df[c].astype(float) if c in df.columns else np.nan
        out["client"] = df["client"].astype(str)
        out["num_prompts"] = df["num_prompts"].astype(float).round()
        out["static_batch"] = False
    out["gpu_blocks"] = cpu_kv_blocks(out["model"])
    out["block_size"] = float(DEFAULT_BLOCK_SIZE)
    out["max_num_batched_tokens"] = float(CPU_SERVER_BATCHED_TOKENS)
    out["chunked_prefill"] = True
    out["source"] = table.removesuffix("-medians")
    return _finish(out)


def engine_offline_rows(medians: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """The offline CPU-engine campaign (``data/engine-cpu-offline``: the served campaign's configurations on the
    engine alone, `slimlib.data.engine_offline`), medians over passing repeats, in the scenario layout of
    `engine_eval_rows` (static batches, chunked prefill, the campaign's KV space); None where the folder is absent."""
    if medians is None:
        if not (OFFLINE_DIR / "manifest.json").is_file():
            return None
        medians = offline_medians(read_engine_offline(OFFLINE_DIR))
    out = pd.DataFrame({
        "model": medians["model"].astype(str), "gpu": medians["gpu"].astype(str),
        **{c: medians[c].astype(float) for c in ("batch_size", "input_len", "output_len", "throughput_tok_s", "e2e_s")},
    })  # fmt: skip
    out["gpu_blocks"] = cpu_kv_blocks(out["model"])
    out["block_size"] = float(DEFAULT_BLOCK_SIZE)
    out["max_num_batched_tokens"] = float(CPU_OFFLINE_BATCHED_TOKENS)
    out["chunked_prefill"] = True
    out["static_batch"] = True  # one LLM.generate call of B prompts
    out["mean_ttft_ms"] = np.nan  # LLM.generate's batch has no streamed client timings
    out["mean_itl_ms"] = np.nan
    out["source"] = "engine-cpu-offline"
    return _finish(out)


def input_length_design(g: pd.DataFrame) -> tuple[int, list[int], int] | None:
    """(OL, training ILs, validation IL) of one model's rows: at the output length with the most input lengths
    (ties: the smaller OL), fit every IL below the largest and validate the largest; None with fewer than 2 ILs."""
    ils = g.groupby(g["output_len"].round().astype(int))["input_len"].apply(
        lambda s: sorted(set(s.round().astype(int)))
    )
    if ils.empty:
        return None
    n = ils.map(len)
    ol = int(n[n == n.max()].index.min())
    values = ils[ol]
    if len(values) < 2:
        return None
    return ol, values[:-1], values[-1]


def engine_input_length_scenario(table: pd.DataFrame | None = None, name: str = ENGINE_IL_ROW) -> Scenario:
    """Per model: at the OL with the most input lengths, fit the shorter ILs, validate the longest (the paper's
    design; `input_length_design`), on the CPU engine's medians."""
    t = engine_eval_rows() if table is None else table
    folds, designs = [], []
    for model, g in t.groupby("model", sort=True):
        d = input_length_design(g)
        if d is None:
            continue
        ol, train, test = d
        at = g[g["output_len"].round() == ol]
        tr, te = at[at["input_len"].round().isin(train)], at[at["input_len"].round() == test]
        folds.append(Fold(str(model), tr.reset_index(drop=True), te.reset_index(drop=True)))
        designs.append(f"OL={ol}: fit IL in {train}, validate IL={test}")
    said = sorted(set(designs))
    return Scenario(
        name, "vLLM CPU engine (random weights) on the host CPU: per model, " + "; ".join(said) if said else name,
        ENGINE_TRUTH_T, ENGINE_TRUTH_L, folds,
        "" if folds else f"no data: {ENGINE_TABLE} has no model with two input lengths at one output length",
    )  # fmt: skip


def scenario_names() -> list[str]:
    """Names of the scenarios `build_scenarios` builds with the committed tables, in Table II's order: the paper's
    input-length row is the GPU kit's sweep where one exists, else the CPU engine's (labelled so), else "no data"."""
    il_rows = ["input-length-transfer"] if available("kit-runs") or not available(ENGINE_TABLE) else []
    il_rows += [ENGINE_IL_ROW] if available(ENGINE_TABLE) else []
    return [
        "same-curve", "same-curve-offline", "output-length-transfer", "model-transfer", "model-transfer-opt",
        "combined", *il_rows, "context-transfer",
    ]  # fmt: skip


def get_scenario(name: str, scenarios: list[Scenario] | None = None) -> Scenario:
    for s in scenarios if scenarios is not None else build_scenarios():
        if s.name == name:
            return s
    raise UnknownNameError(close_matches_message("scenario", name, scenario_names()))
