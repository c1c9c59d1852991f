"""SLIM against the estimators a performance engineer would reach for instead, on the same rows.

Peers run uncalibrated, as users run them; SLIM is calibrated on at most 3 points per measured curve (the 3
pre-knee batch sizes of `slimlib.experiments.accuracy.scenarios.pre_knee_points`, pooled into one fit per dataset).
Every method is scored on the same rows: the dataset's rows except SLIM's calibration points where every method
has a prediction (`peer_table`'s ``n_common``), with bootstrap intervals and a paired test against SLIM.

Peers:
* ``roofline`` (here, no dependency): prefill ``F_pre / F_max`` (Eq. 8 FLOPs at the registry peak), each decode
  step ``max(2 N_active B / F_max, (weights read + KV read) / BW_max)`` (an MoE step reads the experts its
  tokens pick, `slimlib.model.parallel.step_weight_bytes`) over the ``OL`` steps at their mean context,
  all per tensor-parallel rank, no overheads.
* ``genz`` (`genz-llm`), ``llm-analysis`` and ``aiconfigurator`` (NVIDIA systems only): optional extra ``peers``;
  their predictions are committed in ``data/peers/llmib-peer-predictions.csv`` with the tool, its version and the exact
  call, so `peer_table` works without them installed. `slim peers` regenerates the table when they are installed
  (`slimlib.experiments.transfer_study.peer_adapters`).

Datasets: ``llmib-mi300x`` (one MI300X, TP 1) and ``llmib-mi250`` (one MI250 card, TP 2 over its dies), every
model and L of LLM-Inference-Bench; ``memgap-h100-offline`` (the 64 GB H100 offline sweeps of the
vLLMBatchingMemoryGap data: Llama-2-7B/13B, OPT), where the NVIDIA-only AIConfigurator can run.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from slimlib.data.catalog import data_dir
from slimlib.experiments.accuracy.scenarios import offline_table, pre_knee_points
from slimlib.experiments.outputs import uncertainty as U
from slimlib.experiments.outputs.plotting import method_style
from slimlib.experiments.transfer_study.transfer_eval import DEVICES, llmib_table
from slimlib.metrics import mape
from slimlib.model import equations as eq
from slimlib.model import make_model, method_label
from slimlib.model.features import model_features
from slimlib.model.parallel import step_weight_bytes
from slimlib.registry.gpus import get_gpu

PREDICTION_COLUMNS = (
    "dataset", "tool", "tool_version", "call", "model", "gpu", "tensor_parallel", "batch_size", "input_len",
    "output_len", "pred_throughput_tok_s", "pred_e2e_s", "note",
)  # fmt: skip
PEER_TABLE = "llmib-peer-predictions"
SLIM_METHOD = "slim"
#: display label of each peer (legends, prose; the tables keep the tool names), as the tools spell themselves
PEER_LABELS = {"roofline": "Roofline", "genz": "GenZ", "llm-analysis": "llm-analysis",
               "aiconfigurator": "AIConfigurator"}  # fmt: skip


def peer_label(name: str) -> str:
    """The display label of a method of `peer_table`: a peer's `PEER_LABELS` entry, else the registry's label
    (`method_label`: ``slim`` -> "SLIM-extended")."""
    return PEER_LABELS.get(name) or method_label(name)


def datasets(table: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """Dataset name -> rows (scenario layout with ``tensor_parallel``)."""

    t = llmib_table() if table is None else table
    out = {}
    for gpu, label in (("mi300x", "llmib-mi300x"), ("mi250-gcd", "llmib-mi250")):
        out[label] = t[(t["gpu"] == gpu) & (t["tensor_parallel"] == DEVICES[gpu])].reset_index(drop=True)
    off = offline_table()
    off = off.assign(tensor_parallel=1.0, source_line=np.arange(len(off)))
    out["memgap-h100-offline"] = off[list(t.columns)].reset_index(drop=True)
    return out


def calibration_split(rows: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(calibration: <= 3 pre-knee points per curve, evaluation: the other rows)."""
    keys = ["model", "gpu", "tensor_parallel", "input_len", "output_len"]
    idx: list[int] = []
    for _, g in rows.groupby(keys, sort=True):
        idx.extend(g.index[pre_knee_points(g["batch_size"].to_numpy(), g["throughput_tok_s"].to_numpy())])
    mask = rows.index.isin(idx)
    return rows[mask].reset_index(drop=True), rows[~mask].reset_index(drop=True)


