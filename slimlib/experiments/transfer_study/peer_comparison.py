"""SLIM against the estimators a performance engineer would reach for instead, on the same rows.

Peers run uncalibrated, as users run them; SLIM is calibrated on at most 3 points per measured curve (the 3
pre-knee batch sizes of `slimlib.experiments.accuracy.scenarios.pre_knee_points`, pooled into one fit per dataset).
Every method is scored on the same rows: all rows of the dataset except SLIM's calibration points.

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
from slimlib.experiments.outputs.plotting import HOUSE_COLORS
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


def roofline(rows: pd.DataFrame) -> pd.DataFrame:
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
        step_flops = 2.0 * b * (f["dense_weight_bytes"] + f["expert_weight_bytes"] * f["experts_per_token"]
                                / np.maximum(f["n_experts"], 1.0)) / 2.0  # fmt: skip
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


def peer_table(*, n_starts: int = 8, peers: pd.DataFrame | None = None) -> pd.DataFrame:
    """MAPE (%), signed bias (%) and calibration points per method and dataset, on each dataset's evaluation rows
    (``n_rows`` of them where the method ran; ``slim_mape_same_rows_pct`` is SLIM's MAPE on exactly those rows).

    Methods: SLIM (calibrated), the plain roofline, and every tool in `peers` (default: the committed table)
    matched to the evaluation rows on (dataset, model, gpu, tensor_parallel, batch_size, input_len, output_len)."""
    peers = load_peer_predictions() if peers is None else peers
    keys = ["model", "gpu", "tensor_parallel", "batch_size", "input_len", "output_len"]
    rows = []
    for name, data in datasets().items():
        ev, cal = slim_predictions(name, data, n_starts=n_starts)
        methods = {
            f"SLIM ({method_label(SLIM_METHOD)})": (ev, len(cal), ""),
            "roofline": (ev.assign(**roofline(ev)), 0, ""),
        }
        for tool, g in peers[peers["dataset"] == name].groupby("tool", sort=True):
            g = g.astype({k: float for k in keys[2:]})
            m = ev[keys + ["throughput_tok_s", "e2e_s"]].merge(g, on=keys, how="inner")
            ver = str(g["tool_version"].iloc[0])
            methods[tool] = (m, 0, ver)
        slim = ev.set_index(keys)["pred_throughput_tok_s"]
        for method, (p, n_cal, ver) in methods.items():
            ok = np.isfinite(p["pred_throughput_tok_s"].to_numpy(dtype=float))
            t, q = (
                p["throughput_tok_s"].to_numpy(dtype=float)[ok],
                p["pred_throughput_tok_s"].to_numpy(dtype=float)[ok],
            )
            s_q = slim.loc[pd.MultiIndex.from_frame(p.loc[ok, keys])].to_numpy()
            rows.append({"dataset": name, "method": method, "version": ver, "calibration_points": n_cal,
                         "n_rows": int(ok.sum()), "n_eval_rows": len(ev),
                         "throughput_mape_pct": mape(t, q) if ok.any() else np.nan,
                         "bias_pct": float(100 * np.mean(q / t - 1)) if ok.any() else np.nan,
                         "slim_mape_same_rows_pct": mape(t, s_q) if ok.any() else np.nan})  # fmt: skip
    return pd.DataFrame(rows)


def plot_peers(table: pd.DataFrame, ax) -> None:
    """Throughput MAPE (log scale) per dataset and method, as grouped bars."""

    names = list(dict.fromkeys(table["dataset"]))
    methods = list(dict.fromkeys(table["method"]))
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        t = table[table["method"] == m].set_index("dataset").reindex(names)
        ax.bar(np.arange(len(names)) + j * width, t["throughput_mape_pct"], width, label=m,
               color=HOUSE_COLORS[j % len(HOUSE_COLORS)])  # fmt: skip
    ax.set_yscale("log")
    ax.set_xticks(np.arange(len(names)) + 0.4 - width / 2, names, fontsize="small")
    ax.set_ylabel("throughput MAPE (%)")
    ax.legend(fontsize="x-small", ncol=2)
