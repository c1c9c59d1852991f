"""The CPU engine's decode-GEMM benchmark: its shapes are the model's FLOPs, the committed table is intact and
physical, the registry's roof is the one the table gives, and `slim bench gemm`'s runner writes what the script
printed with a manifest (a stand-in engine interpreter; the real kernel needs vLLM's CPU build)."""

from __future__ import annotations

import shutil

import numpy as np
import pandas as pd
import pytest
from engine_doubles import fake_engine

from slimlib.data.decode_gemm import (
    COMMITTED,
    TABLE_FILE,
    decode_gemm_curve,
    decode_gemm_flops,
    read_decode_gemm,
    run_decode_gemm,
    write_decode_gemm,
)
from slimlib.errors import DataError
from slimlib.kit.decode_gemm_bench import gemm_shapes
from slimlib.kit.model_folder import model_config
from slimlib.model.features import model_features
from slimlib.registry.engine_models import ALL_ENGINE_MODELS
from slimlib.registry.gpus import get_gpu


@pytest.mark.parametrize("model", ALL_ENGINE_MODELS)
def test_the_timed_gemms_are_the_flops_the_model_charges_a_decode_token(model):
    """2 K N per GEMM summed = the layers' linear FLOPs (Eq. 8's bracket) + the LM head's, per token."""
    flops = sum(2.0 * k * n for _, k, n in gemm_shapes(model_config(model)))
    df = pd.DataFrame(
        {"model": [model], "gpu": "cpu", "batch_size": 1.0, "input_len": 128.0, "output_len": 64.0}
    )
    f = model_features(df, get_gpu("cpu"))
    assert flops == pytest.approx(f["linear_flops_per_token"][0] + f["lm_head_flops_per_token"][0], rel=1e-12)


def test_an_architecture_without_known_gemm_shapes_is_refused():
    with pytest.raises(ValueError, match="model_type 'mamba'"):
        gemm_shapes({"model_type": "mamba", "hidden_size": 8, "num_hidden_layers": 1, "vocab_size": 8})


def test_the_committed_table_is_physical_and_gives_the_registrys_roof():
    table = read_decode_gemm()
    cpu = get_gpu("cpu")
    assert set(table["threads"]) == {1}
    rate = table["flops"] / table["best_s"]
    assert (rate < cpu.peak_flops).all()  # one thread of the two the registry peak used
    assert (table["weight_bytes"] / table["best_s"] < 1.5 * cpu.mem_bw).all()  # streams at most ~ the triad
    by_model = table.pivot_table(index="tokens", columns="model", values="best_s")
    compute_bound = by_model.loc[by_model.index >= 32]
    assert (compute_bound.diff().dropna() > 0).all().all()  # past the weight read, more tokens take more time
    assert (
        (by_model.loc[256] / by_model.loc[128]).between(1.7, 2.3).all()
    )  # and about twice for twice the tokens
    assert cpu.decode_gemm_flops == pytest.approx(decode_gemm_flops(table), rel=5e-4)
    curve = decode_gemm_curve(table)
    assert [m for m, _ in cpu.decode_gemm_curve] == [m for m, _ in curve] == sorted(set(table["tokens"]))
    np.testing.assert_allclose([s for _, s in cpu.decode_gemm_curve], [s for _, s in curve], rtol=5e-5)
    one = table[table["tokens"] == 32]  # bf16: weight_bytes / 2 weights
    assert dict(curve)[32] == pytest.approx(float((one["best_s"] / (one["weight_bytes"] / 2)).median()))
    assert dict(curve)[256] > 1.8 * dict(curve)[128]  # compute-bound at the end: the extension's slope
    top = table[table["tokens"] == table["tokens"].max()]
    assert decode_gemm_flops(table) == pytest.approx(float((top["flops"] / top["best_s"]).median()))


def test_a_changed_table_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "gemm"
    shutil.copytree(COMMITTED, folder)
    path = folder / TABLE_FILE
    path.write_text(path.read_text(encoding="utf-8").replace("\n", "\n", 1) + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"decode_gemm.csv: sha256 differs from manifest.json"):
        read_decode_gemm(folder)
    with pytest.raises(DataError, match=r"nothing/decode_gemm.csv: missing; run `slim bench gemm --out "):
        read_decode_gemm(tmp_path / "nothing")


ROW = {"model": "m", "tokens": 4, "n_gemms": 5, "weight_bytes": 1e6, "flops": 4e6, "best_s": 1e-4,
       "median_s": 1.1e-4, "repeats": 3, "threads": 1}  # fmt: skip


