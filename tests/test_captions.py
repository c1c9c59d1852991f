"""Output names and captions (slimlib.experiments.outputs.captions): every output in figures/ is captioned in CAPTIONS.md
and vice versa, no name reuses a paper number for another item, and no absolute path appears in the docs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from slimlib.experiments.outputs.captions import (
    CAPTIONS,
    CAPTIONS_FILE,
    STATUSES,
    Caption,
    check_captions,
    name_problems,
    output_stems,
    render_captions,
    write_captions,
)

REPO = Path(__file__).resolve().parents[1]
FIGURES = REPO / "figures"


def test_every_file_in_figures_is_captioned_and_captions_list_only_present_files():
    stems = output_stems(FIGURES)
    assert stems, "figures/ holds no outputs"
    text = (FIGURES / CAPTIONS_FILE).read_text(encoding="utf-8")
    listed = re.findall(r"^## (\S+)$", text, flags=re.M)
    assert listed == list(stems)  # vice versa: nothing listed without files
    for stem, exts in stems.items():
        for ext in exts:
            assert f"`{stem}.{ext}`" in text, f"{stem}.{ext} not in CAPTIONS.md"
    assert "Caption missing" not in text
    assert check_captions(FIGURES) == []


def test_committed_captions_file_is_what_the_generator_writes():
    assert (FIGURES / CAPTIONS_FILE).read_text(encoding="utf-8") == render_captions(output_stems(FIGURES))


def test_no_output_name_reuses_a_paper_number_for_another_item():
    for stem, caption in CAPTIONS.items():
        assert name_problems(stem, caption) == [], stem
        assert caption.status.startswith(STATUSES), stem
        assert caption.text and caption.source, stem
    # the old names that collided with the paper's figures are rejected
    ext = Caption("", "extension (not in the paper)", "MAPE curves", "memgap")
    assert name_problems("fig06_curves", ext)  # the paper's Fig. 6 is the attention roofline
    assert name_problems("fig07_advisor_curves", ext)  # the paper's Fig. 7 is cache hit rates
    assert name_problems("table07_recommendations", ext)  # the paper has no Table VII
    assert name_problems("bca_curves", Caption("Fig. 3", "reproduced", "x", "y"))  # paper item without prefix
    assert name_problems("eval_curves", ext) == []


def _saved_names(nb_path: Path) -> set[str]:
    nb = json.loads(nb_path.read_text(encoding="utf-8"))
    code = "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    names = set(re.findall(r"save_(?:figure|table)\(\s*[^,]+,\s*f?\"([A-Za-z0-9_.-]+)\"", code))
    names |= set(re.findall(r"\"((?:fig|table)\d\d_[A-Za-z0-9_]+)\"", code))
    return names


def test_every_name_a_notebook_saves_has_a_caption():
    names = set()
    for nb in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):  # every notebook, 10 and up too
        names |= {n for n in _saved_names(nb) if "{" not in n}
    from slimlib.experiments.characterization.kit_figures import ATTENTION_MEMORY_FIGURES

    names |= set(ATTENTION_MEMORY_FIGURES)  # notebook 08 saves these by a loop over this mapping
    assert {
        "eval_curves",
        "bca_summary",
        "table02_mape",
        "fig01_plateau",
        "fig07_kit_cache_hit_rates",
        "peers_mape",  # notebook 10
        "table02_engine_mape",  # notebook 11
    } <= names
    assert sorted(n for n in names if n not in CAPTIONS) == []


def test_write_captions_marks_unknown_outputs_and_check_reports_them(tmp_path):
    assert write_captions(tmp_path / "missing") is None
    assert write_captions(tmp_path) is None  # empty folder: nothing written
    (tmp_path / "fig01_plateau.png").write_bytes(b"x")
    (tmp_path / "kernels_new_thing.csv").write_text("a\n1\n")
    path = write_captions(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert "## fig01_plateau" in text and "## kernels_new_thing" in text
    assert "**Caption missing**" in text
    problems = check_captions(tmp_path)
    assert any("kernels_new_thing: no caption" in p for p in problems)
    (tmp_path / "kernels_new_thing.csv").unlink()
    assert any("without files" in p for p in check_captions(tmp_path))  # stale CAPTIONS.md
    write_captions(tmp_path)
    assert check_captions(tmp_path) == []


ABSOLUTE = re.compile(r"(?<![\w.~])/(?:work|home|Users|mnt|root|scratch|gpfs)/|\b[A-Z]:\\\\")


@pytest.mark.parametrize(
    "path",
    sorted((REPO / "notebooks").glob("*.ipynb"))
    + [REPO / "README.md"]
    + sorted((REPO / "data").glob("*.md"))
    + sorted((REPO / "docs").rglob("*.md")),
    ids=lambda p: str(p.relative_to(REPO)),
)
def test_no_absolute_path_in_notebooks_readme_and_data_docs(path):
    text = path.read_text(encoding="utf-8")
    hits = [m.group(0) for m in ABSOLUTE.finditer(text)]
    assert hits == [], f"{path.name} names machine-specific absolute paths {hits}; use ../shared/... instead"


def test_absolute_path_pattern_catches_machine_paths():
    assert ABSOLUTE.search("mirrored under `/work/shared/data/x`")
    assert ABSOLUTE.search("C:\\\\Users\\\\me")
    assert not ABSOLUTE.search("mirrored under `../shared/data/x` and https://github.com/a/b")


def test_every_output_belongs_to_one_notebook_that_saves_it():
    from slimlib.experiments.outputs.captions import NOTEBOOK_OUTPUTS, notebook_of

    listed = [s for stems in NOTEBOOK_OUTPUTS.values() for s in stems]
    assert sorted(listed) == sorted(CAPTIONS)  # every captioned output in exactly one notebook
    notebooks = {p.stem: p for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")}
    assert set(NOTEBOOK_OUTPUTS) <= set(notebooks)
    for nb, path in notebooks.items():
        saved = {n for n in _saved_names(path) if "{" not in n}
        assert sorted(n for n in saved if notebook_of(n) != nb) == [], (
            nb
        )  # the list names the notebook saving it
    with pytest.raises(Exception, match="NOTEBOOK_OUTPUTS"):
        notebook_of("no_such_output")


def test_readme_paper_item_table_is_generated_from_the_captions_registry():
    from slimlib.experiments.outputs.captions import README_MARKERS, readme_table

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    start, end = README_MARKERS
    assert readme.count(start) == 1 and readme.count(end) == 1
    block = readme.split(start, 1)[1].split(end, 1)[0]
    assert block == "\n" + readme_table(FIGURES), (
        "README's paper-item table differs from the captions registry: run "
        "`python -m slimlib.experiments.outputs.paper_differences`"
    )
    for stem, c in CAPTIONS.items():  # status words identical to CAPTIONS.md's
        assert (
            f"`{stem}.*`" in block and f"| {c.status} |" in block.split(f"`{stem}.*`", 1)[1].split("\n", 1)[0]
        )
