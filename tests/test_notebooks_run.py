"""Every characterization notebook executes end to end (quick mode) through the same runner as `slim reproduce` and
writes its outputs; where this tree was just reproduced in full (`reproduced`), those outputs are checked instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from optional import requires
from reproduced import notebook_outputs, reproduced_tree, run_quick, skip_if_reproduced

pytestmark = requires("papermill")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

#: notebook number -> files it must write into figures_dir (quick mode)
EXPECTED = {
    "01": ["fig01_plateau.pdf", "fig01_plateau.png", "fig01_plateau_summary.csv"],
    "02": ["fig02_saturation.pdf", "fig02_saturation.png", "fig02_active_context.png", "fig02_knees.csv"],
    "03": ["fig03_prefill_decode.pdf", "fig03_prefill_decode.png", "fig03_prefill_decode_summary.csv"],
    "07": [
        "bca_curves.png",
        "bca_memory_saved.pdf",
        "bca_quality_vs_effort.png",
        "bca_effort.csv",
        "bca_recommendations.csv",
        "bca_summary.md",
        "bca_memory.md",
        "bca_slo_eval.csv",
        "bca_slo_summary.md",
        "bca_frontier.png",
        "bca_frontier.csv",
    ],
    "04": [
        "fig04_gpu_utilization_proxy.pdf",
        "fig04_gpu_utilization_proxy.png",
        "fig04_gpu_utilization_proxy.csv",
    ],
    "11": [
        "fig01_engine_plateau.png",
        "fig02_engine_saturation.png",
        "fig03_engine_phases.png",
        "table02_engine_mape.csv",
        "engine_bca_recommendations.csv",
        "engine_bca_summary.md",
        "engine_noise_floor.csv",
        "engine_offline_order.csv",
        "engine_offline_prefix_cache.csv",
        "engine_rerun_check.csv",
        "engine_served_vs_offline.csv",
    ],
    "12": [
        "paper_differences.csv",
        "paper_differences.md",
        "paper_differences.tex",
    ],  # claims "not testable" alone
    "05": [
        "fig05_decode_breakdown.png",
        "fig06_attention_roofline.pdf",
        "fig06_attention_roofline.png",
        "table01_attention_roofline.csv",
    ],
}


def _check_figures(number: str, figures: Path) -> None:
    """`EXPECTED` outputs of notebook `number` written, none empty, and every output captioned."""
    for name in EXPECTED[number]:
        path = figures / name
        assert path.is_file(), f"notebook {number} did not write {name}"
        assert path.stat().st_size > 0, f"notebook {number} wrote an empty {name}"
    # every output it wrote has a caption, and CAPTIONS.md lists exactly those outputs
    from slimlib.experiments.outputs.captions import check_captions

    assert check_captions(figures) == []


#: notebook 01's outputs are checked on the first of the two runs of `test_two_runs_give_byte_identical_figures`
@pytest.mark.parametrize("number", sorted(set(EXPECTED) - {"01"}))
def test_notebook_runs_and_writes_its_figures(number, tmp_path):
    if not any(NOTEBOOKS.glob(f"{number}_*.ipynb")):
        pytest.skip(f"notebook {number} not present")
    _check_figures(number, notebook_outputs(tmp_path)(number))


def test_two_runs_give_byte_identical_figures(tmp_path):
    if reproduced_tree():
        _check_figures("01", notebook_outputs(tmp_path)("01"))
    skip_if_reproduced("two runs of notebook 01 give the same bytes (its outputs checked above)")
    first = run_quick("01", tmp_path / "a")
    _check_figures("01", first)
    second = run_quick("01", tmp_path / "b")
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


def test_notebook_08_runs_on_the_committed_data(tmp_path):
    """Notebook 08 draws the kit figures when data/ holds kit counters, and none (saying why) when it does not."""
    from slimlib.data import available

    skip_if_reproduced("notebook 08 on the committed data")
    figures = run_quick("08", tmp_path)
    written = sorted(p.name for p in figures.iterdir())
    if available("kit-counters") and available("kit-kernels"):
        assert "fig06_kit_attention_roofline.png" in written and "fig05_kit_kernel_shares.png" in written
    elif not available("kit-campaigns"):
        assert written == []
