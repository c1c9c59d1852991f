"""Paper-ready table text: fixed decimals per column, percents as percents, units in human headers, "n/a (reason)"
instead of blanks, never scientific notation. The CSV beside every table keeps machine names and full precision;
this module only shapes the Markdown and LaTeX (`slimlib.experiments.outputs.plotting.save_table` writes all three).

Per-column formatting is inferred from the column name (`infer_column`) unless a `Col` overrides it:
``*_pct`` is already a percent; ``*_share``, ``*_util``, ``*_frac`` and ``efficiency`` are fractions shown x100 as
percents; the unit suffix (``_tok_s``, ``_s``, ``_ms``, ``_gib``, ...) becomes the header's unit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from slimlib.errors import DataError, UnknownNameError
from slimlib.experiments.outputs import latex as L
from slimlib.experiments.outputs.uncertainty import format_p
from slimlib.model import METHODS, method_label
from slimlib.model.methods import PAPER_TABLE2_METHODS
from slimlib.registry.gpus import get_gpu

#: Human headers of common machine column names (units in parentheses).
HEADERS: dict[str, str] = {
    "model": "Model",
    "gpu": "GPU",
    "scenario": "Scenario",
    "method": "Method",
    "variant": "Variant",
    "metric": "Metric",
    "fold": "Fold",
    "parameter": "Parameter",
    "unit": "Unit",
    "batch_size": "Batch size B",
    "input_len": "Input length IL (tokens)",
    "output_len": "Output length OL (tokens)",
    "kv_cache_size": "KV context C (tokens)",
    "active_context": "Active context (tokens)",
    "n_train": "Train rows",
    "n_test": "Test rows",
    "mape_pct": "MAPE (%)",
    "throughput_tok_s": "Throughput (tok/s)",
    "slo": "SLO",
    "slo_s": "SLO (s)",
    "b_cap": "B_cap",
    "b_true": "Best measured B",
    "binding": "Binding constraint",
    "estimate": "Estimate",
    "stderr": "Std. error",
    "ci_lo": "95% CI low",
    "ci_hi": "95% CI high",
    "at_bound": "At bound",
    "k": "k (runs per curve)",
    "ai_flop_per_byte": "Arithmetic intensity (FLOP/byte)",
    "achieved_tflop_s": "Achieved (TFLOP/s)",
    "achieved_bw_tb_s": "Achieved DRAM BW (TB/s)",
    "time_ms": "Kernel time (ms)",
    "dmon_samples": "dmon samples",
    "time_us": "Kernel time (µs)",
    "weight_gib": "Weight (GiB)",
    "n_nonphysical": "Non-physical predictions",
    "b_cap_measured_t1": "B_cap with measured T(1)",
    "b_cap_is_1": "B_cap = 1 (flag)",
    "best_measured_throughput_tok_s": "Throughput at best measured B (tok/s)",
    "measured_throughput_at_b_cap_tok_s": "Measured throughput at B_cap (tok/s)",
    "measured_e2e_at_b_cap_s": "Measured E2E at B_cap (s)",
    "n_calibration": "Calibration runs",
    "calibration_batches": "Calibration batch sizes",
    "length": "Length IL = OL (tokens)",
}
#: Cells of a column at or below this length are "short"; a longer n/a reason goes into a note (`short_na`).
SHORT_NA = 24

#: Machine-name suffix -> unit shown in the header (longest suffix first).
UNIT_SUFFIXES: list[tuple[str, str]] = [
    ("_flop_per_byte", "FLOP/byte"),
    ("_tflop_s", "TFLOP/s"),
    ("_tok_s", "tok/s"),
    ("_req_s", "req/s"),
    ("_tb_s", "TB/s"),
    ("_gib", "GiB"),
    ("_us", "µs"),
    ("_mhz", "MHz"),
    ("_pct", "%"),
    ("_ms", "ms"),
    ("_w", "W"),
    ("_s", "s"),
]
#: Suffixes (or whole names) of fraction columns shown x100 as percents.
FRACTION_SUFFIXES = ("_share", "_util", "_frac", "_share_of_max")
FRACTION_NAMES = ("efficiency", "measured_efficiency", "share", "util")
#: Words kept as written when a machine name is turned into a header.
_KEEP_CASE = {"kv": "KV", "sm": "SM", "dram": "DRAM", "e2e": "E2E", "itl": "ITL", "ttft": "TTFT", "gpu": "GPU",
              "slo": "SLO", "ctx": "context", "bw": "BW", "mem": "memory", "ci": "CI", "ol": "OL", "il": "IL",
              "mape": "MAPE", "tp": "TP"}  # fmt: skip
#: ``diff_vs_<method>_pct`` (``_`` for ``-`` in the name): a difference against a registered method, in points.
_DIFF_VS = re.compile(r"^diff_vs_(?P<method>\w+?)_pct$")


def difference_header(reference: str, unit: str = "MAPE points") -> str:
    """The header of a comparison column, naming its reference by its one label: ``Difference vs SLIM (paper)
    (MAPE points)``."""
    return f"Difference vs {method_label(reference)} ({unit})"


@dataclass(frozen=True)
class Col:
    """How one column is shown: header text, fixed decimals, fraction -> percent, the reason printed for a gap."""

    header: str | None = None
    decimals: int | None = None
    percent: bool = False
    na: str | None = None


class Bold(str):
    """A cell shown in bold (Markdown ``**x**``, LaTeX ``\\textbf{x}``)."""


def is_fraction(name: str) -> bool:
    """Whether the column `name` holds a fraction that the paper-ready table shows as a percent."""
    n = str(name)
    return n in FRACTION_NAMES or n.endswith(FRACTION_SUFFIXES)


def human_header(name: str, percent: bool | None = None) -> str:
    """A readable header for machine column `name`, unit in parentheses (``throughput_tok_s`` -> ``Throughput
    (tok/s)``); a fraction column shown as percent gets ``(%)``."""
    n = str(name)
    if n in HEADERS:
        return HEADERS[n]
    diff = _DIFF_VS.match(n)
    if diff and diff["method"].replace("_", "-") in METHODS:
        return difference_header(diff["method"].replace("_", "-"))
    if " " in n or n != n.lower():  # already a human header
        return n
    percent = is_fraction(n) if percent is None else percent
    unit = "%" if percent else None
    stem = n
    for suffix, u in UNIT_SUFFIXES:
        if n.endswith(suffix) and len(n) > len(suffix):
            stem, unit = n[: -len(suffix)], ("%" if percent else u)
            break
    words = [_KEEP_CASE.get(w, w) for w in stem.split("_") if w]
    text = " ".join(words) if words else n
    text = text[:1].upper() + text[1:]
    return f"{text} ({unit})" if unit else text


def is_p_column(name: str) -> bool:
    """Whether column `name` holds p-values (``p``, ``p_*``, ``p (...)``): printed ``<0.001`` below 0.001."""
    n = str(name)
    return n == "p" or n.startswith(("p_", "p (", "p "))


def _gpu_cell(name) -> str:
    """One spelling per GPU in every table: the registry's canonical name (`slim gpus`) when the registry knows
    it, else the name lower-cased with '_' as '-' (``b200_sxm`` -> ``b200-sxm``)."""
    text = str(name)
    try:
        return get_gpu(text).name
    except UnknownNameError:
        return text.strip().lower().replace("_", "-").replace(" ", "-")


def short_na(reason: str, notes: list[str]) -> str:
    """An n/a cell that stays short: ``n/a (reason)`` when the reason is short, else ``n/a (note k)`` with the
    reason appended to `notes` as ``n/a (note k): reason`` (the same reason keeps its number)."""
    text = f"n/a ({reason})"
    if len(text) <= SHORT_NA:
        return text
    for i, n in enumerate(notes, start=1):
        if n.split(": ", 1)[-1] == reason and n.startswith("n/a (note "):
            return f"n/a (note {i})"
    k = len(notes) + 1
    notes.append(f"n/a (note {k}): {reason}")
    return f"n/a (note {k})"


def _finite(series: pd.Series) -> np.ndarray:
    vals = pd.to_numeric(series, errors="coerce").to_numpy(dtype=float)
    return vals[np.isfinite(vals)]


def auto_decimals(values: Iterable[float], percent: bool = False) -> int:
    """Fixed decimals for a column: 0 for integers, else enough for three significant digits of the median
    magnitude (0-4); percents get 1 decimal unless smaller values need more."""
    v = np.asarray(list(values), dtype=float)
    v = np.abs(v[np.isfinite(v)])
    if v.size == 0 or np.all(v == np.round(v)):
        return 0
    nz = v[v > 0]
    if nz.size == 0:
        return 0
    mag = math.floor(math.log10(float(np.median(nz))))
    dec = int(min(4, max(0, 2 - mag)))
    return max(dec, 1) if percent else dec


def infer_column(name: str, series: pd.Series) -> Col:
    """The formatting of column `name` inferred from its name and values."""
    numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
    percent = numeric and is_fraction(name)
    dec = None
    if numeric:
        vals = _finite(series) * (100 if percent else 1)
        dec = auto_decimals(vals, percent=percent or str(name).endswith("_pct"))
    return Col(header=human_header(name, percent if numeric else False), decimals=dec, percent=percent)


def format_value(value, decimals: int | None = 2, percent: bool = False, na: str = "n/a") -> str:
    """One cell: fixed `decimals` (no scientific notation, thousands unseparated), x100 when `percent`,
    `na` for a missing value; text and booleans as written."""
    if isinstance(value, Bold):
        return value
    if value is None or value is pd.NA or value is pd.NaT:
        return na
    if isinstance(value, (bool, np.bool_)):
        return "yes" if value else "no"
    if isinstance(value, (int, np.integer)) and not percent:
        return str(int(value))
    if isinstance(value, (float, np.floating, int, np.integer)):
        x = float(value)
        if math.isnan(x):
            return na
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        if percent:
            x *= 100
        text = f"{x:.{decimals if decimals is not None else 2}f}"
        return "0" + text[2:] if text.startswith("-0") and float(text) == 0 else text
    return str(value)


def format_table(
    df: pd.DataFrame,
    columns: Mapping[str, Col] | None = None,
    *,
    na: str = "n/a (no data)",
    index: bool = False,
) -> tuple[pd.DataFrame, list[bool]]:
    """`df` as text cells under human headers, and per-column "is numeric" flags (for right alignment).

    `columns` overrides the inferred formatting of named columns (fields left None keep the inferred value);
    `na` is printed where a value is missing unless the column's `Col.na` gives its own reason."""
    frame = df.reset_index() if index else df
    columns = dict(columns or {})
    unknown = [c for c in columns if c not in frame.columns]
    if unknown:
        raise DataError(
            f"format_table: column(s) {unknown} not in the table (columns: {list(frame.columns)})"
        )
    out, numeric = {}, []
    for name in frame.columns:
        series = frame[name]
        col = infer_column(name, series)
        if name in columns:
            over = columns[name]
            col = replace(col, **{k: v for k, v in over.__dict__.items() if v is not None and v is not False})
            if over.percent and over.header is None:
                col = replace(col, header=human_header(name, True))
        text_na = col.na or na
        header = col.header or str(name)
        if is_p_column(str(name)) or is_p_column(header):
            out[header] = [format_p(v, text_na) for v in series]
        elif str(name) == "gpu":
            out[header] = [text_na if pd.isna(v) else _gpu_cell(v) for v in series]
        else:
            out[header] = [format_value(v, col.decimals, col.percent, text_na) for v in series]
        numeric.append(pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series))
    headers = list(out)
    if len(set(headers)) != len(headers):
        raise DataError(
            f"format_table: two columns get the same header {headers}; give one a Col(header=...)"
        )
    return pd.DataFrame(out, columns=headers, dtype=object), numeric


