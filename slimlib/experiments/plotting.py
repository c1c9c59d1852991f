"""House style for every figure, and deterministic writers for figures (PDF + PNG) and tables (CSV, Markdown, LaTeX).

Figures are sized for a two-column paper: single column 3.4 in wide, double column 7.0 in. Colours are the
Okabe-Ito palette (colour-blind safe). Saving the same figure twice gives byte-identical files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd

from slimlib.errors import DataError

#: Okabe & Ito (2008) colour-blind-safe palette (black moved last so the first colours are the distinct hues).
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
#: Figure widths in inches for a two-column paper.
SINGLE_COLUMN_IN = 3.4
DOUBLE_COLUMN_IN = 7.0
#: Default heights in inches.
SINGLE_HEIGHT_IN = 2.4
DOUBLE_HEIGHT_IN = 2.8
#: Raster resolution of saved PNG files.
DPI = 300

_PDF_METADATA = {
    "Creator": "slimlib",
    "Producer": "slimlib (matplotlib)",
    "CreationDate": None,
    "ModDate": None,
}
_PNG_METADATA = {"Software": "slimlib (matplotlib)"}
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def house_rc() -> dict:
    """The matplotlib rcParams of the house style (fonts 7-8 pt, readable at 3.4 in width; TrueType in PDF)."""
    return {
        "figure.figsize": (SINGLE_COLUMN_IN, SINGLE_HEIGHT_IN),
        "figure.dpi": 150,
        "figure.constrained_layout.use": True,
        "savefig.dpi": DPI,
        "font.family": "sans-serif",
        "font.sans-serif": ["DejaVu Sans"],  # ships with matplotlib: same glyphs on every machine
        "font.size": 8,
        "axes.titlesize": 8,
        "axes.labelsize": 8,
        "xtick.labelsize": 7,
        "ytick.labelsize": 7,
        "legend.fontsize": 7,
        "legend.title_fontsize": 7,
        "legend.frameon": False,
        "axes.linewidth": 0.6,
        "axes.grid": True,
        "grid.linewidth": 0.4,
        "grid.alpha": 0.5,
        "lines.linewidth": 1.2,
        "lines.markersize": 3.5,
        "xtick.major.width": 0.6,
        "ytick.major.width": 0.6,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": mpl.cycler(color=OKABE_ITO),
        "image.cmap": "viridis",
        "pdf.fonttype": 42,  # embed TrueType subsets (editable text, accepted by publishers), not Type 3
        "ps.fonttype": 42,
        "svg.hashsalt": "slimlib",
        "path.simplify": True,
    }


def use_house_style() -> None:
    """Apply the house style (seaborn "ticks" theme, Okabe-Ito colours, paper font sizes) to matplotlib globally.

    Works with any backend (Agg in batch runs, inline in Jupyter); call it once at the top of each notebook.
    """
    import seaborn as sns

    sns.set_theme(context="paper", style="ticks", palette=OKABE_ITO, rc=house_rc())
    mpl.rcParams.update(house_rc())


def new_figure(
    nrows: int = 1,
    ncols: int = 1,
    *,
    double: bool = False,
    height: float | None = None,
    **subplots_kw,
):
    """A figure of single-column (3.4 in) or, with `double=True`, double-column (7.0 in) width, and its axes.

    `height` is in inches (default 2.4 single, 2.8 double). Extra keywords go to `plt.subplots`
    (`sharex`, `sharey`, ...). Returns `(fig, ax)` like `plt.subplots`.
    """
    import matplotlib.pyplot as plt

    width = DOUBLE_COLUMN_IN if double else SINGLE_COLUMN_IN
    if height is None:
        height = DOUBLE_HEIGHT_IN if double else SINGLE_HEIGHT_IN
    if not (height > 0):
        raise DataError(f"new_figure: height must be a positive number of inches, got {height!r}")
    subplots_kw.setdefault("layout", "constrained")
    return plt.subplots(nrows, ncols, figsize=(width, height), **subplots_kw)


def _check_name(name: str) -> str:
    name = str(name)
    if not _NAME_RE.match(name) or name.endswith((".pdf", ".png", ".csv", ".md", ".tex")):
        raise DataError(
            f"output name {name!r} must be a bare file stem (letters, digits, '.', '_', '-'; no folder, no "
            "extension), e.g. 'fig3_throughput'; pass the folder as outdir="
        )
    return name


def save_figure(
    fig,
    name: str,
    outdir: str | Path = "figures",
    *,
    formats: Sequence[str] = ("pdf", "png"),
    dpi: int = DPI,
) -> list[Path]:
    """Write `fig` as `outdir/name.pdf` and `outdir/name.png`, byte-identical on every run; return the paths.

    Rendering uses matplotlib's own PDF and Agg writers whatever the interactive backend, with fixed metadata
    (no creation date, fixed producer) so repeated runs give the same bytes.
    """
    name = _check_name(name)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        fmt = fmt.lower()
        if fmt == "pdf":
            meta = dict(_PDF_METADATA)
        elif fmt == "png":
            meta = dict(_PNG_METADATA)
        else:
            raise DataError(f"save_figure: unsupported format {fmt!r}; use 'pdf' and/or 'png'")
        path = outdir / f"{name}.{fmt}"
        fig.savefig(path, format=fmt, dpi=dpi, metadata=meta)
        paths.append(path)
    return paths


# --------------------------------------------------------------------------------------------------- tables
def _format_cell(value, digits: int) -> str:
    """Text of one table cell: floats to `digits` significant digits, integers exact, missing values empty."""
    if value is None or value is pd.NA or value is pd.NaT:
        return ""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (float, np.floating)):
        if math.isnan(value):
            return ""
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if float(value).is_integer() and abs(value) < 10**digits:
            return str(int(value))
        return f"{float(value):.{digits}g}"
    return str(value)


def _table_cells(df: pd.DataFrame, index: bool, digits: int) -> tuple[list[str], list[list[str]], list[bool]]:
    """Header, body rows (as text) and per-column "is numeric" flags of `df`."""
    frame = df.reset_index() if index else df
    header = [str(c) for c in frame.columns]
    numeric = [
        pd.api.types.is_numeric_dtype(frame[c]) and not pd.api.types.is_bool_dtype(frame[c])
        for c in frame.columns
    ]
    rows = [[_format_cell(v, digits) for v in row] for row in frame.itertuples(index=False, name=None)]
    return header, rows, numeric


def table_to_markdown(df: pd.DataFrame, *, index: bool = False, digits: int = 4) -> str:
    """A GitHub-flavoured Markdown pipe table of `df` (numbers right-aligned, floats to `digits` significant digits)."""
    header, rows, numeric = _table_cells(df, index, digits)

    def esc(s: str) -> str:
        return s.replace("|", r"\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |"]
    lines.append("|" + "|".join("---:" if n else ":---" for n in numeric) + "|")
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
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
}


def latex_escape(text: str) -> str:
    """`text` with LaTeX's special characters escaped."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in str(text))


