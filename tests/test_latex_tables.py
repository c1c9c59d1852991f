"""LaTeX tables a paper can include as they are: every `.tex` the writer (`table_format.latex`, behind
`save_table`) lays out for representative tables (narrow, very wide, very tall, wide and tall, long notes) and
for the contents of every committed `figures/*.tex` compiles in a two-column article with no float taller than
the page, no line past its column and no table shrunk below `latex.MIN_SCALE` (pdflatex, where a TeX engine is
installed: `.ci/run` installs one). Without a TeX engine the structure is checked: balanced environments, cells
per row = columns of the spec, no `\\multicolumn` of long text, only the allowed packages, a scale comment per
float. The committed files themselves compile; the strict checks apply to them once they are regenerated in the
new layout (their header then carries `% slim-scale`)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from shared_paths import REPO

from slimlib.experiments.outputs import latex as L
from slimlib.experiments.outputs import table_format as T

FIGURES = REPO / "figures"
PDFLATEX = shutil.which("pdflatex")
needs_tex = pytest.mark.skipif(PDFLATEX is None, reason="no pdflatex (install texlive-latex-recommended)")
#: Packages a table may ask for.
ALLOWED_PACKAGES = {"booktabs", "array", "graphicx"}
#: An overfull line up to this many pt is rounding, not a table past its column.
OVERFULL_PT = 1.0


# ------------------------------------------------------------------------------------- representative tables
def _wide_table() -> str:
    """A 13-column table with long text cells, long headers, a `<=` and notes of hundreds of characters, as
    `bca_summary.tex` has."""
    cols = {f"Long header number {k} of the table (%) [95% CI]": ["84.6 [65.9, 98.5]", "97.1 [92.7, 100.0]"]
            for k in range(11)}  # fmt: skip
    df = pd.DataFrame(
        {"Advisor": ["SLIM-BCA faithful (paper model, Eq. 13, no memory constraint)", "SLIM-BCA project †"],
         **cols, "Predictions <= 0": [0, 3]}
    )  # fmt: skip
    note = "Mean over curves with a bootstrap 95% interval (10000 resamples); p <= 0.05 is significant. " * 4
    return T.latex(*T.format_table(df), notes=[note, "second note"])


def _narrow_table() -> str:
    df = pd.DataFrame({"model": ["opt-1.3b", "llama-2-7b", "opt-6.7b"], "mape_pct": [3.1, 12.25, 0.5]})
    return T.latex(*T.format_table(df), notes=["MAPE over held-out runs."])


def _tall_table(n: int = 120) -> str:
    df = pd.DataFrame(
        {"model": [f"model-{i % 7}" for i in range(n)], "batch_size": range(n),
         "throughput_tok_s": [1000.0 + 13.7 * i for i in range(n)], "gpu_util": [0.5 + i / (3 * n) for i in range(n)]}
    )  # fmt: skip
    return T.latex(*T.format_table(df))


def _wide_tall_table(n: int = 150) -> str:
    """21 columns, long n/a cells, 150 rows: as `bca_slo_eval.tex`."""
    data = {"source": [("engine-cpu", "paper-data")[i % 2] for i in range(n)],
            "model": [f"llama-2-{7 * (1 + i % 3)}b" for i in range(n)], "slo": [f"slo-{i}" for i in range(n)]}  # fmt: skip
    for k in range(18):
        data[f"metric_{k}_tok_s"] = [
            "n/a (no pick or no measured-feasible run)" if (i + k) % 11 == 0 else f"{1000 + 7.3 * i * k:.1f}"
            for i in range(n)
        ]
    return T.latex(*T.format_table(pd.DataFrame(data)), notes=["Pick: the advisor's batch size."])


def _many_notes_table() -> str:
    df = pd.DataFrame(
        {"scenario": [f"scenario {i}" for i in range(30)], "mape_pct": [float(i) for i in range(30)]}
    )
    notes = [f"Note {k} about the scenario_{k} fits: " + "the fit held eta_c at its bound in fold 3; " * 4
             for k in range(40)]  # fmt: skip
    return T.latex(*T.format_table(df), notes=notes)


def _medium_wide_table() -> str:
    """Too wide for the column, fits the text width."""
    df = pd.DataFrame({f"column_{k}_tok_s": [1234.5, 23.25] for k in range(9)})
    return T.latex(*T.format_table(df))


REPRESENTATIVE = {
    "narrow": _narrow_table,
    "wide": _wide_table,
    "tall": _tall_table,
    "wide_tall": _wide_tall_table,
    "many_notes": _many_notes_table,
    "medium_wide": _medium_wide_table,
}


# ------------------------------------------------------------------ committed tables: contents re-laid out
def _unescape(tex: str) -> str:
    text = tex.replace(r"\allowbreak{}", "")
    for a, b in [(r"$\leq$", "<="), (r"$\geq$", ">="), (r"$<$", "<"), (r"$>$", ">"), (r"\textasciitilde{}", "~"),
                 (r"\textasciicircum{}", "^")]:  # fmt: skip
        text = text.replace(a, b)
    text = re.sub(r"\\([&%$#_{}])", r"\1", text)
    return text.replace(r"\textbackslash{}", "\\")


def _cell(tex: str):
    m = re.fullmatch(r"\\textbf\{(.*)\}", tex, flags=re.S)
    return T.Bold(_unescape(m.group(1))) if m else _unescape(tex)


def fragment_contents(tex: str) -> tuple[pd.DataFrame, list[bool], list[str]]:
    """The formatted cells, numeric flags and notes of a table in the earlier one-tabular format (the committed
    `figures/*.tex`), for `T.latex` to lay them out again unchanged."""
    spec = re.search(r"\\begin\{tabular\}\{(.*)\}\s*$", tex, flags=re.M).group(1)
    cols = re.findall(r">\{\\(raggedright|raggedleft)\\arraybackslash\}p\{[\d.]+em\}|([lr])", spec)
    numeric = [a == "raggedleft" or b == "r" for a, b in cols]
    header = tex.split("\\toprule\n", 1)[1].split(" \\\\\n\\midrule", 1)[0]
    body = tex.split("\\midrule\n", 1)[1].split("\\bottomrule", 1)[0]
    rows = [r for r in body.split(" \\\\\n") if r.strip()]

    def cells(row: str) -> list[str]:
        parts = re.split(r"(?<!\\)&", row)
        return [
            p[1:] if i else p for i, p in enumerate(parts)
        ]  # a cell is "x", then " y", with " " before "&"

    heads = [_unescape(h.strip()) for h in re.split(r"(?<!\\)&", header)]
    data = [
        [_cell(c.rstrip(" ") if j < len(numeric) - 1 else c) for j, c in enumerate(cells(r))] for r in rows
    ]
    assert all(len(r) == len(numeric) for r in data) and len(heads) == len(numeric)
    notes = [_unescape(n) for n in re.findall(r"^Note: (.*)\\par$", tex, flags=re.M)]
    return pd.DataFrame(data, columns=heads, dtype=object), numeric, notes


def relaid(path: Path) -> str:
    """The committed table at `path` laid out by the writer as it is now (contents as committed)."""
    return T.latex(*fragment_contents(path.read_text(encoding="utf-8")))


def table_rows(tex: str) -> list[dict[str, str]]:
    """The rows (header -> cell, as typeset) of a `.tex` table, its column parts and row chunks put together: a
    row chunk starts at each float with the first float's header, the parts of a chunk are joined row by row."""
    chunks: list[list[tuple[list[str], list[list[str]]]]] = []
    first = None
    for m in re.finditer(r"\\toprule\n(.*?) \\\\\n\\midrule\n(.*?)\\bottomrule", tex, flags=re.S):
        header = re.split(r"(?<!\\) & ", m.group(1))
        rows = [re.split(r"(?<!\\) & ", r) for r in m.group(2).split(" \\\\\n") if r.strip()]
        first = first or header
        if header == first:
            chunks.append([])
        chunks[-1].append((header, rows))
    out = []
    for chunk in chunks:
        for r in range(len(chunk[0][1])):
            row: dict[str, str] = {}
            for header, rows in chunk:
                for h, c in zip(header, rows[r], strict=True):
                    assert row.setdefault(h, c) == c, f"key column {h} differs between parts"
            out.append(row)
    return out


