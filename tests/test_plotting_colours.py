"""The colour rule of README "Outputs": one colour per method, and no non-method series (models, lengths, batch
sizes, kernel groups, scenarios, SLO levels, deployments) takes a method colour; every scenario has its own colour."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.colors import to_hex, to_rgb

from slimlib.experiments.outputs import plotting as P


def _lab(colour: str) -> np.ndarray:
    """CIELAB (D65) of a colour, for perceptual distances."""
    c = np.array(to_rgb(colour))
    c = np.where(c > 0.04045, ((c + 0.055) / 1.055) ** 2.4, c / 12.92)
    m = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]])
    x = m @ c / np.array([0.95047, 1.0, 1.08883])
    f = np.where(x > 0.008856, np.cbrt(x), 7.787 * x + 16 / 116)
    return np.array([116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])])


def _distance(a: str, b: str) -> float:
    return float(np.linalg.norm(_lab(a) - _lab(b)))


METHOD_COLOURS = [c for c, _ in P.METHOD_STYLES.values()]
ALL_METHOD_COLOURS = METHOD_COLOURS + list(P.METHOD_FALLBACK_COLORS)


def _non_method_maps() -> dict[str, list[str]]:
    """Every non-method colour map of the house style, by name."""
    return {
        "MODEL_STYLES": [c for c, _ in P.MODEL_STYLES.values()],
        "ENGINE_MODEL_STYLES": [c for c, _ in P.ENGINE_MODEL_STYLES.values()],
        "MODEL_FALLBACK_COLORS": list(P.MODEL_FALLBACK_COLORS),
        "OL_STYLES": [c for c, _ in P.OL_STYLES.values()],
        "length_color": [P.length_color(v) for v in (64, 128, 256, 512, 1024, 2048, 4096)],
        "batch_color": [P.batch_color(b) for b in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)],
        "COMPONENT_COLORS": list(P.COMPONENT_COLORS.values()),
        "REGIME_COLORS": list(P.REGIME_COLORS.values()),
        "CATEGORY_COLORS": list(P.CATEGORY_COLORS),
        "SCENARIO_COLORS": list(P.SCENARIO_COLORS),
        "SLO_COLORS": list(P.SLO_COLORS.values()),
        "GPU_COLORS": [c for _, c in P.GPU_COLORS],
    }


@pytest.mark.parametrize("name", sorted(_non_method_maps()))
def test_no_style_map_reuses_a_method_colour(name):
    methods = {to_hex(c) for c in ALL_METHOD_COLOURS}
    colours = _non_method_maps()[name]
    assert colours
    assert not {to_hex(c) for c in colours} & methods, name
    # and none is a near copy of one (the old scenario blue #0077BB was 3 CIELAB units from SLIM (paper)'s)
    closest = min(_distance(c, m) for c in colours for m in METHOD_COLOURS)
    assert closest >= 8.0, (name, closest)


def test_category_colours_are_far_from_methods_and_from_one_another():
    cats = P.CATEGORY_COLORS
    assert len({to_hex(c) for c in cats}) == len(cats) >= 8
    for c in cats:
        assert min(_distance(c, m) for m in ALL_METHOD_COLOURS) >= 20.0, c
    assert min(_distance(a, b) for i, a in enumerate(cats) for b in cats[i + 1 :]) >= 25.0


def test_every_scenario_has_its_own_colour_and_marker():
    from slimlib.experiments.accuracy.scenarios import build_scenarios

    names = [s.name for s in build_scenarios()]
    assert len(P.SCENARIO_COLORS) >= len(names)
    styles = P.scenario_styles(names)
    assert list(styles) == names
    assert len({c for c, _ in styles.values()}) == len(names)  # no colour repeats (eval_parity)
    assert len(set(styles.values())) == len(names)


def test_one_component_one_colour_across_breakdowns():
    from slimlib.experiments.kernel_timing import composition_figures as kf
    from slimlib.kit import analysis as an

    assert {k: c for k, _, c in kf._PARTS} == {k: P.COMPONENT_COLORS[k] for k, _, _ in kf._PARTS}
    assert set(an.SHARE_CATEGORIES) <= set(P.COMPONENT_COLORS)
    assert P.COMPONENT_COLORS["gemm"] == P.COMPONENT_COLORS["ffn_gemm"]  # the GEMM bulk keeps one colour
    stacked = [P.COMPONENT_COLORS[k] for k in ("attention", "proj_gemm", "ffn_gemm", "lm_head")]
    assert len(set(stacked)) == len(stacked)


def test_engine_lengths_are_sequential_and_distinct_per_panel():
    from slimlib.experiments.engine_study.engine_figures import engine_model_style, length_style

    ils = [length_style(v) for v in (128, 512, 1024, 2048)]
    ols = [length_style(v) for v in (32, 64, 128, 256, 512)]
    for styles in (ils, ols):
        assert len({c for c, _ in styles}) == len(styles) and len({m for _, m in styles}) == len(styles)
    assert length_style(128) == ils[0] == ols[2]  # a length looks alike as IL and OL
    lum = [sum(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c, _ in ols]
    assert lum == sorted(lum)  # short dark, long light
    engine = [engine_model_style(m) for m in P.ENGINE_MODEL_STYLES]
    assert len({c for c, _ in engine}) == len(engine) and len({m for _, m in engine}) == len(engine)


def test_one_colour_per_gpu_in_every_figure():
    """Every registry GPU has its class's colour; the classes' colours differ; an unknown GPU is refused."""
    from slimlib.errors import UnknownNameError
    from slimlib.registry.gpus import gpu_names

    colours = {name: P.gpu_color(name) for name in gpu_names()}
    assert P.gpu_color("h100") == colours["h100-sxm-80gb"] == colours["h100-sxm-64gb"]
    classes = {
        "h100-sxm-80gb",
        "h200-sxm-141gb",
        "b200-sxm-180gb",
        "a100-sxm-80gb",
        "mi300x",
        "mi355x",
        "mi250",
    }
    assert len({colours[c] for c in classes}) == len(classes)
    with pytest.raises(UnknownNameError):
        P.gpu_color("tpu-v5")


def test_a_gpu_class_without_a_colour_is_refused(monkeypatch):
    from slimlib.errors import DataError

    monkeypatch.setattr(P, "GPU_COLORS", tuple(c for c in P.GPU_COLORS if c[0] != "mi355x"))
    with pytest.raises(DataError, match="GPU 'mi355x' has no colour"):
        P.gpu_color("mi355x")