def _is_bold(cell) -> bool:
    return isinstance(cell, Bold)


def markdown(text: pd.DataFrame, numeric: list[bool], notes: Iterable[str] = ()) -> str:
    """A Markdown pipe table of already formatted cells (numbers right-aligned), notes below it."""

    def esc(s: str) -> str:
        return str(s).replace("|", r"\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in text.columns) + " |"]
    lines.append("|" + "|".join("---:" if n else ":---" for n in numeric) + "|")
    for row in text.itertuples(index=False, name=None):
        lines.append("| " + " | ".join(f"**{esc(c)}**" if _is_bold(c) else esc(c) for c in row) + " |")
    notes = list(notes)
    if notes:
        lines.append("")
        lines += [f"Note: {n}" for n in notes]
    return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"$<$",
    ">": r"$>$",
}
#: Two-character operators typeset as one symbol (checked before the single characters).
_LATEX_PAIRS = {"<=": r"$\leq$", ">=": r"$\geq$"}
#: Packages a `.tex` table needs, named in its first line.
LATEX_PACKAGES = L.PACKAGES
#: A text column whose longest cell is longer than this many characters wraps in a `p{}` column; a column whose
#: header is longer than its cells and than this wraps its header.
WRAP_CHARS = 24
#: Approximate width of one character of the table's font, in em, for `p{}` column widths.
_EM_PER_CHAR = 0.55
#: Width of one character of a header word, in em: the widest letters (capitals, m, w) run to about 0.75 em, so a
#: header word that cannot break is given room for them (at 0.55 em some overran their column by up to 7 pt).
_HEADER_EM_PER_CHAR = 0.75


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped; ``<=`` and ``>=`` as the symbols."""
    text, out, i = str(text), [], 0
    while i < len(text):
        pair = text[i : i + 2]
        if pair in _LATEX_PAIRS:
            out.append(_LATEX_PAIRS[pair])
            i += 2
            continue
        out.append(_LATEX_SPECIAL.get(text[i], text[i]))
        i += 1
    return "".join(out)


def _column_spec(header: str, cells: list[str], numeric: bool) -> str:
    """`l`/`r`, or a ragged `p{}` column when a text cell or the header is too long for one line."""
    longest = max((len(str(c)) for c in cells), default=0)
    wrap = (not numeric and longest > WRAP_CHARS) or len(header) > max(longest, WRAP_CHARS // 2)
    if not wrap:
        return "r" if numeric else "l"
    longest_word = max((len(w) for w in header.split()), default=1)
    width = max(max(min(longest, WRAP_CHARS), 6) * _EM_PER_CHAR, longest_word * _HEADER_EM_PER_CHAR)
    align = r"\raggedleft" if numeric else r"\raggedright"
    return f">{{{align}\\arraybackslash}}p{{{width:.1f}em}}"


def _breakable(tex: str) -> str:
    """Let a note or a wrapping cell break after underscores and slashes (file and column names are long
    unbreakable words)."""
    return tex.replace("\\_", "\\_\\allowbreak{}").replace("/", "/\\allowbreak{}")


def latex(text: pd.DataFrame, numeric: list[bool], notes: Iterable[str] = ()) -> str:
    """The `.tex` of already formatted cells, laid out for a two-column paper and ready for ``\\input``: booktabs
    tabulars in their own floats, long text cells and long headers wrapping in `p{}` columns, the notes a wrapped
    footnote-size paragraph after the table. Needs `LATEX_PACKAGES`.

    The layout follows from the table's estimated size (`slimlib.experiments.outputs.latex`, which states the rule
    and the page it sizes for): a ``table`` at ``\\columnwidth`` when the table fits the column at scale >= 0.85;
    else one ``table*`` at ``\\textwidth`` when it fits there at scale >= 0.75; else column parts, each a
    ``table*`` repeating the key (row-label) columns. A table taller than the page is cut into row chunks that
    repeat the header, floats after the first captioned "(continued)". A float shrinks to its width only when
    wider; its estimated scale is written as ``% slim-scale: 0.83`` before it (never below 0.7). The caption is
    the document's: ``\\def\\slimcaption{...}`` (and ``\\def\\slimlabel{...}``) before ``\\input``."""
    headers = [str(h) for h in text.columns]
    specs = [
        _column_spec(h, list(text.iloc[:, i]), n)
        for i, (h, n) in enumerate(zip(headers, numeric, strict=True))
    ]
    # a wrapping text column may hold a file or column name longer than its width: let it break there too
    wraps = [s.startswith(">") and not n for s, n in zip(specs, numeric, strict=True)]
    rows = list(text.itertuples(index=False, name=None))
    rows_tex = []
    for row in rows:
        tex = [_breakable(latex_escape(c)) if w else latex_escape(c) for c, w in zip(row, wraps, strict=True)]
        rows_tex.append([f"\\textbf{{{t}}}" if _is_bold(c) else t for c, t in zip(row, tex, strict=True)])
    notes = [str(n) for n in notes]
    layout = L.plan(
        headers,
        [[str(c) for c in row] for row in rows],
        specs,
        bold=[[_is_bold(c) for c in row] for row in rows],
        breakable=wraps,
        notes=notes,
    )
    return L.render(
        layout,
        specs,
        [latex_escape(h) for h in headers],
        rows_tex,
        [_breakable(latex_escape(n)) for n in notes],
    )