def _is_new_layout(tex: str) -> bool:
    return "% slim-scale:" in tex


COMMITTED = sorted(FIGURES.glob("*.tex"))


# ---------------------------------------------------------------------------------------- structure checks
def _spec_columns(spec: str) -> int:
    spec = re.sub(r">\{[^{}]*\}", "", spec)
    spec = re.sub(r"\{[^{}]*\}", "", spec)
    return sum(spec.count(c) for c in "lrcp")


def structure_problems(tex: str) -> list[str]:
    """What keeps `tex` from being a well-formed table: unbalanced environments, a row whose cell count differs
    from its tabular's spec, `\\multicolumn` of long text, `$<$=` instead of `$\\leq$`, packages other than
    `ALLOWED_PACKAGES`; for the writer's current layout also a float without a scale comment or below the floor."""
    problems, stack = [], []
    for kind, env in re.findall(r"\\(begin|end)\{([^{}]+)\}", tex):
        if kind == "begin":
            stack.append(env)
        elif not stack or stack.pop() != env:
            problems.append(f"unbalanced \\end{{{env}}}")
    if stack:
        problems.append(f"unclosed {stack}")
    if tex.count(r"\begin{tabular}") < 1:
        problems.append("no tabular")
    for m in re.finditer(r"\\begin\{tabular\}\{([^\n]*)\}\n(.*?)\\end\{tabular\}", tex, flags=re.S):
        n = _spec_columns(m.group(1))
        body = m.group(2).split(r"\midrule", 1)[-1].split(r"\bottomrule", 1)[0]
        header = m.group(2).split(r"\toprule", 1)[-1].split(r"\midrule", 1)[0]
        for row in [header, *body.split(r"\\")]:
            row = row.strip()
            if row and row.count("&") - row.count(r"\&") + 1 != n:
                problems.append(f"row with {row.count('&') + 1} cells in a {n}-column tabular: {row[:60]}")
    for m in re.finditer(r"\\multicolumn\{\d+\}\{[^{}]*\}\{([^{}]*)\}", tex):
        if len(m.group(1)) > T.WRAP_CHARS:
            problems.append(f"\\multicolumn of long text: {m.group(1)[:40]}")
    if "$<$=" in tex or "$>$=" in tex:
        problems.append("'<=' typeset as '$<$='")
    packages = set(",".join(re.findall(r"\\usepackage\{([^{}]*)\}", tex.split("\n", 1)[0])).split(","))
    if not packages or packages - ALLOWED_PACKAGES:
        problems.append(f"packages {sorted(packages)} not within {sorted(ALLOWED_PACKAGES)}")
    if _is_new_layout(tex):
        scales = [float(s) for s in re.findall(r"^% slim-scale: ([\d.]+)$", tex, flags=re.M)]
        floats = len(re.findall(r"\\begin\{table\*?\}", tex))
        if len(scales) != floats:
            problems.append(f"{floats} floats but {len(scales)} scale comments")
        if scales and min(scales) < L.MIN_SCALE:
            problems.append(f"planned scale {min(scales)} below {L.MIN_SCALE}")
        captions = tex.count(r"\caption{\slimcaption}")
        if captions != 1 or tex.count(r"\label{") > 1:
            problems.append(
                f"{captions} numbered captions and {tex.count(chr(92) + 'label{')} labels: a table is numbered and "
                "labelled once, its other floats say (continued)"
            )
    return problems


