"""Vidur operator tables: hand-made fixtures (every malformed case) and the real mirror when present."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest
from shared_paths import VIDUR, needs

from slimlib.data.vidur import (
    ATTENTION_COLUMNS,
    CPU_COLUMNS,
    MLP_COLUMNS,
    VIDUR_GPU_NAMES,
    build_vidur_tables,
)
from slimlib.errors import DataError

FIXTURE = Path(__file__).parent / "fixtures" / "vidur"
MIRROR = VIDUR
needs_mirror = needs(MIRROR, "raw Vidur mirror")


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    """A writable copy of the hand-made fixture mirror."""
    dest = tmp_path / "vidur"
    shutil.copytree(FIXTURE, dest)
    return dest


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"fixture text {old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


# ------------------------------------------------------------------------------------------- fixtures


def test_fixture_tables_shape_and_values():
    tables, files = build_vidur_tables(FIXTURE)
    assert sorted(tables) == ["vidur-attention", "vidur-cpu-overheads", "vidur-mlp"]
    assert [p.relative_to(FIXTURE).as_posix() for p in files] == [
        "compute/h100/acme/tiny-1b/mlp.csv",
        "legacy-e2d00e9/a100/attention.csv",
        "legacy-e2d00e9/a100/cpu_overheads.csv",
        "legacy-e2d00e9/a100/mlp.csv",
    ]
    mlp = tables["vidur-mlp"]
    assert list(mlp.columns) == list(MLP_COLUMNS)
    # 5 rows x 2 ops (compute) + 2 rows x 2 ops (legacy)
    assert len(mlp) == 14
    tiny = mlp[mlp["model"] == "acme/tiny-1b"]
    assert set(tiny["gpu"]) == {"h100-sxm-80gb"}
    assert set(tiny["source_commit"]) == {"7d47513"}
    # the legacy mlp takes its model from the sibling cpu_overheads.csv
    legacy = mlp[mlp["source_commit"] == "e2d00e9"]
    assert set(legacy["model"]) == {"acme/tiny-8b"} and set(legacy["gpu"]) == {"a100-sxm-80gb"}
    # values carried through unchanged, per statistic
    row = tiny[
        (tiny["operation"] == "mlp_up_proj")
        & (tiny["num_tokens"] == 64)
        & (tiny["num_tensor_parallel_workers"] == 1)
    ]
    assert row[
        ["time_ms_min", "time_ms_max", "time_ms_mean", "time_ms_median", "time_ms_std"]
    ].values.tolist() == [[0.050, 0.056, 0.053, 0.052, 0.002]]
    # the re-measured configuration (num_tokens 128 twice) is kept and numbered
    rep = tiny[(tiny["operation"] == "attn_pre_proj") & (tiny["num_tokens"] == 128)]
    assert rep["repeat"].tolist() == [0, 1] and rep["time_ms_mean"].tolist() == [0.044, 0.043]
    # deterministic order: layer order of operations (attn_pre_proj before mlp_up_proj), then num_tokens
    tp1 = tiny[tiny["num_tensor_parallel_workers"] == 1]
    assert tp1["operation"].tolist() == ["attn_pre_proj"] * 4 + ["mlp_up_proj"] * 4
    assert tp1["num_tokens"].tolist()[:4] == [1, 64, 128, 128]
    assert mlp.index.tolist() == list(range(len(mlp)))


def test_fixture_attention_long_format():
    att = build_vidur_tables(FIXTURE)[0]["vidur-attention"]
    assert list(att.columns) == list(ATTENTION_COLUMNS)
    # 2 decode rows x (reshape + decode kernel) + 1 prefill row x (reshape + prefill kernel); empty kernels give no row
    assert len(att) == 6
    assert att.groupby(["phase", "operation"]).size().to_dict() == {
        ("decode", "attn_decode"): 2,
        ("decode", "attn_input_reshape"): 2,
        ("prefill", "attn_input_reshape"): 1,
        ("prefill", "attn_prefill"): 1,
    }
    assert set(att["head_dim"]) == {128}
    assert set(att["attention_backend"]) == {"flash_attention"} and set(att["profile_method"]) == {"kineto"}
    assert att["model"].isna().all()  # the legacy attention file names no model
    dec = att[att["operation"] == "attn_decode"]
    assert dec["batch_size"].tolist() == [2, 4]  # sorted
    assert dec["kv_cache_size"].tolist() == [1024, 512]
    assert dec["time_ms_mean"].tolist() == [0.022, 0.016]
    pre = att[att["operation"] == "attn_prefill"]
    assert pre[["prefill_chunk_size", "kv_cache_size", "time_ms_median"]].values.tolist() == [[256, 0, 0.092]]


def test_fixture_cpu_overheads():
    cpu = build_vidur_tables(FIXTURE)[0]["vidur-cpu-overheads"]
    assert list(cpu.columns) == list(CPU_COLUMNS)
    assert cpu["operation"].unique().tolist() == ["schedule", "model_execution_e2e", "ray_comm_time"]
    got = cpu.set_index(["operation", "batch_size"])
    assert got.loc[("model_execution_e2e", 16), "time_ms_mean"] == 31.0
    assert got.loc[("model_execution_e2e", 16), "time_ms_median"] == 30.5
    assert pd.isna(got.loc[("ray_comm_time", 8), "time_ms_median"])  # only a mean is recorded upstream


def test_build_is_deterministic(mirror):
    a, _ = build_vidur_tables(FIXTURE)
    b, _ = build_vidur_tables(mirror)
    for name in a:
        assert a[name].to_csv(index=False) == b[name].to_csv(index=False)


# ------------------------------------------------------------------------------------------- malformed input


def test_missing_root_and_empty_root(tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        build_vidur_tables(tmp_path / "absent")
    with pytest.raises(DataError, match="no CSV files"):
        build_vidur_tables(tmp_path)


MLP = "compute/h100/acme/tiny-1b/mlp.csv"
ATT = "legacy-e2d00e9/a100/attention.csv"
CPU = "legacy-e2d00e9/a100/cpu_overheads.csv"


@pytest.mark.parametrize(
    ("rel", "old", "new", "message"),
    [
        (MLP, ",num_tokens,", ",n_tokens,", r"missing column\(s\) num_tokens"),
        (MLP, "time_stats.mlp_up_proj.std,", "time_stats.mlp_up_proj.stdev,", "not time_stats"),
        (
            MLP,
            "time_stats.mlp_up_proj.median,",
            "time_stats.other.median,",
            r"missing column\(s\) time_stats.mlp_up_proj.median",
        ),
        (
            MLP,
            "0.020,0.024",
            "abc,0.024",
            "line 2: field 'time_stats.attn_pre_proj.min' = 'abc' is not a number",
        ),
        (MLP, "0.020,0.024", ",0.024", "line 2: field 'time_stats.attn_pre_proj.min'"),
        (MLP, "0.020,0.024", "-0.020,0.024", "expected a finite time >= 0"),
        (MLP, "0.020,0.024,0.022", "0.030,0.024,0.022", "min <= mean, median <= max does not hold"),
        (MLP, "True,64,1", "maybe,64,1", "field 'use_gated_mlp' = 'maybe'; expected True or False"),
        (MLP, "True,64,1", "True,64.5,1", "field 'num_tokens' = 64.5 is not a whole number"),
        (MLP, "True,64,1", "True,0,1", "field 'num_tokens' = 0; expected >= 1"),
        (ATT, ",kv_cache_size,", ",kv_size,", r"missing column\(s\) kv_cache_size"),
        (ATT, "0.015,0.017,0.016,0.016,0.001", ",,,,", "line 2: a decode row without time_stats.attn_decode"),
        (
            ATT,
            "0.015,0.017,0.016,0.016,0.001",
            "0.015,,0.016,0.016,0.001",
            "is empty while other attn_decode",
        ),
        (ATT, ",False,", ",no,", "field 'is_prefill'"),
        (CPU, ",model_name,", ",model,", r"missing column\(s\) model_name"),
        (CPU, "acme/tiny-8b,8", ",8", "line 2: field 'model_name' is empty"),
        (CPU, "30.0,0.04", "thirty,0.04", "field 'model_execution_e2e_mean' = 'thirty' is not a number"),
    ],
)
def test_malformed_fields(mirror, rel, old, new, message):
    _edit(mirror / rel, old, new)
    with pytest.raises(DataError, match=message) as info:
        build_vidur_tables(mirror)
    assert rel.split("/")[-1] in str(info.value)  # the message names the file


def test_truncated_empty_and_header_only_files(mirror):
    path = mirror / MLP
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:3]) + "\n" + lines[3][:25])  # last row cut mid-way
    with pytest.raises(DataError, match=r"mlp\.csv line 4: field"):
        build_vidur_tables(mirror)
    path.write_text("")
    with pytest.raises(DataError, match="the file is empty"):
        build_vidur_tables(mirror)
    path.write_text(lines[0] + "\n")
    with pytest.raises(DataError, match="header only"):
        build_vidur_tables(mirror)
    path.write_text('a,"b\n1,2\n')  # unbalanced quote
    with pytest.raises(DataError, match="not a readable CSV|missing column"):
        build_vidur_tables(mirror)


def test_lfs_pointer_is_not_data(mirror):
    (mirror / MLP).write_text("version https://git-lfs.github.com/spec/v1\noid sha256:00\nsize 12\n")
    with pytest.raises(DataError, match="Git LFS pointer"):
        build_vidur_tables(mirror)


def test_unknown_layout_gpu_and_table(mirror):
    stray = mirror / "compute" / "h100" / "stray.csv"
    stray.write_text("a\n1\n")
    with pytest.raises(DataError, match="unexpected location"):
        build_vidur_tables(mirror)
    stray.unlink()
    (mirror / "compute" / "h100").rename(mirror / "compute" / "v100")
    with pytest.raises(DataError, match="unknown Vidur GPU folder 'v100'"):
        build_vidur_tables(mirror)
    (mirror / "compute" / "v100").rename(mirror / "compute" / "h100")
    shutil.copy(mirror / MLP, mirror / "compute/h100/acme/tiny-1b/linear.csv")
    with pytest.raises(DataError, match="unknown Vidur table 'linear.csv'"):
        build_vidur_tables(mirror)


def test_legacy_mlp_needs_a_model_name(mirror):
    (mirror / CPU).unlink()
    with pytest.raises(DataError, match="cannot tell which model"):
        build_vidur_tables(mirror)


def test_gpu_names_are_in_the_hardware_registry():
    from slimlib.registry.gpus import get_gpu

    for name in VIDUR_GPU_NAMES.values():
        assert get_gpu(name).name == name


# ------------------------------------------------------------------------------------------- real mirror


@needs_mirror
def test_real_mirror_row_counts_and_invariants():
    tables, files = build_vidur_tables(MIRROR)
    assert len(files) == 9
    raw_rows = {p: sum(1 for _ in p.open()) - 1 for p in files}
    mlp, att, cpu = tables["vidur-mlp"], tables["vidur-attention"], tables["vidur-cpu-overheads"]
    # every raw mlp row appears once per operation of its file
    expected_mlp = 0
    for p in files:
        if p.name == "mlp.csv":
            header = p.open().readline().split(",")
            n_ops = len({c.split(".")[1] for c in header if c.startswith("time_stats.")})
            expected_mlp += raw_rows[p] * n_ops
    assert len(mlp) == expected_mlp
    assert set(mlp["gpu"]) == {"a100-sxm-80gb", "h100-sxm-80gb"}
    assert "meta-llama/Llama-2-70b-hf" in set(mlp["model"])
    assert set(mlp.loc[mlp["source_commit"] == "e2d00e9", "model"]) == {"codellama/CodeLlama-34b-Instruct-hf"}
    assert not mlp.duplicated(
        ["gpu", "model", "source_commit", "num_tensor_parallel_workers", "operation", "num_tokens", "repeat"]
    ).any()
    assert (mlp["time_ms_min"] <= mlp["time_ms_max"]).all()
    # attention: every raw row gives its phase kernel + two reshapes
    att_raw = raw_rows[MIRROR / ATT]
    assert len(att) == 3 * att_raw
    kernels = att[att["operation"].isin(["attn_decode", "attn_prefill"])]
    assert len(kernels) == att_raw
    assert (kernels["phase"] == kernels["operation"].str.removeprefix("attn_")).all()
    assert set(att["head_dim"]) == {128}
    # decode attention time grows with the KV cache read at a fixed batch (memory-bound scan)
    dec = kernels[(kernels["phase"] == "decode") & (kernels["batch_size"] == 64) & (kernels["repeat"] == 0)]
    dec = dec.sort_values("kv_cache_size")
    assert dec["time_ms_median"].iloc[-1] > 4 * dec["time_ms_median"].iloc[0]
    assert len(cpu) == raw_rows[MIRROR / CPU] * 6


@needs_mirror
def test_real_mirror_rebuild_is_identical():
    a, _ = build_vidur_tables(MIRROR)
    b, _ = build_vidur_tables(MIRROR)
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name])
