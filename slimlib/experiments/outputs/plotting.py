"""House style for every figure, and deterministic writers for figures (PDF + PNG) and tables (CSV, Markdown, LaTeX).

Figures are sized for a two-column paper: single column 3.4 in wide, double column 7.0 in. Colours come from the
Okabe-Ito palette (colour-blind safe) without its yellow, which vanishes on white; every figure takes the colour and
marker of a model, an output length or a method from the house maps below, so one model looks the same everywhere.
Saving the same figure twice gives byte-identical files. Tables are written through `slimlib.experiments.outputs.table_format`
(fixed decimals per column, percents, units in headers, "n/a (reason)", no scientific notation).
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl
import numpy as np
import pandas as pd
from cycler import cycler

from slimlib.errors import DataError
from slimlib.experiments.outputs import table_format as T
from slimlib.io import write_bytes, write_text
from slimlib.registry.gpus import get_gpu

#: Okabe & Ito (2008) colour-blind-safe palette (black moved last so the first colours are the distinct hues).
OKABE_ITO = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
#: The house colours: Okabe-Ito without yellow (#F0E442 has too little contrast on white), blue first.
HOUSE_COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]
# One meaning per colour family across figures: the Okabe-Ito hues of METHOD_STYLES mean estimators (Tol muted:
# peer estimators); models take earth tones (brown OPT, purple Llama-2, slate for the engine's GQA family, darker =
# larger); lengths take the sequential viridis map (short dark, long light), batch sizes plasma; kernel groups and
# phases COMPONENT_COLORS; scenarios and other categories CATEGORY_COLORS. No non-method series takes a method colour
# (`tests/test_plotting_colours.py` checks every map).
#: Model -> (colour, marker): brown OPT, purple Llama-2 (darker = larger), and a distinct marker for each.
MODEL_STYLES = {
    "opt-1.3b": ("#BF812D", "o"),
    "opt-2.7b": ("#8C510A", "s"),
    "llama-2-7b": ("#9970AB", "^"),
    "llama-2-13b": ("#762A83", "D"),
}
#: Output length (tokens) -> (colour, marker): viridis samples, short (dark) to long (light).
OL_STYLES = {
    130: ("#440154", "o"),
    260: ("#355F8D", "s"),
    390: ("#20A386", "^"),
    520: ("#86D549", "D"),
}
#: Estimator (registry name, `slimlib.model.methods.METHODS`, or peer name) -> (colour, line style) on every
#: plot: one colour per method, no two methods alike.
METHOD_STYLES = {
    "paper": ("#0072B2", "-"),
    "slim": ("#D55E00", "--"),
    "no-kv-scan": ("#56B4E9", (0, (3, 1, 1, 1))),
    "no-dense-decode": ("#CC79A7", (0, (1, 1))),
    "llmvisor-agg": ("#009E73", "-."),
    "imai-ood-lr": ("#E69F00", ":"),
    # peer estimators (`slimlib.experiments.transfer_study.peer_comparison`): Paul Tol's muted colours, no
    # Okabe-Ito hue, so no peer shares a colour with a registered method
    "roofline": ("#882255", (0, (4, 1, 1, 1, 1, 1))),
    "genz": ("#999933", (0, (6, 2))),
    "llm-analysis": ("#332288", (0, (2, 2))),
    "aiconfigurator": ("#44AA99", (0, (8, 2, 2, 2))),
}
#: Qualitative colours of non-method categories (scenarios, SLO levels, deployments, GPUs): ten saturated hues
#: from ColorBrewer Set1/Dark2, matplotlib tab10 and Tol dark, each at least 20 CIELAB units from every colour of
#: METHOD_STYLES and METHOD_FALLBACK_COLORS and 25 from one another, so none reads as a method.
CATEGORY_COLORS = ["#E41A1C", "#17BECF", "#2CA02C", "#9467BD", "#BCBD22", "#E7298A", "#222255", "#7F7F7F",
                   "#666633", "#225555"]  # fmt: skip
#: Scenario (train/validation design) colours: the category colours, one per scenario (the evaluation has 8);
#: with `SCENARIO_MARKERS` every scenario gets its own colour-marker pair.
SCENARIO_COLORS = CATEGORY_COLORS
SCENARIO_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*", "h", "p"]
#: SLO level -> colour (category colours).
SLO_COLORS = {"tight": CATEGORY_COLORS[0], "loose": CATEGORY_COLORS[1]}
#: Kernel group, serving phase or hardware counter -> colour of its bars: Tol light and dark shades, none a
#: method's colour; one component keeps its colour in every breakdown (attention salmon, GEMMs dark teal).
COMPONENT_COLORS = {
    "attention": "#EE8866",
    "gemm": "#225555",
    "ffn_gemm": "#225555",
    "proj_gemm": "#99DDFF",
    "lm_head": "#666633",
    "norm_elementwise": "#EEDD88",
    "other": "#BBBBBB",
    "prefill": "#BBCC33",
    "decode": "#222255",
    "tensor": "#225555",
    "sm_issue": "#666633",
    "dram": "#EE8866",
}
#: Roofline regime -> shading colour (light, drawn with low alpha; labels in REGIME_TEXT_COLOR).
REGIME_COLORS = {"memory-bound": "#FFAABB", "compute-bound": "#BBCC33"}
REGIME_TEXT_COLOR = "#444444"
#: Models of the CPU-engine campaign (`slimlib.registry.engine_models`): earth tones as in MODEL_STYLES, OPT
#: shapes / 8 in browns and the Qwen3-style GQA family in slate greys, darker = larger, a marker each.
ENGINE_MODEL_STYLES = {
    "opt-1.3b-s8": ("#C8A064", "o"),
    "opt-2.7b-s8": ("#A6611A", "s"),
    "opt-6.7b-s8": ("#70400C", "D"),
    "opt-13b-s8": ("#3F2406", "^"),
    "qwen3s-h512": ("#8FA3B5", "v"),
    "qwen3s-h768": ("#5C7389", "P"),
    "qwen3s-h1024": ("#2F4558", "X"),
}


def scenario_styles(names) -> dict[str, tuple[str, str]]:
    """(colour, marker) of each scenario name, in the order given (distinct for up to 10 scenarios)."""
    return {
        n: (SCENARIO_COLORS[i % len(SCENARIO_COLORS)], SCENARIO_MARKERS[i % len(SCENARIO_MARKERS)])
        for i, n in enumerate(dict.fromkeys(names))
    }


def category_color(i: int) -> str:
    """The `i`-th category colour (cycled)."""
    return CATEGORY_COLORS[int(i) % len(CATEGORY_COLORS)]


#: GPU class (registry-name prefix, first match) -> its colour in every figure (category colours, one per class)
GPU_COLORS = (
    ("h100", "#E41A1C"), ("gh200", "#E41A1C"), ("h200", "#17BECF"), ("b200", "#2CA02C"), ("a100", "#9467BD"),
    ("mi300x", "#BCBD22"), ("mi355x", "#E7298A"), ("mi250", "#222255"), ("l40s", "#666633"), ("cpu", "#7F7F7F"),
)  # fmt: skip


def gpu_color(name: str) -> str:
    """The colour of GPU `name` (registry name or alias) in every figure (`GPU_COLORS`)."""
    gpu = get_gpu(name).name
    for prefix, colour in GPU_COLORS:
        if gpu.startswith(prefix):
            return colour
    raise DataError(
        f"GPU {gpu!r} has no colour; add its class to slimlib.experiments.outputs.plotting.GPU_COLORS"
    )


#: Colours of estimators neither map lists (Tol muted): none is a colour of METHOD_STYLES.
METHOD_FALLBACK_COLORS = ["#117733", "#88CCEE", "#AA4499", "#DDCC77", "#661100", "#6699CC"]
_FALLBACK_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
#: Batch-size tick positions (powers of four, plain numbers).
BATCH_TICKS = [1, 4, 16, 64, 256, 1024]


def _fallback(key: str, palette: list[str]) -> tuple[str, str]:
    """A stable colour and marker for a name the house maps do not list (same name, same style, every run)."""
    h = sum((i + 1) * ord(ch) for i, ch in enumerate(str(key)))
    return palette[h % len(palette)], _FALLBACK_MARKERS[h % len(_FALLBACK_MARKERS)]


#: Colours of models the house map does not list: more earth tones, none of them a method colour.
MODEL_FALLBACK_COLORS = ["#A6761D", "#B15928", "#6A3D9A", "#543005", "#40004B", "#7F6000"]


def model_style(model: str) -> tuple[str, str]:
    """(colour, marker) of `model` in every figure."""
    return MODEL_STYLES.get(str(model).lower()) or _fallback(model, MODEL_FALLBACK_COLORS)


def ol_style(output_len: float) -> tuple[str, str]:
    """(colour, marker) of an output length in every figure (a length not in OL_STYLES: `length_color`)."""
    key = int(round(float(output_len)))
    return OL_STYLES.get(key) or (length_color(key), _fallback(str(key), HOUSE_COLORS[:6])[1])


def length_color(length: float, lo: float = 64.0, hi: float = 4096.0) -> str:
    """Sequential (viridis, 0-0.85) colour of a token length on a log scale from `lo` to `hi`: the one colour
    family for lengths in every figure."""
    from matplotlib.colors import to_hex

    x = (np.log(max(float(length), lo)) - np.log(lo)) / (np.log(hi) - np.log(lo))
    return str(to_hex(mpl.colormaps["viridis"](0.85 * float(np.clip(x, 0.0, 1.0)))))


def batch_color(batch_size: float, lo: float = 1.0, hi: float = 1024.0) -> str:
    """Sequential (plasma, 0-0.85) colour of a batch size on a log scale from `lo` to `hi`: the one colour family
    for batch sizes in every figure (not viridis, which means lengths)."""
    from matplotlib.colors import to_hex

    x = (np.log(max(float(batch_size), lo)) - np.log(lo)) / (np.log(hi) - np.log(lo))
    return str(to_hex(mpl.colormaps["plasma"](0.85 * float(np.clip(x, 0.0, 1.0)))))


def method_style(method: str) -> tuple[str, object]:
    """(colour, line style) of an estimator (registry name) in every figure."""
    return METHOD_STYLES.get(method) or (_fallback(method, METHOD_FALLBACK_COLORS)[0], "-")


def batch_axis(ax, axis: str = "x") -> None:
    """Log-2 batch-size axis with plain ticks 1, 4, 16, 64, 256 (no 3x10^1 labels, no minor labels)."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, NullLocator

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_major_locator(FixedLocator(BATCH_TICKS))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    target.set_minor_locator(NullLocator())
    target.set_minor_formatter(NullFormatter())