def high_mape_note(values: Mapping[str, float], limit: float = 100.0) -> str | None:
    """A note naming every MAPE above `limit` percent (`values`: label -> MAPE %), or None when there is none."""
    big = [(k, v) for k, v in values.items() if np.isfinite(v) and v > limit]
    if not big:
        return None
    listed = "; ".join(f"{k} {v:.0f}%" for k, v in big)
    return (
        f"MAPE above {limit:.0f}% ({listed}): the prediction is off by more than the measured value itself; "
        "read these as failures of the method on that scenario, not as precise error levels."
    )


def format_sig(x: float, sig: int = 3, na: str = "n/a") -> str:
    """`x` to `sig` significant digits in positional notation (never scientific): 1.23e-06 -> 0.00000123."""
    if x is None or not np.isfinite(x):
        return na
    if abs(x) < 1e-6:  # a fitted value at a zero bound, up to solver noise
        return "0"
    mag = math.floor(math.log10(abs(float(x))))
    dec = max(0, sig - 1 - mag)
    return f"{float(x):.{dec}f}"


#: Display scaling of parameter units (seconds-based units shown in ms or microseconds to avoid tiny numbers).
UNIT_SCALES = {
    "s/token": (1e6, "µs/token"),
    "s/step": (1e3, "ms/step"),
    "s/(layer (D/1024)^2 token)": (1e9, "ns/(layer (D/1024)^2 token)"),  # gamma of Eq. 10: about 1e-7 s
    "-": (1.0, "dimensionless"),
}