def table_to_latex(df: pd.DataFrame, *, index: bool = False, digits: int = 4) -> str:
    """A booktabs `tabular` of `df` (needs `\\usepackage{booktabs}`), for `\\input` inside a table environment."""
    header, rows, numeric = _table_cells(df, index, digits)
    spec = "".join("r" if n else "l" for n in numeric)
    lines = [f"\\begin{{tabular}}{{{spec}}}", r"\toprule"]
    lines.append(" & ".join(latex_escape(h) for h in header) + r" \\")
    lines.append(r"\midrule")
    lines += [" & ".join(latex_escape(c) for c in row) + r" \\" for row in rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    return "\n".join(lines) + "\n"


def save_table(
    df: pd.DataFrame,
    name: str,
    outdir: str | Path = "figures",
    *,
    index: bool = False,
    digits: int = 4,
    formats: Sequence[str] = ("csv", "md", "tex"),
) -> list[Path]:
    """Write `df` as `outdir/name.csv` (full precision), `name.md` and `name.tex` (`digits` significant digits).

    Output is deterministic: fixed line endings, no timestamps. Returns the written paths.
    """
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"save_table: expected a pandas DataFrame for {name!r}, got {type(df).__name__}")
    name = _check_name(name)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fmt in formats:
        path = outdir / f"{name}.{fmt}"
        if fmt == "csv":
            text = df.to_csv(index=index, lineterminator="\n")
        elif fmt == "md":
            text = table_to_markdown(df, index=index, digits=digits)
        elif fmt == "tex":
            text = table_to_latex(df, index=index, digits=digits)
        else:
            raise DataError(f"save_table: unsupported format {fmt!r}; use 'csv', 'md' and/or 'tex'")
        with open(path, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        paths.append(path)
    return paths
