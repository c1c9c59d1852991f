"""Page layout of the LaTeX tables `table_format.latex` writes: which float, at what scale, split how.

A table is sized from its text with the widths of the 10 pt Computer Modern (T1, `ecrm1000`) characters, for the
smallest common two-column page, LaTeX's own ``\\documentclass[twocolumn,10pt]{article}`` on letter paper
(`COLUMN_PT` 229.5 pt column, `TEXT_PT` 469 pt text width, `TEXT_HEIGHT_PT` 550 pt text height; IEEEtran's
252 / 516 / 690 pt give every table more room). The rule (`plan`):

1. *Column*: a table whose natural width fits the column at scale >= `COLUMN_SCALE` (0.85) is a ``table`` float
   at ``\\columnwidth``.
2. *Text width*: else a table that fits the text width at scale >= `PLAN_SCALE` (0.75) is one ``table*`` float
   at ``\\textwidth``.
3. *Column parts*: else the table is split into column parts, each a ``table*`` float: every part repeats the key
   columns (the shortest leading run of at most `KEY_MAX_COLUMNS` columns, and at most `KEY_MAX_SHARE` of the text
   width, whose cells tell the rows apart); the other columns keep their order and go into the fewest parts that
   each fit the text width at scale >= `PLAN_SCALE`, balanced in width. No table is rotated.
4. *Row chunks*: a table taller than the page is cut into row chunks (the same rows in every column part), each
   float repeating the header row; floats go chunk by chunk, a chunk's parts in order. The notes follow the
   last float, and notes that do not fit there go into further floats. Floats after the first repeat the
   caption with "(continued)" under the same table number.

The float shrinks to its width (``\\resizebox``) only when the tabular is wider; the estimated scale of each
float is written in a ``% slim-scale: 0.83`` comment before it and the applied one is logged by TeX
(``slim-scale: 830/1000``), never below `MIN_SCALE` (0.7). The caption is the document's: ``\\def\\slimcaption{...}``
(and ``\\def\\slimlabel{tab:...}``) before ``\\input`` captions the table; both are cleared at the end of the file.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

#: Width of one column of a two-column page (pt): `article` twocolumn, 10 pt, letter paper.
COLUMN_PT = 229.5
#: Width of the text block, both columns (pt).
TEXT_PT = 469.0
#: floats LaTeX can hold unplaced; a table of more floats gets a ``\clearpage`` after every `FLUSH_EVERY`
FLOAT_QUEUE = 18
FLUSH_EVERY = 16
#: Height of the text block (pt): a float taller than this is "Float too large".
TEXT_HEIGHT_PT = 550.0
#: Smallest scale a table is ever shown at (the test's floor); planning aims at `PLAN_SCALE` to leave room for
#: the error of the width estimate.
MIN_SCALE = 0.7
PLAN_SCALE = 0.75
#: Smallest scale of a table kept in one column before it goes to the text width.
COLUMN_SCALE = 0.85
#: Key columns repeated in every column part: at most this many, at most this share of the text width.
KEY_MAX_COLUMNS = 4
KEY_MAX_SHARE = 0.5
#: Packages every table needs.
PACKAGES = ("booktabs", "array", "graphicx")

_TABCOLSEP_PT = 6.0
_BASELINE_PT = 12.0
#: Caption (two lines and its skip), the three booktabs rules, the notes' line height and font ratio (footnotesize).
_CAPTION_PT = 40.0
_RULES_PT = 16.0
_NOTE_BASELINE_PT = 9.5
_NOTE_FONT = 0.85
#: Share of the page height a float's estimated content may fill (room for the estimate's error).
_HEIGHT_SAFETY = 0.92
_BOLD = 1.15
_SPACE_PT = 3.33
_DEFAULT_PT = 6.0
# ecrm1000 advance widths (pt at 10 pt) of the printable ASCII characters, grouped by width
_WIDTH_GROUPS = {
    2.78: "!',.:;[]`il|", 3.05: "fj", 3.33: "-", 3.61: "I", 3.89: "()t", 3.92: "r", 3.94: "s", 4.44: "cez",
    4.72: "?", 5.0: '"$*/0123456789\\ago{}', 5.14: "J", 5.28: "kqvxy", 5.55: "Sbdhnpu", 6.11: "Z^~", 6.25: "L",
    6.53: "F", 6.8: "EP", 7.08: "B", 7.22: "CTw", 7.36: "R", 7.5: "AHNUVXY", 7.64: "D", 7.78: "&+<=>@KOQ_\u2264\u2265",
    7.85: "G", 8.33: "#%m", 9.16: "M", 10.28: "W",
}  # fmt: skip
_WIDTHS = {c: w for w, chars in _WIDTH_GROUPS.items() for c in chars}
_P_WIDTH = re.compile(r"p\{([\d.]+)em\}")


def text_width(text: str, bold: bool = False) -> float:
    """Estimated width (pt) of `text` on one line in 10 pt Computer Modern (``<=`` as one symbol)."""
    text = str(text).replace("<=", "\u2264").replace(">=", "\u2265")
    w = sum(_SPACE_PT if c == " " else _WIDTHS.get(c, _DEFAULT_PT) for c in text)
    return w * (_BOLD if bold else 1.0)


def _words(text: str, breakable: bool) -> list[tuple[float, bool]]:
    """(width, followed by a space) of each unbreakable piece of `text`."""
    out: list[tuple[float, bool]] = []
    for word in str(text).split(" "):
        pieces = re.split(r"(?<=[_/])", word) if breakable else [word]
        pieces = [p for p in pieces if p] or [""]
        out += [(text_width(p), False) for p in pieces[:-1]] + [(text_width(pieces[-1]), True)]
    return out


def wrapped_lines(
    text: str, width: float, breakable: bool = False, font: float = 1.0, bold: bool = False
) -> int:
    """Lines `text` takes when wrapped greedily in `width` pt (ragged right; `breakable`: also after ``_``, ``/``)."""
    if not str(text):
        return 1
    lines, used, gap = 1, 0.0, 0.0
    k = font * (_BOLD if bold else 1.0)
    for w, spaced in _words(text, breakable):
        w *= k
        if used and used + gap + w > width:
            lines, used = lines + 1, w
        else:
            used += gap + w
        gap = _SPACE_PT * k if spaced else 0.0
    return lines


def p_width(spec: str) -> float | None:
    """Width (pt) of a ``p{..em}`` column spec, None for ``l``/``r``."""
    m = _P_WIDTH.search(spec)
    return float(m.group(1)) * 10.0 if m else None


@dataclass(frozen=True)
class Float:
    """One float of a laid-out table: its environment, columns, rows and notes (indices), estimated scale."""

    env: str
    columns: tuple[int, ...]
    rows: tuple[int, ...]
    notes: tuple[int, ...]
    scale: float
    first: bool


@dataclass(frozen=True)
class Layout:
    """The floats of one table and the rule that chose them."""

    env: str
    floats: tuple[Float, ...]
    parts: int
    rule: str

    @property
    def min_scale(self) -> float:
        return min(f.scale for f in self.floats)


class _Table:
    """Widths and heights of the cells of one table."""

    def __init__(self, headers, cells, bold, specs, breakable, notes):
        self.n = len(headers)
        self.widths = [p_width(s) for s in specs]
        self.header_w = [text_width(h) for h in headers]
        self.cell_w = [[text_width(c, b) for c, b in zip(row, brow, strict=True)] for row, brow in zip(cells, bold, strict=True)]  # fmt: skip
        self.header_lines = [
            1 if w is None else wrapped_lines(h, w) for h, w in zip(headers, self.widths, strict=True)
        ]
        self.row_h = [
            _BASELINE_PT
            * max(
                [1]
                + [
                    wrapped_lines(c, w, br, bold=b)
                    for c, b, w, br in zip(row, brow, self.widths, breakable, strict=True)
                    if w is not None
                ]
            )
            for row, brow in zip(cells, bold, strict=True)
        ]
        self.notes = list(notes)

    def col_width(self, j: int, rows: Sequence[int]) -> float:
        """Natural width of column `j` over `rows`, with its two `\\tabcolsep`."""
        w = self.widths[j]
        if w is None:
            w = max([self.header_w[j]] + [self.cell_w[i][j] for i in rows])
        return w + 2 * _TABCOLSEP_PT

    def header_h(self, cols: Sequence[int]) -> float:
        return _BASELINE_PT * max((self.header_lines[j] for j in cols), default=1)

    def note_h(self, k: int, linewidth: float) -> float:
        return _NOTE_BASELINE_PT * wrapped_lines("Note: " + self.notes[k], linewidth, True, font=_NOTE_FONT)


def _key_columns(t: _Table, cells: Sequence[Sequence[str]], rows: Sequence[int]) -> list[int]:
    """The shortest leading run of columns whose cells tell the rows apart, within `KEY_MAX_COLUMNS` and
    `KEY_MAX_SHARE` of the text width (the longest run within them when none does; the first column at least)."""
    key = [0]
    for k in range(2, min(KEY_MAX_COLUMNS, t.n - 1) + 1):
        if len({tuple(row[: len(key)]) for row in cells}) == len(cells):
            break
        if sum(t.col_width(j, rows) for j in range(k)) > KEY_MAX_SHARE * TEXT_PT:
            break
        key = list(range(k))
    return key


def _parts(widths: Sequence[float], room: float) -> list[list[int]]:
    """Columns 0.. of `widths` in the fewest contiguous groups of total width <= `room` (a wider column alone),
    balanced: the widest group as narrow as that number of groups allows."""

    def greedy(cap: float) -> list[list[int]]:
        out: list[list[int]] = [[]]
        used = 0.0
        for j, w in enumerate(widths):
            if out[-1] and used + w > cap:
                out.append([])
                used = 0.0
            out[-1].append(j)
            used += w
        return out

    best = greedy(room)
    lo, hi = max(widths, default=0.0), room
    for _ in range(30):  # the smallest capacity that still needs no more groups
        mid = (lo + hi) / 2
        if len(greedy(mid)) <= len(best):
            hi = mid
        else:
            lo = mid
    return greedy(hi) if len(greedy(hi)) <= len(best) else best


def _chunks(
    t: _Table, parts: Sequence[Sequence[int]], rows: Sequence[int], linewidth: float
) -> list[tuple[list[int], list[float]]]:
    """`rows` cut into chunks whose floats fit the page height in every column part, with each part's
    estimated scale."""
    budget = TEXT_HEIGHT_PT * _HEIGHT_SAFETY - _CAPTION_PT - _RULES_PT

    def scales(widths):
        return [
            min(1.0, linewidth / max(1.0, sum(w[j] for j in cols)))
            for w, cols in zip(widths, parts, strict=True)
        ]

    def empty():
        return [{j: t.col_width(j, []) for j in cols} for cols in parts]

    out: list[tuple[list[int], list[float]]] = []
    cur: list[int] = []
    widths, body = empty(), 0.0
    for i in rows:
        new = [{j: max(w[j], t.col_width(j, [i])) for j in w} for w in widths]
        high = [
            (t.header_h(cols) + body + t.row_h[i]) * s for cols, s in zip(parts, scales(new), strict=True)
        ]
        if cur and max(high) > budget:
            out.append((cur, scales(widths)))
            cur, body = [], 0.0
            new = [{j: max(w[j], t.col_width(j, [i])) for j in w} for w in empty()]
        cur.append(i)
        widths, body = new, body + t.row_h[i]
    out.append((cur, scales(widths)))
    return out


def _height(t: _Table, cols: Sequence[int], rows: Sequence[int], scale: float) -> float:
    return (t.header_h(cols) + sum(t.row_h[i] for i in rows)) * scale + _CAPTION_PT + _RULES_PT


def plan(
    headers: Sequence[str],
    cells: Sequence[Sequence[str]],
    specs: Sequence[str],
    *,
    bold: Sequence[Sequence[bool]] | None = None,
    breakable: Sequence[bool] | None = None,
    notes: Sequence[str] = (),
) -> Layout:
    """The floats of a table of `cells` (text as printed, before escaping) under `headers` with column `specs`,
    by the rule of the module docstring. `bold`: cells typeset in bold; `breakable`: columns whose cells break
    after ``_`` and ``/``; `notes`: the lines printed after the table. Floats go row chunk by row chunk, the
    column parts of a chunk one after the other."""
    n, rows = len(headers), list(range(len(cells)))
    bold = bold or [[False] * n for _ in cells]
    breakable = breakable or [False] * n
    t = _Table(list(map(str, headers)), [list(map(str, r)) for r in cells], bold, specs, breakable, notes)
    width = max(1.0, sum(t.col_width(j, rows) for j in range(n)))
    if COLUMN_PT / width >= COLUMN_SCALE:
        env, linewidth, parts, rule = "table", COLUMN_PT, [list(range(n))], "column"
    elif TEXT_PT / width >= PLAN_SCALE or n < 2:
        env, linewidth, parts, rule = "table*", TEXT_PT, [list(range(n))], "text width"
    else:
        env, linewidth, rule = "table*", TEXT_PT, "column parts"
        key = _key_columns(t, cells, rows)
        rest = list(range(len(key), n))
        room = TEXT_PT / PLAN_SCALE - sum(t.col_width(j, rows) for j in key)
        groups = _parts([t.col_width(j, rows) for j in rest], room)
        parts = [key + [rest[g] for g in group] for group in groups]
    floats: list[Float] = []
    for chunk, scales in _chunks(t, parts, rows, linewidth):
        for cols, s in zip(parts, scales, strict=True):
            floats.append(Float(env, tuple(cols), tuple(chunk), (), s, not floats))  # the first float only
    # the notes follow the last float while the page holds them; the rest go into floats of their own
    last = floats[-1]
    held: list[int] = []
    used, budget = _height(t, last.columns, last.rows, last.scale), TEXT_HEIGHT_PT * _HEIGHT_SAFETY
    for k in range(len(t.notes)):
        h = t.note_h(k, linewidth)
        if used + h > budget and (held or floats[-1].columns):
            f = floats[-1]
            floats[-1] = Float(env, f.columns, f.rows, tuple(held), f.scale, f.first)
            floats.append(Float(env, (), (), (), 1.0, False))
            used, held = _CAPTION_PT, []
        held.append(k)
        used += h
    f = floats[-1]
    floats[-1] = Float(env, f.columns, f.rows, tuple(held), f.scale, f.first)
    if len({f.rows for f in floats if f.rows}) > 1:
        rule += " + row chunks"
    return Layout(env, tuple(floats), len(parts), rule)


def render(
    layout: Layout,
    specs: Sequence[str],
    header_tex: Sequence[str],
    rows_tex: Sequence[Sequence[str]],
    notes_tex: Sequence[str],
) -> str:
    """The `.tex` text of a laid-out table: its floats, each a booktabs tabular shrunk to ``\\linewidth`` only
    when wider, the notes after the last one. Cells, headers and notes come escaped."""
    n = len(layout.floats)
    lines = [
        f"% slimlib table: needs \\usepackage{{{','.join(PACKAGES)}}}; layout: {layout.rule} ({n} {layout.env} "
        f"float{'s' if n > 1 else ''}, {layout.parts} column part{'s' if layout.parts > 1 else ''}), scale >= "
        f"{scale_floor(layout.min_scale):.2f} for a {COLUMN_PT:g} pt column, {TEXT_PT:g} x {TEXT_HEIGHT_PT:g} pt text",
        "% caption: \\def\\slimcaption{...} (and \\def\\slimlabel{tab:...}) before \\input; later floats repeat "
        'it as "(continued)"',
    ]
    place = "[tbp]" if layout.env == "table" else "[tp]"
    flush = len(layout.floats) > FLOAT_QUEUE
    for k, f in enumerate(layout.floats):
        if flush and k and k % FLUSH_EVERY == 0:
            lines.append(r"\clearpage % LaTeX holds at most 18 unplaced floats: place these before the next")
        lines.append(f"% slim-scale: {scale_floor(f.scale):.2f}")
        lines.append(f"\\begin{{{f.env}}}{place}")
        lines.append(r"\centering")
        if f.first:
            lines.append(
                r"\ifdefined\slimcaption\caption{\slimcaption}\ifdefined\slimlabel\label{\slimlabel}\fi\fi"
            )
        else:
            lines.append(
                r"\ifdefined\slimcaption\addtocounter{table}{-1}\caption[]{\slimcaption{} (continued)}"
                r"\else{\footnotesize\itshape (continued)\par}\fi"
            )
        if f.columns:
            lines.append(r"\setbox0=\hbox{%")
            lines.append(f"\\begin{{tabular}}{{{''.join(specs[j] for j in f.columns)}}}")
            lines.append(r"\toprule")
            lines.append(" & ".join(header_tex[j] for j in f.columns) + r" \\")
            lines.append(r"\midrule")
            lines += [" & ".join(rows_tex[i][j] for j in f.columns) + r" \\" for i in f.rows]
            lines.append(r"\bottomrule")
            lines.append(r"\end{tabular}}%")
            lines.append(
                r"\par\noindent\ifdim\wd0>\linewidth\typeout{slim-scale: \the\numexpr\linewidth*1000/\wd0\relax"
                r"/1000}\resizebox{\linewidth}{!}{\box0}\else\box0\fi\par"
            )
        if f.notes:
            lines.append(r"{\footnotesize\raggedright")
            lines += [f"Note: {notes_tex[k]}\\par" for k in f.notes]
            lines.append("}")
        lines.append(f"\\end{{{f.env}}}")
    lines.append(r"\let\slimcaption\undefined\let\slimlabel\undefined")
    return "\n".join(lines) + "\n"


def scale_floor(scale: float) -> float:
    """`scale` rounded down to the hundredth written in the ``% slim-scale`` comment."""
    return math.floor(scale * 100) / 100