def parameter_display(params: pd.DataFrame, decimals: int = 3) -> pd.DataFrame:
    """Paper-ready parameter table from columns method, scenario, fold, parameter, unit, estimate, stderr, ci_lo,
    ci_hi, at_bound (and ``unstable`` when the fit info has it): values in display units (`UNIT_SCALES`) at
    fixed `decimals`, "n/a (reason)" gaps; an interval is clipped to the parameter's bounds when `lower`/`upper`
    columns give them (an interval crossing a physical bound is not shown past it)."""
    rows = []
    for r in params.itertuples(index=False):
        d = dict(zip(params.columns, r, strict=True))
        scale, unit = UNIT_SCALES.get(r.unit, (1.0, r.unit))
        se_na = "n/a (at bound)" if r.at_bound else "n/a (not estimable)"
        se = np.nan if r.at_bound else r.stderr
        lo, hi = r.ci_lo, r.ci_hi
        lower, upper = d.get("lower", np.nan), d.get("upper", np.nan)
        if np.isfinite(lo) and lower is not None and np.isfinite(lower):
            lo = max(lo, lower)
        if np.isfinite(hi) and upper is not None and np.isfinite(upper):
            hi = min(hi, upper)
        row = {
            "Method": r.method,
            "Scenario": r.scenario,
            "Fold": r.fold,
            "Parameter": r.parameter,
            "Unit": unit,
            "Estimate": format_value(r.estimate * scale, decimals),
            "Std. error": format_value(se * scale, decimals, na=se_na),
            "95% CI": (
                f"[{format_value(lo * scale, decimals)}, {format_value(hi * scale, decimals)}]"
                if np.isfinite(lo) and np.isfinite(hi)
                else se_na
            ),
            "At bound": "yes" if r.at_bound else "no",
        }
        if "unstable" in params.columns:
            row["Unstable"] = "yes" if bool(d["unstable"]) else "no"
        if "note" in params.columns:
            row["Note"] = str(d["note"]) if isinstance(d["note"], str) else ""
        rows.append(row)
    return pd.DataFrame(rows, dtype=object)


