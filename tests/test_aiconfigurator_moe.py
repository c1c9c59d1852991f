"""Parser of AIConfigurator's MoE, MLA, MLA-BMM and all-to-all tables (slimlib.data.aiconfigurator_moe) on the real
raw files: every raw row is kept or counted in the exclusions, the committed tables match a rebuild."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
from shared_paths import RAW, needs

from slimlib.data import aiconfigurator_moe as am
from slimlib.data import load
from slimlib.data.aiconfigurator import AIC_NAME
from slimlib.data.build import write_data_table
from slimlib.data.catalog import coerce, data_dir
from slimlib.errors import DataError

pytest.importorskip("pyarrow")
AIC = RAW / AIC_NAME
SYS = AIC / "aiconfigurator_core" / "systems" / "data"
pytestmark = needs(AIC, "AIConfigurator kernel mirror")
NEW = ("aic-moe", "aic-mla", "aic-mla-bmm", "aic-moe-a2a", "aic-moe-mla-exclusions")


@pytest.fixture(scope="module")
def built():
    return am.build_moe_mla_tables(AIC)


def test_committed_tables_match_a_rebuild_and_stay_small(built, tmp_path):
    tables, files = built
    assert len(files) == len(set(files)) == 36
    for name in NEW:
        buf = tmp_path / f"{name}.csv"
        write_data_table(coerce(name, tables[name]), buf)
        committed = data_dir() / f"{name}.csv"
        assert buf.read_bytes() == committed.read_bytes(), name
        assert committed.stat().st_size < 5e6, name
    moe = load("aic-moe")
    assert str(moe["latency_ms"].dtype) == "float64" and str(moe["num_tokens"].dtype) == "Int64"
    assert load("aic-moe-a2a")["latency_us"].gt(0).all()


def test_every_raw_moe_row_is_kept_or_excluded_with_a_reason(built):
    tables, _ = built
    moe, ex = tables["aic-moe"], tables["aic-moe-mla-exclusions"]
    for system, ver in am.MOE_VERSIONS.items():
        raw = pd.read_parquet(SYS / system / "moe" / "vllm" / ver / "moe_perf.parquet")
        kept = moe[moe["system"] == system]
        dropped = ex[(ex["system"] == system) & (ex["vllm_version"] == ver)]["n_rows"].sum()
        assert len(raw) == len(kept) + dropped, system
        for older in am.MOE_OLDER.get(system, ()):
            raw = pd.read_parquet(SYS / system / "moe" / "vllm" / older / "moe_perf.parquet")
            e = ex[(ex["system"] == system) & (ex["vllm_version"] == older)]
            assert e["n_rows"].sum() == len(raw) and e["reason"].str.startswith("older vLLM table").all()
    layouts = set(zip(moe["moe_tp"], moe["moe_ep"], strict=True))
    assert layouts == {(1, 1), (8, 1), (1, 8), (2, 1), (4, 1)}
    # beyond one GPU: the balanced rows of TP 8 / EP 8, and the composition's rows (Mixtral's expert shape, bf16,
    # power-law routing, split over 2, 4 and 8 GPUs) and nothing else
    split = moe[(moe["moe_tp"] != 1) | (moe["moe_ep"] != 1)]
    shapes = am.composed_expert_shapes()
    composed = [am.composed_row(int(r.moe_tp), int(r.moe_ep), r.distribution, r.moe_dtype,
                                (int(r.hidden_size), int(r.inter_size), int(r.top_k), int(r.n_experts)), shapes)
                for r in split.itertuples()]  # fmt: skip
    assert set(split.loc[[not c for c in composed], "distribution"]) == {"balanced"}
    rows = split[composed]
    assert set(rows["distribution"]) == {am.COMPOSED_DISTRIBUTION} and set(rows["moe_dtype"]) == {"bfloat16"}
    mixtral = rows[(rows["hidden_size"] == 4096) & (rows["inter_size"] == 14336)]
    assert (4096, 14336, 2, 8) in shapes
    assert set(zip(mixtral["system"], mixtral["moe_tp"], strict=True)) == {
        (s, tp) for s in am.MOE_VERSIONS for tp in am.COMPOSED_TP
    }
    assert not moe["kernel_source"].str.endswith("situ_as_silu").any()
    assert set(moe["vllm_version"]) == {"0.24.0", "0.14.0"}  # the preview-build rows are excluded
    flagged = moe[moe["latency_stat"] == "min_of_two_runs"]
    assert set(flagged["system"]) == {"b200_sxm"} and set(flagged["moe_dtype"]) == {"nvfp4"}
    assert set(moe["latency_stat"]) == {"one_run", "min_of_two_runs"}
    reasons = set(ex["reason"])
    assert any(r.startswith("approximation: Kimi-K3 SITU") for r in reasons)
    assert any(r.startswith("other runtime") for r in reasons)


def test_mla_bmm_and_a2a_keep_every_row(built):
    tables, _ = built
    mla = tables["aic-mla"]
    n_raw = sum(len(pd.read_parquet(p)) for p in SYS.glob("*/mla/vllm/0.24.0/*.parquet"))
    assert len(mla) == n_raw
    gen, ctx = mla[mla["phase"] == "generation"], mla[mla["phase"] == "context"]
    assert gen["input_len"].isna().all() and gen["context"].notna().all() and ctx["context"].isna().all()
    assert set(mla.loc[mla["system"] == "b200_sxm", "norm_dispatch"]) == {"vllm_c_eager_surrogate"}
    assert set(mla.loc[mla["system"] != "b200_sxm", "norm_dispatch"]) == {"default"}
    assert len(tables["aic-mla-bmm"]) == 3 * 636
    assert len(tables["aic-moe-a2a"]) == 324 + 648 + 324
    assert set(tables["aic-moe-mla-exclusions"]["source"]) == {"moe_perf"}


def test_changed_appended_rows_and_foreign_mla_model_are_errors(monkeypatch):
    a = am.APPENDED[0]
    monkeypatch.setattr(am, "APPENDED", (dataclasses.replace(a, n_rows=a.n_rows + 1), *am.APPENDED[1:]))
    with pytest.raises(
        DataError, match=r"h100_sxm/moe/vllm/0\.24\.0/moe_perf\.parquet: 972 rows match .* names 973"
    ):
        am.build_moe_mla_tables(AIC)
    monkeypatch.undo()
    monkeypatch.setattr(am, "MLA_MODEL", "acme/Other")
    with pytest.raises(
        DataError, match=r"mla_context_module_perf\.parquet: row 0: model .* expected 'acme/Other'"
    ):
        am.build_moe_mla_tables(AIC)


def test_missing_folder(tmp_path):
    with pytest.raises(DataError, match="no aiconfigurator_core/systems/ here"):
        am.build_moe_mla_tables(tmp_path)