# ----------------------------------------------------------------------------------------------- compiling
def _document(inputs: list[str]) -> str:
    return (
        "\\documentclass[twocolumn,10pt]{article}\n\\usepackage[T1]{fontenc}\n\\usepackage[utf8]{inputenc}\n"
        f"\\usepackage{{{','.join(T.LATEX_PACKAGES)}}}\n\\begin{{document}}\n"
        + "\n".join(inputs)
        + "\n\\end{document}\n"
    )


def compile_tables(tmp: Path, tables: dict[str, str]) -> dict[str, list[str]]:
    """Each `.tex` of `tables` (name -> text) \\input in one two-column article, a page apart; per table, what is
    wrong: a TeX error fails at once, "Float too large", an overfull line wider than `OVERFULL_PT`, a scale below
    `L.MIN_SCALE` (read from TeX's log). A table in the earlier one-tabular format is put in a `table` float and
    only has to compile."""
    inputs = []
    for k, tex in enumerate(tables.values()):
        (tmp / f"t{k}.tex").write_text(tex, encoding="utf-8")
        body = f"\\input{{t{k}.tex}}"
        if not _is_new_layout(tex):
            body = f"\\begin{{table}}\\centering\n{body}\\caption{{old}}\\end{{table}}"
        inputs.append(f"\\typeout{{slim-table: {k}}}\\def\\slimcaption{{Table {k}}}{body}\\clearpage")
    (tmp / "doc.tex").write_text(_document(inputs), encoding="utf-8")
    run = subprocess.run(
        [str(PDFLATEX), "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    log = (tmp / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert run.returncode == 0, "\n".join(line for line in log.splitlines() if line.startswith("!"))[:2000]
    names, out = list(tables), {}
    for part in re.split(r"^slim-table: ", log, flags=re.M)[1:]:
        k, text = part.split("\n", 1)
        name = names[int(k)]
        bad = []
        if "Float too large" in text:
            bad.append("Float too large")
        over = [float(x) for x in re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", text)]
        if [x for x in over if x > OVERFULL_PT]:
            bad.append(f"overfull by {max(over)} pt")
        scales = [int(s) / 1000 for s in re.findall(r"^slim-scale: (\d+)/1000", text, flags=re.M)]
        if scales and min(scales) < L.MIN_SCALE:
            bad.append(f"shrunk to {min(scales)}")
        if _is_new_layout(tables[name]) or not bad:
            out[name] = bad
        else:
            out[name] = [f"(earlier layout) {b}" for b in bad]
    assert len(out) == len(tables)
    return out


# ---------------------------------------------------------------------------------------------------- tests
def test_escape_typesets_comparison_operators_as_symbols():
    assert T.latex_escape("B <= 128, p >= 0.05, a < b") == r"B $\leq$ 128, p $\geq$ 0.05, a $<$ b"
    assert T.latex_escape("50% & x_1") == r"50\% \& x\_1"


def test_long_cells_and_headers_wrap_and_notes_follow_the_tabular():
    tex = _wide_table()
    assert structure_problems(tex) == []
    assert r"\multicolumn" not in tex  # notes are a paragraph after the tabular, not one unbreakable row
    spec = re.search(r"\\begin\{tabular\}\{(.*)\}", tex).group(1)
    assert spec.startswith(r">{\raggedright\arraybackslash}p{")  # the 61-character advisor names wrap
    assert tex.index("Note: Mean over curves") > tex.rindex(r"\end{tabular}")
    assert r"p $\leq$ 0.05" in tex


@pytest.mark.parametrize("name", list(REPRESENTATIVE))
def test_representative_tables_are_well_formed(name):
    assert structure_problems(REPRESENTATIVE[name]()) == []


def test_the_layout_follows_the_size():
    def envs(tex):
        return re.findall(r"\\begin\{(table\*?)\}", tex)

    assert envs(_narrow_table()) == ["table"]
    assert envs(_medium_wide_table()) == ["table*"]
    wide = _wide_table()  # 13 columns: column parts, each repeating the advisor column
    assert len(envs(wide)) >= 2 and set(envs(wide)) == {"table*"}
    assert wide.count("\\toprule\nAdvisor & ") == len(envs(wide))
    assert wide.count(r"\label{\slimlabel}") == 1  # column parts: numbered and labelled once
    assert (
        wide.count(r"\addtocounter{table}{-1}\caption[]{\slimcaption{} (continued)}") == len(envs(wide)) - 1
    )
    tall = _tall_table()  # 120 rows: row chunks, each with the header row, "(continued)" after the first
    assert len(envs(tall)) >= 2 and tall.count("\\toprule\nModel & ") == len(envs(tall))
    assert (
        tall.count(r"\addtocounter{table}{-1}\caption[]{\slimcaption{} (continued)}") == len(envs(tall)) - 1
    )
    rows = [r for r in re.findall(r"^model-\d & (\d+) &", tall, flags=re.M)]
    assert rows == [str(i) for i in range(120)]  # every row once, in order
    notes = _many_notes_table()
    assert len(re.findall(r"^Note: ", notes, flags=re.M)) == 40 and len(envs(notes)) >= 2


def test_committed_contents_are_read_back_unchanged():
    """The committed tables laid out again hold the same cells under the same headers, row by row, and the same
    notes: only the layout changes."""
    for path in COMMITTED:
        old = path.read_text(encoding="utf-8")
        if _is_new_layout(old):
            continue
        new = relaid(path)
        assert table_rows(new) == table_rows(old), path.name
        assert re.findall(r"^Note: .*$", new, flags=re.M) == re.findall(r"^Note: .*$", old, flags=re.M)


def test_every_committed_table_is_well_formed():
    assert COMMITTED
    bad = {p.name: structure_problems(p.read_text(encoding="utf-8")) for p in COMMITTED}
    assert {k: v for k, v in bad.items() if v} == {}
    relaid_bad = {p.name: structure_problems(relaid(p)) for p in COMMITTED}
    assert {k: v for k, v in relaid_bad.items() if v} == {}


@needs_tex
def test_every_table_compiles_and_fits_a_two_column_page(tmp_path):
    """One document: the representative tables, the committed contents laid out by the writer (strict), and the
    committed files as they are (strict once regenerated in the current layout, else they only compile)."""
    tables = {f"representative {k}": f() for k, f in REPRESENTATIVE.items()}
    tables |= {f"relaid {p.name}": relaid(p) for p in COMMITTED if not _is_new_layout(p.read_text("utf-8"))}
    tables |= {f"committed {p.name}": p.read_text(encoding="utf-8") for p in COMMITTED}
    found = compile_tables(tmp_path, tables)
    assert {k: v for k, v in found.items() if v and not v[0].startswith("(earlier layout)")} == {}


@needs_tex
def test_a_long_file_name_in_a_wrapping_column_breaks_at_its_underscores(tmp_path):
    """A wrapping column is as wide as its longest cell allows; a file name longer than that (as the differences
    table's output column holds) breaks after an underscore instead of running into the margin."""
    df = pd.DataFrame({"Output (figures/)": ["fig06_attention_roofline_aic_and_more", "fig03_prefill_decode_summary"],
                       "Verdict": ["agree", "disagree"]})  # fmt: skip
    tex = T.latex(*T.format_table(df))
    assert r"fig06\_\allowbreak{}attention" in tex
    assert compile_tables(tmp_path, {"names": tex}) == {"names": []}


@needs_tex
def test_a_table_without_a_caption_compiles(tmp_path):
    """Without `\\slimcaption` the floats have no caption; later ones say "(continued)"."""
    tex = _tall_table()
    (tmp_path / "t.tex").write_text(tex, encoding="utf-8")
    (tmp_path / "doc.tex").write_text(_document(["\\input{t.tex}"]), encoding="utf-8")
    run = subprocess.run(
        [str(PDFLATEX), "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert run.returncode == 0
