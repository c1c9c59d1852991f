"""LaTeX tables a paper can include as they are: every `.tex` that `save_table` writes compiles in a two-column
article (pdflatex, where a TeX engine is installed: `.ci/run` installs one) and fits its column; without a TeX
engine the structure is checked (balanced environments, cells per row = columns of the spec)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from shared_paths import REPO

from slimlib.experiments.outputs import table_format as T

FIGURES = REPO / "figures"
PDFLATEX = shutil.which("pdflatex")
needs_tex = pytest.mark.skipif(PDFLATEX is None, reason="no pdflatex (install texlive-latex-recommended)")


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


def _document(bodies: list[str], star: bool = False) -> str:
    env = "table*" if star else "table"
    floats = "\n".join(
        f"\\begin{{{env}}}\\centering\n{b}\\caption{{t}}\\end{{{env}}}\\clearpage" for b in bodies
    )
    return (
        "\\documentclass[twocolumn,10pt]{article}\n\\usepackage[T1]{fontenc}\n\\usepackage[utf8]{inputenc}\n"
        f"\\usepackage{{{','.join(T.LATEX_PACKAGES)}}}\n\\begin{{document}}\n{floats}\n\\end{{document}}\n"
    )


def _compile(tmp: Path, source: str) -> str:
    """The log of pdflatex on `source`; fails the test on a TeX error."""
    (tmp / "doc.tex").write_text(source, encoding="utf-8")
    run = subprocess.run(
        [str(PDFLATEX), "-interaction=nonstopmode", "-halt-on-error", "doc.tex"],
        cwd=tmp, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    log = (tmp / "doc.log").read_text(encoding="utf-8", errors="replace")
    assert run.returncode == 0, "\n".join(line for line in log.splitlines() if line.startswith("!"))[:2000]
    return log


def _spec_columns(spec: str) -> int:
    spec = re.sub(r">\{[^{}]*\}", "", spec)
    spec = re.sub(r"\{[^{}]*\}", "", spec)
    return sum(spec.count(c) for c in "lrcp")


def structure_problems(tex: str) -> list[str]:
    """What keeps `tex` from being a well-formed table: unbalanced tabular, a row whose cell count differs from
    the spec's columns, `$<$=` instead of `$\\leq$`."""
    problems = []
    if tex.count(r"\begin{tabular}") != 1 or tex.count(r"\end{tabular}") != 1:
        problems.append("needs exactly one tabular")
        return problems
    m = re.search(r"\\begin\{tabular\}\{(.*)\}\s*$", tex, flags=re.M)
    n = _spec_columns(m.group(1)) if m else 0
    body = tex.split(r"\midrule", 1)[-1].split(r"\bottomrule", 1)[0]
    header = tex.split(r"\toprule", 1)[-1].split(r"\midrule", 1)[0]
    for row in [header, *body.split(r"\\")]:
        row = row.strip()
        if row and row.count("&") - row.count(r"\&") + 1 != n:
            problems.append(f"row with {row.count('&') + 1} cells in a {n}-column tabular: {row[:60]}")
    if "$<$=" in tex or "$>$=" in tex:
        problems.append("'<=' typeset as '$<$='")
    return problems


def test_escape_typesets_comparison_operators_as_symbols():
    assert T.latex_escape("B <= 128, p >= 0.05, a < b") == r"B $\leq$ 128, p $\geq$ 0.05, a $<$ b"
    assert T.latex_escape("50% & x_1") == r"50\% \& x\_1"


def test_long_cells_and_headers_wrap_and_notes_follow_the_tabular():
    tex = _wide_table()
    assert structure_problems(tex) == []
    assert r"\multicolumn" not in tex  # notes are a paragraph after the tabular, not one unbreakable row
    spec = re.search(r"\\begin\{tabular\}\{(.*)\}", tex).group(1)
    assert spec.startswith(r">{\raggedright\arraybackslash}p{")  # the 61-character advisor names wrap
    assert tex.index("Note: Mean over curves") > tex.index(r"\end{tabular}")
    assert r"p $\leq$ 0.05" in tex


@needs_tex
@pytest.mark.parametrize("star", [False, True])
def test_a_wide_table_with_long_notes_compiles_and_fits_a_two_column_page(tmp_path, star):
    log = _compile(tmp_path, _document([_wide_table()], star=star))
    assert "Overfull \\hbox" not in log


@needs_tex
def test_a_long_file_name_in_a_wrapping_column_breaks_at_its_underscores(tmp_path):
    """A wrapping column is as wide as its longest cell allows; a file name longer than that (as the differences
    table's output column holds) breaks after an underscore instead of running into the margin."""
    df = pd.DataFrame({"Output (figures/)": ["fig06_attention_roofline_aic_and_more", "fig03_prefill_decode_summary"],
                       "Verdict": ["agree", "disagree"]})  # fmt: skip
    tex = T.latex(*T.format_table(df))
    assert r"fig06\_\allowbreak{}attention" in tex
    log = _compile(tmp_path, _document([tex]))
    assert "Overfull \\hbox" not in log


def test_every_committed_table_is_well_formed():
    texs = sorted(FIGURES.glob("*.tex"))
    assert texs
    bad = {p.name: structure_problems(p.read_text(encoding="utf-8")) for p in texs}
    current = {k: v for k, v in bad.items() if v and (FIGURES / k).read_text().startswith("% slimlib table")}
    assert current == {}


@needs_tex
def test_every_committed_table_compiles_in_a_two_column_article(tmp_path):
    texs = sorted(FIGURES.glob("*.tex"))
    log = _compile(tmp_path, _document([p.read_text(encoding="utf-8") for p in texs]))
    # tables written by this slimlib (first line names its packages) also fit the column
    if all(p.read_text(encoding="utf-8").startswith("% slimlib table") for p in texs):
        # a wide table is shrunk to the column, header words get room for wide letters, and long names in
        # wrapping cells break after their underscores: no line runs past its column
        over = re.findall(r"Overfull \\hbox \(([\d.]+)pt too wide\)", log)
        assert not over, sorted(over, key=float)[-3:]