def peer_roofline(rows: pd.DataFrame) -> pd.DataFrame:
    """Plain roofline prediction (uncalibrated; see the module docstring): pred_throughput_tok_s, pred_e2e_s."""

    out = []
    for gpu, g in rows.groupby("gpu", sort=False):
        hw = get_gpu(gpu)
        f = model_features(g)
        b, il, ol = f["batch_size"], f["input_len"], f["output_len"]
        pre = eq.prefill_flops(
            b, il, f["n_layers"], f["hidden_size"], f["d_kv"], f["ffn_size"], f["n_ffn_matrices"]
        )
        pre_s = pre / hw.peak_flops
        mean_ctx = eq.kv_scan_tokens(il, ol) / ol
        step_bytes = step_weight_bytes(f) + b * mean_ctx * f["kv_bytes_per_token"]
        step_flops = b * f["linear_flops_per_token"]
        dec_s = ol * np.maximum(step_flops / hw.peak_flops, step_bytes / hw.mem_bw)
        e2e = pre_s + dec_s
        out.append(pd.DataFrame({"pred_throughput_tok_s": eq.throughput(b, il, ol, e2e), "pred_e2e_s": e2e},
                                index=g.index))  # fmt: skip
    return pd.concat(out).loc[rows.index]


def slim_predictions(
    name: str, rows: pd.DataFrame, *, n_starts: int = 8
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SLIM calibrated on the calibration split of `rows`: (evaluation rows with predictions, calibration rows)."""
    cal, ev = calibration_split(rows)
    model = make_model(SLIM_METHOD, n_starts=n_starts)
    model.fit(cal)  # its warnings (identifiability) reach the caller
    p = model.predict(ev)
    return ev.assign(pred_throughput_tok_s=p["pred_throughput_tok_s"].to_numpy(),
                     pred_e2e_s=p["pred_e2e_s"].to_numpy()), cal  # fmt: skip


def load_peer_predictions() -> pd.DataFrame:
    """The committed peer predictions (`data/peers/llmib-peer-predictions.csv`); empty when none are committed."""

    path = data_dir() / "peers" / f"{PEER_TABLE}.csv"
    if not path.is_file():
        return pd.DataFrame(columns=list(PREDICTION_COLUMNS))
    return pd.read_csv(path, dtype={"tool": str, "tool_version": str, "call": str, "note": str}, keep_default_na=False,
                       na_values=[""])  # fmt: skip


def peer_table(
    *, n_starts: int = 8, peers: pd.DataFrame | None = None, n_boot: int = U.N_BOOT, seed: int = U.SEED
) -> pd.DataFrame:
    """Throughput MAPE of every method on identical rows, with bootstrap 95% intervals, per dataset.

    Methods: SLIM (variant `SLIM_METHOD`, calibrated; named by that variant), the plain roofline, and every tool
    in `peers` (default: the committed table) matched to the evaluation rows on (dataset, model, gpu,
    tensor_parallel, batch_size, input_len, output_len). ``n_common`` rows are those of the dataset's evaluation
    rows where every method has a finite prediction; ``throughput_mape_pct`` [``ci_lo_pct``, ``ci_hi_pct``],
    ``bias_pct`` and the paired comparison with SLIM (``diff_vs_slim_pct`` and its interval, ``p_wilcoxon``) are
    on exactly those rows, so every method is compared on the same rows. ``n_rows`` and ``own_rows_mape_pct``
    give each method's coverage and MAPE on all rows it ran on (not comparable across methods)."""
    peers = load_peer_predictions() if peers is None else peers
    keys = ["model", "gpu", "tensor_parallel", "batch_size", "input_len", "output_len"]
    rows = []
    for name, data in datasets().items():
        ev, cal = slim_predictions(name, data, n_starts=n_starts)
        base = ev[keys + ["throughput_tok_s"]]
        methods: dict[str, tuple[pd.Series, int, str]] = {
            SLIM_METHOD: (ev["pred_throughput_tok_s"], len(cal), ""),
            "roofline": (peer_roofline(ev)["pred_throughput_tok_s"], 0, ""),
        }
        for tool, g in peers[peers["dataset"] == name].groupby("tool", sort=True):
            g = g.astype({k: float for k in keys[2:]})
            m = base.merge(g[keys + ["pred_throughput_tok_s"]], on=keys, how="left", validate="one_to_one")
            methods[str(tool)] = (m["pred_throughput_tok_s"], 0, str(g["tool_version"].iloc[0]))
        preds = pd.DataFrame({k: v[0].to_numpy(dtype=float) for k, v in methods.items()})
        truth = base["throughput_tok_s"].to_numpy(dtype=float)
        common = np.isfinite(preds.to_numpy()).all(axis=1)
        ref = U.ape(truth[common], preds[SLIM_METHOD].to_numpy()[common]) if common.any() else np.array([])
        for method, (_, n_cal, ver) in methods.items():
            q = preds[method].to_numpy()
            own = np.isfinite(q)
            row = {"dataset": name, "method": method, "version": ver, "calibration_points": n_cal,
                   "n_eval_rows": len(ev), "n_rows": int(own.sum()), "n_common": int(common.sum()),
                   "throughput_mape_pct": np.nan, "ci_lo_pct": np.nan, "ci_hi_pct": np.nan, "bias_pct": np.nan,
                   "diff_vs_slim_pct": np.nan, "diff_lo_pct": np.nan, "diff_hi_pct": np.nan,
                   "p_wilcoxon": np.nan,
                   "own_rows_mape_pct": mape(truth[own], q[own]) if own.any() else np.nan}  # fmt: skip
            if common.any():
                errs = U.ape(truth[common], q[common])
                label = f"peers {name} / {method}"
                point, lo, hi = U.bootstrap_mean_ci(errs, n_boot=n_boot, seed=seed, label=label)
                row.update(throughput_mape_pct=point, ci_lo_pct=lo, ci_hi_pct=hi,
                           bias_pct=float(100 * np.mean(q[common] / truth[common] - 1)))  # fmt: skip
                if method != SLIM_METHOD:
                    cmp = U.paired_comparison(errs, ref, n_boot=n_boot, seed=seed, label="paired " + label)
                    row.update(diff_vs_slim_pct=cmp["mean_diff"], diff_lo_pct=cmp["diff_lo"],
                               diff_hi_pct=cmp["diff_hi"], p_wilcoxon=cmp["p_wilcoxon"])  # fmt: skip
            rows.append(row)
    return pd.DataFrame(rows)


def plot_peers(table: pd.DataFrame, ax) -> None:
    """Throughput MAPE (log scale) per dataset and method on the dataset's common rows, as grouped bars with
    their bootstrap 95% intervals; each dataset's tick names its number of common rows."""

    names = list(dict.fromkeys(table["dataset"]))
    methods = list(dict.fromkeys(table["method"]))
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        t = table[table["method"] == m].set_index("dataset").reindex(names)
        y = t["throughput_mape_pct"].to_numpy(dtype=float)
        err = np.vstack([y - t["ci_lo_pct"].to_numpy(dtype=float), t["ci_hi_pct"].to_numpy(dtype=float) - y])
        color = method_style(m)[0]
        ax.bar(np.arange(len(names)) + j * width, y, width, yerr=err, label=peer_label(m), color=color,
               error_kw={"lw": 0.6, "capsize": 1.5})  # fmt: skip
    ax.set_yscale("log")
    n_common = table.drop_duplicates("dataset").set_index("dataset")["n_common"]
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, [f"{n}\n({n_common[n]} common rows)" for n in names],
                  fontsize="small")  # fmt: skip
    ax.set_ylabel("throughput MAPE (%), same rows")
    ax.legend(fontsize="x-small", ncol=2)