def test_the_runner_writes_the_scripts_rows_with_a_manifest(tmp_path):
    rows = [ROW, {**ROW, "tokens": 8, "flops": 8e6, "best_s": 2e-4}]
    # the test host's load is not the benchmark's: the refusal is tested below on a stand-in reading
    table, manifest = run_decode_gemm(fake_engine(tmp_path, rows), {"m": {}}, [4, 8], 3, 1, check_load=False)
    assert table.to_dict("records") == rows
    assert (
        manifest["engine_version"] == "0.0-test" and manifest["threads"] == 1 and manifest["tokens"] == [4, 8]
    )
    assert {"outside_cpu", "cpu_steal", "outside_load"} <= set(manifest["load"])
    out = write_decode_gemm(tmp_path / "out", table, manifest)
    back = read_decode_gemm(out)
    pd.testing.assert_frame_equal(back, table, check_dtype=False)
    assert decode_gemm_flops(back) == pytest.approx(8e6 / 2e-4)
    assert decode_gemm_curve(back) == ((4, pytest.approx(1e-4 / 5e5)), (8, pytest.approx(2e-4 / 5e5)))
    with pytest.raises(DataError, match="1 token count"):
        decode_gemm_curve(back[back["tokens"] == 4])


def test_a_failing_benchmark_is_one_line_naming_the_interpreter(tmp_path):
    engine = fake_engine(tmp_path, [ROW], rc=3)
    with pytest.raises(
        DataError, match=r"fake-python: the decode-GEMM benchmark failed \(exit 3\): a log line"
    ):
        run_decode_gemm(engine, {"m": {}}, [4], 3, 1)
    assert not (tmp_path / "out").exists()


def test_a_benchmark_with_outside_load_is_refused(tmp_path, monkeypatch):
    import slimlib.data.kernel_bench as mod

    busy = {"cpu_user": 0.9, "cpu_system": 0.1, "cpu_steal": 0.0, "cpu_idle": 0.0, "outside_cpu": 0.9,
            "outside_load": True}  # fmt: skip
    monkeypatch.setattr(mod, "load_split", lambda *a, **k: busy)
    with pytest.raises(
        DataError, match=r"outside load during the decode-GEMM benchmark \(outside_cpu 0.9 cores"
    ):
        run_decode_gemm(fake_engine(tmp_path, [ROW]), {"m": {}}, [4], 3, 1)


def test_the_cli_writes_the_folder_and_prints_the_registry_fields_it_gives(tmp_path, monkeypatch, capsys):
    """`slim bench gemm` prints the curve and the roof in the registry's own field form (the benchmark itself is
    a stand-in here: the test host's load is not a quiet benchmark's)."""
    import slimlib.cli.cmd_bench as cmd_bench
    from slimlib.cli.main import main

    rows = [ROW, {**ROW, "tokens": 8, "flops": 8e6, "best_s": 2e-4}]
    fake = fake_engine(tmp_path, rows)
    real = cmd_bench.run_decode_gemm
    monkeypatch.setattr(cmd_bench, "run_decode_gemm",
                        lambda *a, **k: real(*a, **{**k, "check_load": False}))  # fmt: skip
    out = tmp_path / "gemm"
    assert main(["bench", "gemm", "--engine-python", fake, "--out", str(out), "--tokens", "4", "8"]) == 0
    printed = capsys.readouterr().out
    assert "2 rows; decode GEMM roof 40.0 GFLOP/s (median over models at M = 8)" in printed
    assert "decode_gemm_curve = ((4, 2.00000e-10), (8, 4.00000e-10)); decode_gemm_flops = 4e+10" in printed
    assert len(read_decode_gemm(out)) == 2


def test_the_amx_hosts_registry_entry_is_its_committed_table():
    table = read_decode_gemm(COMMITTED.parent / "engine-cpu-amx-gemm")
    amx = get_gpu("cpu-amx")
    assert set(table["threads"]) == {1}
    assert (table["flops"] / table["best_s"] < amx.peak_flops).all()
    assert amx.decode_gemm_flops == pytest.approx(decode_gemm_flops(table), rel=5e-4)
    curve = decode_gemm_curve(table)
    assert [m for m, _ in amx.decode_gemm_curve] == [m for m, _ in curve]
    np.testing.assert_allclose([s for _, s in amx.decode_gemm_curve], [s for _, s in curve], rtol=5e-5)
    # AMX: the roof at M = 256 is 5.7x the other host's (vLLM's onednn_mm takes the AMX path there)
    assert amx.decode_gemm_flops / get_gpu("cpu").decode_gemm_flops == pytest.approx(5.75, abs=0.05)