#: Table II row names where the scenario's machine name would mislead: a different experiment than the paper's row.
SCENARIO_LABELS = {"context-transfer": "context transfer IL = OL (LLM-Inference-Bench, MI300X/MI250)"}


def paper_table2(
    long: pd.DataFrame,
    metric: str,
    *,
    reference: str = "paper",
    na_reasons: Mapping[str, str] | None = None,
    method_labels: Mapping[str, str] | None = None,
    scenario_labels: Mapping[str, str] | None = None,
    decimals: int = 1,
    truths: Mapping[str, str] | None = None,
    not_held_out: Mapping[str, str] | None = None,
    alpha: float = 0.05,
) -> pd.DataFrame:
    """Table II in the paper's shape for one metric: scenarios as rows (named by `scenario_labels`, default
    `SCENARIO_LABELS`), methods as columns (the paper's, `PAPER_TABLE2_METHODS`, first in its order, the
    package's extensions to their right), each cell "MAPE [95% CI]" plus the Wilcoxon p-value against
    `reference`. The lowest MAPE of a row is bold only where it is significantly lowest (`significantly_best`).
    A cell whose predictions include non-physical values (``n_nonphysical`` > 0: a predicted value <= 0) is marked
    "(k <= 0)", a cell in `not_held_out` ("scenario / method" -> why its test rows are not held out) is marked
    "†"; neither is ever bold. `truths` (scenario -> ground truth of `metric`) become notes, scenarios sharing one
    definition listed together. Long n/a reasons become "n/a (note k)"; ``attrs["notes"]`` holds the notes.

    `long` has columns scenario, method, metric, n_train, n_test, mape_pct, ci_lo_pct, ci_hi_pct, p_wilcoxon
    (and n_nonphysical); `na_reasons` maps "scenario" or "scenario / method" to the reason a cell is empty."""
    na_reasons = dict(na_reasons or {})
    held_out_not = dict(not_held_out or {})
    labels = dict(method_labels or {})
    slabels = dict(SCENARIO_LABELS if scenario_labels is None else scenario_labels)
    t = long[long["metric"] == metric]
    scenarios = list(dict.fromkeys(t["scenario"]))
    present = list(dict.fromkeys(t["method"]))
    methods = [m for m in PAPER_TABLE2_METHODS if m in present] + [
        m for m in present if m not in PAPER_TABLE2_METHODS
    ]
    notes: list[str] = []
    bad_cells: list[str] = []
    rows = []
    for s in scenarios:
        part = t[t["scenario"] == s].set_index("method")
        first = part.iloc[0]
        n_bad = part["n_nonphysical"] if "n_nonphysical" in part.columns else pd.Series(0, index=part.index)
        n_bad = n_bad.fillna(0).astype(int)
        row = {
            "Scenario": slabels.get(s, s),
            "Train / test rows": f"{int(first['n_train'])} / {int(first['n_test'])}",
        }
        best = significantly_best(
            part[n_bad == 0], reference, [m for m in part.index if f"{s} / {m}" in held_out_not], alpha
        )
        for m in methods:
            head = labels.get(m, m)
            r = part.loc[m] if m in part.index else None
            if r is None or not np.isfinite(r["mape_pct"]):
                reason = na_reasons.get(f"{s} / {m}") or na_reasons.get(s) or f"{m} predicts no {metric}"
                row[head] = short_na(reason, notes)
                continue
            text = (
                f"{r['mape_pct']:.{decimals}f} [{r['ci_lo_pct']:.{decimals}f}, {r['ci_hi_pct']:.{decimals}f}]"
            )
            if m != reference and np.isfinite(r.get("p_wilcoxon", np.nan)):
                p = r["p_wilcoxon"]
                text += ", p<0.001" if p < 0.001 else f", p={p:.3f}"
            if n_bad[m] > 0:
                text += f" ({n_bad[m]} <= 0)"
                bad_cells.append(f"{slabels.get(s, s)} / {head}: {n_bad[m]} of {int(r['n_test'])}")
            if f"{s} / {m}" in held_out_not:
                text += " †"
                notes.append(f"† {slabels.get(s, s)} / {head}: not held out ({held_out_not[f'{s} / {m}']}).")
            row[head] = Bold(text) if m == best else text
        rows.append(row)
    if bad_cells:
        notes.append(
            f"Non-physical predictions (a predicted {metric} <= 0), counted as failures: "
            + "; ".join(bad_cells)
            + ". Each enters the MAPE with an absolute error of at least 100%, so these cells measure a "
            "broken baseline, not an error level; they are never marked best."
        )
    notes.append(
        f"Bold: the lowest MAPE of its row where its 95% interval overlaps no other method's and, for a method "
        f"other than {method_label(reference)}, its Wilcoxon p against {method_label(reference)} is below {alpha}; "
        "a row without such a cell has none in bold."
    )
    by_truth: dict[str, list[str]] = {}
    for scen, truth in (truths or {}).items():
        if scen in scenarios:
            by_truth.setdefault(truth, []).append(slabels.get(scen, scen))
    notes += [f"Ground truth of {', '.join(names)}: {truth}." for truth, names in by_truth.items()]
    out = pd.DataFrame(rows, dtype=object)
    out.attrs["notes"] = notes
    return out


