"""House style, deterministic figure files and table writers (slimlib.experiments.outputs.plotting)."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from slimlib.errors import DataError  # noqa: E402
from slimlib.experiments.outputs.plotting import (  # noqa: E402
    BATCH_TICKS,
    DOUBLE_COLUMN_IN,
    HOUSE_COLORS,
    METHOD_STYLES,
    MODEL_STYLES,
    OL_STYLES,
    SINGLE_COLUMN_IN,
    batch_axis,
    length_color,
    method_style,
    model_style,
    new_figure,
    ol_style,
    save_figure,
    save_table,
    table_to_latex,
    table_to_markdown,
    use_house_style,
)


@pytest.fixture(autouse=True)
def _restore_rc():
    with matplotlib.rc_context():
        yield
    plt.close("all")


def _draw(fonttype: int = 42):
    use_house_style()
    matplotlib.rcParams["pdf.fonttype"] = fonttype
    fig, ax = new_figure()
    x = np.linspace(1, 256, 40)
    for k, name in enumerate(["opt-1.3b", "llama-2-7b", "mistral-7b"]):
        ax.plot(x, 1000 * x / (x + 30 * (k + 1)), marker="o", label=name)
    ax.set_xlabel("batch size")
    ax.set_ylabel("throughput (tok/s)")
    # Non-Latin-1 glyphs (mathtext mu, plain mu, the unicode minus of negative ticks) only with TrueType (42):
    # matplotlib 3.11's Type 3 PDF writer raises "bytes must be in range(0, 256)" on them.
    ax.set_title(r"saturation $\mu$=0.5 (μ, −1)" if fonttype == 42 else "saturation mu=0.5")
    ax.legend(title="model")
    return fig


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_house_style_sets_palette_sizes_and_fonts():
    use_house_style()
    rc = matplotlib.rcParams
    assert tuple(rc["figure.figsize"]) == (SINGLE_COLUMN_IN, 2.4)
    assert rc["axes.prop_cycle"].by_key()["color"] == HOUSE_COLORS
    assert rc["pdf.fonttype"] == 42
    assert 6 <= rc["xtick.labelsize"] <= rc["axes.labelsize"] <= 9


def test_new_figure_single_and_double_column_sizes():
    use_house_style()
    fig, ax = new_figure()
    assert tuple(fig.get_size_inches()) == pytest.approx((3.4, 2.4))
    fig2, axes = new_figure(1, 2, double=True, height=2.0, sharey=True)
    assert tuple(fig2.get_size_inches()) == pytest.approx((DOUBLE_COLUMN_IN, 2.0))
    assert len(axes) == 2
    with pytest.raises(DataError, match="height"):
        new_figure(height=0)


@pytest.mark.parametrize("fonttype", [42, 3])
def test_save_figure_is_byte_identical_across_saves(tmp_path, fonttype):
    a = save_figure(_draw(fonttype), "fig_a", tmp_path / "one")
    b = save_figure(_draw(fonttype), "fig_a", tmp_path / "two")
    again = save_figure(_draw(fonttype), "fig_a", tmp_path / "one")
    assert [p.name for p in a] == ["fig_a.pdf", "fig_a.png"]
    assert [p.suffix for p in b] == [".pdf", ".png"]
    for p, q, r in zip(a, b, again, strict=True):
        assert p.stat().st_size > 1000
        assert p.read_bytes() == q.read_bytes() == r.read_bytes()


def test_saved_files_have_fixed_metadata_and_paper_size(tmp_path):
    pdf, png = save_figure(_draw(), "fig", tmp_path)
    data = pdf.read_bytes()
    assert data.startswith(b"%PDF")
    assert b"CreationDate" not in data and b"ModDate" not in data
    assert b"/Creator (slimlib)" in data
    raw = png.read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", raw[16:24])  # IHDR
    assert (width, height) == (round(3.4 * 300), round(2.4 * 300))


def test_save_figure_same_bytes_in_a_fresh_process(tmp_path):
    here = save_figure(_draw(), "fig", tmp_path / "here")
    code = (
        "import sys, matplotlib; matplotlib.use('Agg'); sys.path.insert(0, sys.argv[2]);"
        "import test_plotting as t; from slimlib.experiments.outputs.plotting import save_figure;"
        "save_figure(t._draw(), 'fig', sys.argv[1])"
    )
    tests_dir = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "there"), tests_dir], check=True)
    for p in here:
        assert _sha(p) == _sha(tmp_path / "there" / p.name)


@pytest.mark.parametrize("bad", ["", "../fig", "sub/fig", "fig.pdf", " fig"])
def test_save_figure_rejects_names_that_are_not_file_stems(tmp_path, bad):
    fig, _ = new_figure()
    with pytest.raises(DataError, match="file stem"):
        save_figure(fig, bad, tmp_path)


def test_save_figure_rejects_unknown_format(tmp_path):
    fig, _ = new_figure()
    with pytest.raises(DataError, match="svg"):
        save_figure(fig, "f", tmp_path, formats=("svg",))


@pytest.fixture()
def table():
    return pd.DataFrame(
        {
            "model": ["opt-1.3b", "llama_2_7b"],
            "batch_size": [8, 256],
            "mape_%": [3.14159265, np.nan],
            "throughput_tok_s": [12345.678, 0.000123456],
        }
    )


def test_save_table_writes_csv_markdown_latex_deterministically(tmp_path, table):
    paths = save_table(table, "tab1", tmp_path)
    assert [p.name for p in paths] == ["tab1.csv", "tab1.md", "tab1.tex"]
    first = [p.read_bytes() for p in paths]
    save_table(table, "tab1", tmp_path)
    assert [p.read_bytes() for p in paths] == first
    back = pd.read_csv(paths[0])
    pd.testing.assert_frame_equal(back, table)  # CSV keeps full precision
    assert b"\r" not in b"".join(first)


def test_markdown_table_format(table):
    md = table_to_markdown(table).splitlines()
    assert md[0] == "| Model | Batch size B | MAPE % | Throughput (tok/s) |"
    assert md[1] == "|:---|---:|---:|---:|"
    assert md[2] == "| opt-1.3b | 8 | 3.14 | 12346 |"  # fixed decimals per column, no 1.23e+04
    assert md[3] == "| llama_2_7b | 256 | n/a (no data) | 0 |"
    assert "e+" not in "\n".join(md) and "e-" not in "\n".join(md)


def test_latex_table_escapes_and_aligns(table):
    tex = table_to_latex(table, digits=4)
    lines = tex.splitlines()
    start = lines.index(
        r"\begin{tabular}{lrr>{\raggedleft\arraybackslash}p{7.5em}}"
    )  # the long header wraps; "Throughput" has room at 0.75 em a letter
    assert lines[start + 2] == r"Model & Batch size B & MAPE \% & Throughput (tok/s) \\"
    assert r"llama\_2\_7b & 256 & n/a (no data) & 0.0001 \\" in lines
    assert r"\end{tabular}}%" in lines
    assert tex.count(r"\toprule") == tex.count(r"\midrule") == tex.count(r"\bottomrule") == 1


def test_house_palette_has_no_yellow_and_one_style_per_model_and_output_length():
    assert "#F0E442" not in HOUSE_COLORS
    styles = [model_style(m) for m in MODEL_STYLES]
    assert len(set(styles)) == len(styles) and len({c for c, _ in styles}) == len(styles)
    assert len({m for _, m in styles}) == len(styles)  # distinct markers too
    assert model_style("Llama-2-7B") == MODEL_STYLES["llama-2-7b"]
    assert model_style("llama-2-7b") != model_style("opt-2.7b")
    assert ol_style(520.0) == OL_STYLES[520] and ol_style(130)[0] != ol_style(520)[0]
    assert model_style("mistral-7b") == model_style("mistral-7b")  # unknown names: stable fallback
    assert method_style("paper")[0] != method_style("slim")[0]
    # one meaning per colour family: method colours are never a model's or a length's colour
    method_colors = {c.upper() for c, _ in METHOD_STYLES.values()}
    for color, _ in [*MODEL_STYLES.values(), *OL_STYLES.values()]:
        assert color.upper() not in method_colors
    assert model_style("mistral-7b")[0].upper() not in method_colors
    assert not {c for c, _ in MODEL_STYLES.values()} & {c for c, _ in OL_STYLES.values()}
    # lengths: one sequential map, darker to lighter with length
    assert ol_style(390)[0] == OL_STYLES[390][0] and ol_style(1000)[0] == length_color(1000)
    lum = [sum(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in (length_color(v) for v in (64, 512, 4096))]
    assert lum == sorted(lum)


def test_batch_axis_has_plain_power_of_four_ticks():
    use_house_style()
    fig, ax = new_figure()
    ax.plot([1, 2, 30, 300], [1, 2, 3, 4])
    batch_axis(ax)
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    ticks = [t for t in ax.get_xticks() if 1 <= t <= 300]
    assert ticks == [1, 4, 16, 64, 256] and set(ticks) <= set(BATCH_TICKS)
    assert [lab for lab in labels if lab in {"1", "4", "16", "64", "256"}] == ["1", "4", "16", "64", "256"]
    assert not any("10^" in lab or "times" in lab for lab in labels)
    assert all(t.get_text() == "" for t in ax.get_xticklabels(minor=True))


def test_save_table_with_index_and_bad_input(tmp_path, table):
    indexed = table.set_index("model")
    md = save_table(indexed, "t", tmp_path, index=True, formats=("md",))[0].read_text()
    assert md.splitlines()[0].startswith("| Model |")
    with pytest.raises(DataError, match="DataFrame"):
        save_table([1, 2], "t", tmp_path)
    with pytest.raises(DataError, match="xlsx"):
        save_table(table, "t", tmp_path, formats=("xlsx",))


def test_plain_log_axis_labels_have_no_powers():
    from slimlib.experiments.outputs.plotting import plain_log_axis

    use_house_style()
    fig, ax = new_figure()
    ax.plot([1, 2], [0.8, 40])
    plain_log_axis(ax, "y")
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert "1" in labels and "10" in labels and "20" in labels
    assert not any("10^" in lab or "times" in lab or "e+" in lab for lab in labels)


def test_notebooks_write_into_the_repositorys_figures_from_any_working_directory(tmp_path, monkeypatch):
    from slimlib.experiments.outputs.plotting import FIGURES_ENV, figures_folder

    repo = Path(__file__).resolve().parents[1]
    monkeypatch.delenv(FIGURES_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    assert figures_folder("") == repo / "figures"
    assert figures_folder("out") == Path("out")
    monkeypatch.setenv(FIGURES_ENV, str(tmp_path / "f"))
    assert figures_folder("") == tmp_path / "f"
    for nb in sorted((repo / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        code = [
            "".join(c["source"])
            for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "code"
        ]
        assert 'figures_dir: str = ""' in code[0], nb.name  # the parameters cell: no "../figures"
        assert "figures_dir = figures_folder(figures_dir)" in "\n".join(code[1:]), nb.name


def test_one_colour_per_method_in_every_figure():
    from slimlib.experiments.outputs.plotting import METHOD_FALLBACK_COLORS, METHOD_STYLES, method_style
    from slimlib.model import METHODS

    colours = [c for c, _ in METHOD_STYLES.values()]
    assert len(set(colours)) == len(colours)  # no two methods (registered or peer) share a colour
    assert set(METHODS) <= set(METHOD_STYLES)
    assert {"roofline", "genz", "llm-analysis", "aiconfigurator"} <= set(METHOD_STYLES)  # peers_mape's peers
    assert not set(METHOD_FALLBACK_COLORS) & set(colours)
    assert method_style("some-new-peer")[0] in METHOD_FALLBACK_COLORS