def plain_log_axis(ax, axis: str = "y", subs: tuple = (1.0, 2.0, 5.0)) -> None:
    """Log-10 axis with plain tick labels (0.5, 1, 2, 10, 1000000) at `subs` x powers of ten, never "3x10^1"."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log")
    target.set_major_locator(LogLocator(base=10, subs=subs))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:.0f}" if v >= 1 else f"{v:g}"))
    target.set_minor_formatter(NullFormatter())


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
        "axes.prop_cycle": cycler(color=HOUSE_COLORS),
        "image.cmap": "viridis",
        "pdf.fonttype": 42,  # embed TrueType subsets (editable text, accepted by publishers), not Type 3
        "ps.fonttype": 42,
        "svg.hashsalt": "slimlib",
        "path.simplify": True,
    }


def use_house_style() -> None:
    """Apply the house style (seaborn "ticks" theme, house colours, paper font sizes) to matplotlib globally.

    Works with any backend (Agg in batch runs, inline in Jupyter); call it once at the top of each notebook.
    """
    import seaborn as sns

    sns.set_theme(context="paper", style="ticks", palette=HOUSE_COLORS, rc=house_rc())
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


#: Environment variable naming the output folder of notebooks run with the default (empty) `figures_dir`.
FIGURES_ENV = "SLIM_FIGURES_DIR"


def figures_folder(path: str | Path = "") -> Path:
    """The output folder of a notebook: `path` when given (absolute, or relative to the working directory); for an
    empty `path`, `$SLIM_FIGURES_DIR`, else the repository's `figures/` beside the `slimlib` package, whatever the
    working directory (JupyterLab opens a notebook in `notebooks/`, papermill runs it where it is called)."""
    if str(path):
        return Path(path)
    env = os.environ.get(FIGURES_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[3] / "figures"


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
    for fmt, data in figure_bytes(fig, formats, dpi=dpi).items():
        path = outdir / f"{name}.{fmt}"
        write_bytes(path, data)  # atomic: a temporary file beside the target, renamed into place
        paths.append(path)
    return paths


def figure_bytes(fig, formats: Sequence[str] = ("pdf", "png"), *, dpi: int = DPI) -> dict[str, bytes]:
    """`fig` rendered in each of `formats` (``pdf``, ``png``) as `save_figure` writes it: format -> bytes."""
    out = {}
    for fmt in formats:
        fmt = fmt.lower()
        if fmt == "pdf":
            meta = dict(_PDF_METADATA)
        elif fmt == "png":
            meta = dict(_PNG_METADATA)
        else:
            raise DataError(f"save_figure: unsupported format {fmt!r}; use 'pdf' and/or 'png'")
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
        out[fmt] = buf.getvalue()
    return out


# --------------------------------------------------------------------------------------------------- tables
def _text_table(df, index, digits, columns, na) -> tuple[pd.DataFrame, list[bool]]:
    frame = df.reset_index() if index else df
    cols = dict(columns or {})
    if digits is not None:
        for c in frame.columns:
            if pd.api.types.is_float_dtype(frame[c]) and c not in cols:
                cols[c] = T.Col(decimals=int(digits))
    return T.format_table(frame, cols, na=na)


def table_to_markdown(
    df: pd.DataFrame,
    *,
    index: bool = False,
    digits: int | None = None,
    columns=None,
    notes=(),
    na="n/a (no data)",
) -> str:
    """A paper-ready Markdown pipe table of `df` (`slimlib.experiments.outputs.table_format`: human headers with units, fixed
    decimals per column, or `digits` decimals for every float column; percents; "n/a (reason)"), notes below."""

    return T.markdown(*_text_table(df, index, digits, columns, na), notes)


def table_to_latex(
    df: pd.DataFrame,
    *,
    index: bool = False,
    digits: int | None = None,
    columns=None,
    notes=(),
    na="n/a (no data)",
) -> str:
    """A paper-ready LaTeX table of `df` (needs `table_format.LATEX_PACKAGES`): its own floats (`table`, `table*`, or
    column and row parts, `slimlib.experiments.outputs.latex`), for `\\input` where the table goes; the caption comes
    from ``\\def\\slimcaption{...}`` before the `\\input`."""

    return T.latex(*_text_table(df, index, digits, columns, na), notes)


def save_table(
    df: pd.DataFrame,
    name: str,
    outdir: str | Path = "figures",
    *,
    index: bool = False,
    digits: int | None = None,
    formats: Sequence[str] = ("csv", "md", "tex"),
    columns=None,
    notes: Sequence[str] = (),
    display: pd.DataFrame | None = None,
    na: str = "n/a (no data)",
) -> list[Path]:
    """Write `df` as `outdir/name.csv` (machine names, full precision) and paper-ready `name.md`, `name.tex`.

    The Markdown and LaTeX show `display` when given (e.g. the paper-shaped pivot of a long CSV, cells already
    formatted), else `df` formatted by `slimlib.experiments.outputs.table_format` (`columns`: per-column `Col` overrides;
    `digits`: fixed decimals for every float column; `na`: text of a missing value; `notes`: lines below the
    table). Each file is written atomically; output is deterministic. Returns the written paths.
    """

    if not isinstance(df, pd.DataFrame):
        raise DataError(f"save_table: expected a pandas DataFrame for {name!r}, got {type(df).__name__}")
    name = _check_name(name)
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    shown = df if display is None else display
    paths = []
    for fmt in formats:
        path = outdir / f"{name}.{fmt}"
        if fmt == "csv":
            text = df.to_csv(index=index, lineterminator="\n")
        elif fmt == "md":
            text = table_to_markdown(shown, index=index, digits=digits, columns=columns, notes=notes, na=na)
        elif fmt == "tex":
            text = table_to_latex(shown, index=index, digits=digits, columns=columns, notes=notes, na=na)
        else:
            raise DataError(f"save_table: unsupported format {fmt!r}; use 'csv', 'md' and/or 'tex'")
        write_text(path, text)
        paths.append(path)
    return paths