def significantly_best(
    part: pd.DataFrame, reference: str, never_bold: Iterable[str] = (), alpha: float = 0.05
) -> str | None:
    """The method of one Table II row (`part`: indexed by method, columns mape_pct, ci_lo_pct, ci_hi_pct,
    p_wilcoxon against `reference`) whose MAPE is lowest and significantly so: its 95% interval lies below every
    other method's, and (unless it is the reference) its Wilcoxon p against the reference is below `alpha`;
    None when no cell qualifies. Methods in `never_bold` (cells not held out) are never best, but still compared
    against; leave cells with non-physical predictions out of `part`."""
    finite = part[np.isfinite(part["mape_pct"].astype(float))]
    if finite.empty:
        return None
    best = str(finite["mape_pct"].astype(float).idxmin())
    if best in set(never_bold):
        return None
    others = finite.drop(index=best)
    if (others["ci_lo_pct"].astype(float) <= float(finite.loc[best, "ci_hi_pct"])).any():
        return None
    if best != reference and len(others):
        p = float(finite.loc[best].get("p_wilcoxon", np.nan))
        if not (np.isfinite(p) and p < alpha):
            return None
    return best


def bca_summary_display(summary: pd.DataFrame, labels: Mapping[str, str] | None = None) -> pd.DataFrame:
    """Paper-ready SLIM-BCA summary: one row per variant and SLO, mean quality and predicted-throughput MAPE with
    their 95% intervals, Wilcoxon p-values against the faithful variant ("n/a (reference)" on its own rows)."""
    labels = dict(labels or {})
    rows: list[dict[str, object]] = []
    for r in summary.itertuples(index=False):
        ref = "n/a (reference)"
        rows.append(
            {
                "Advisor": labels.get(str(r.variant), str(r.variant)),
                "SLO": r.slo,
                "Curves": str(r.curves),
                "Mean quality (%) [95% CI]": f"{r.mean_quality_pct:.1f} [{r.quality_ci_lo_pct:.1f}, {r.quality_ci_hi_pct:.1f}]",
                "Worst quality (%)": f"{r.min_quality_pct:.1f}",
                "Exact pick (%)": f"{r.exact_pct:.0f}",
                "Throughput MAPE at B_cap (%) [95% CI]": (
                    f"{r.pred_mape_pct:.1f} [{r.pred_mape_ci_lo_pct:.1f}, {r.pred_mape_ci_hi_pct:.1f}]"
                ),
                "SLO violations": str(r.slo_violations),
                "Efficiency misses": str(r.efficiency_misses),
                **({"Preempting picks": str(r.preempting_picks)} if hasattr(r, "preempting_picks") else {}),
                **({"Misses (quality 0)": str(r.misses)} if hasattr(r, "misses") else {}),
                "p quality vs faithful": ref
                if not np.isfinite(r.p_quality_vs_ref)
                else format_p(r.p_quality_vs_ref, "n/a"),
                "p MAPE vs faithful": ref
                if not np.isfinite(r.p_mape_vs_ref)
                else format_p(r.p_mape_vs_ref, "n/a"),
            }
        )
    return pd.DataFrame(rows, dtype=object)
