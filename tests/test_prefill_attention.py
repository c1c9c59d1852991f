"""The CPU engine's prefill-attention micro-benchmark: the timed shapes are the model's, the committed table is
physical and gives the registry's rate, and `slim bench attention`'s runner writes what the script prints."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest
from engine_doubles import fake_engine

from slimlib.data.prefill_attention import (
    COMMITTED,
    TABLE_FILE,
    causal_flops,
    causal_share,
    prefill_attention_flops,
    read_prefill_attention,
    run_prefill_attention,
    write_prefill_attention,
)
from slimlib.errors import DataError
from slimlib.kit.model_folder import model_config
from slimlib.kit.prefill_attention_bench import attention_shape
from slimlib.model.features import model_features
from slimlib.registry.engine_models import ALL_ENGINE_MODELS
from slimlib.registry.gpus import get_gpu


@pytest.mark.parametrize("model", ALL_ENGINE_MODELS)
def test_the_timed_shapes_give_the_attention_flops_the_model_charges(model):
    """Query heads x head width = the D of the model's causal count 2 IL^2 D per layer."""
    heads, kv_heads, head_dim = attention_shape(model_config(model))
    df = pd.DataFrame(
        {"model": [model], "gpu": "cpu", "batch_size": 1.0, "input_len": 512.0, "output_len": 8.0}
    )
    f = model_features(df, get_gpu("cpu"))
    assert heads * head_dim == f["hidden_size"][0] and heads % kv_heads == 0


def test_the_committed_table_is_physical_and_gives_the_registrys_rate():
    table = read_prefill_attention()
    cpu = get_gpu("cpu")
    assert set(table["threads"]) == {1} and table.groupby("model")["input_len"].nunique().min() >= 4
    share = causal_share(table)
    long = table["input_len"] >= 1024
    assert share[long].between(0.45, 0.6).all()  # the kernel skips the masked half of a long prompt
    assert (share[~long] < 0.75).all()
    rate = causal_flops(table) / table["best_causal_s"]
    assert (rate < cpu.decode_gemm_flops).all()  # below the same thread's GEMMs, and so below the peak
    by_model = table.pivot_table(index="input_len", columns="model", values="best_causal_s")
    assert (by_model.diff().dropna() > 0).all().all()
    assert ((by_model.loc[4096] / by_model.loc[2048]).between(3.4, 4.6)).all()  # quadratic in the prompt
    assert cpu.prefill_attention_flops == pytest.approx(prefill_attention_flops(table), rel=5e-4)
    top = table[table["input_len"] == 4096]
    assert prefill_attention_flops(table) == pytest.approx(
        float((2.0 * 4096**2 * top["n_heads"] * top["head_dim"] / top["best_causal_s"]).median())
    )


def test_a_changed_or_missing_table_is_refused_naming_the_file(tmp_path):
    folder = tmp_path / "attn"
    shutil.copytree(COMMITTED, folder)
    path = folder / TABLE_FILE
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"prefill_attention.csv: sha256 differs from manifest.json"):
        read_prefill_attention(folder)
    with pytest.raises(
        DataError, match=r"nothing/prefill_attention.csv: missing; run `slim bench attention --out "
    ):
        read_prefill_attention(tmp_path / "nothing")


ROW = {"model": "m", "input_len": 1024, "n_heads": 4, "n_kv_heads": 2, "head_dim": 64, "isa": "vec",
       "best_causal_s": 1e-3, "median_causal_s": 1.1e-3, "best_full_s": 2e-3, "median_full_s": 2.1e-3,
       "repeats": 3, "threads": 1}  # fmt: skip


def test_the_runner_writes_the_scripts_rows_with_a_manifest(tmp_path):
    rows = [ROW, {**ROW, "input_len": 2048, "best_causal_s": 4e-3, "best_full_s": 7e-3}]
    # the test host's load is not the benchmark's: the refusal is tested with the decode-GEMM runner's
    table, manifest = run_prefill_attention(fake_engine(tmp_path, rows), {"m": {}}, [1024, 2048], 3, 1,
                                            check_load=False)  # fmt: skip
    assert table.to_dict("records") == rows
    assert manifest["kernel"] == "vllm._custom_ops.cpu_attention_with_kv_cache" and manifest["lengths"] == [
        1024,
        2048,
    ]
    assert manifest["engine_version"] == "0.0-test" and {"outside_cpu", "outside_load"} <= set(
        manifest["load"]
    )
    back = read_prefill_attention(write_prefill_attention(tmp_path / "out", table, manifest))
    pd.testing.assert_frame_equal(back, table, check_dtype=False)
    assert prefill_attention_flops(back) == pytest.approx(2.0 * 2048**2 * 256 / 4e-3)
    assert causal_share(back).tolist() == pytest.approx([0.5, 4 / 7])


def test_a_row_with_a_non_positive_time_is_refused_naming_it(tmp_path):
    table = pd.DataFrame([ROW, {**ROW, "best_full_s": 0.0}])
    out = write_prefill_attention(tmp_path / "out", table, {"what": "test"})
    with pytest.raises(DataError, match=r"prefill_attention.csv: row 3: .*best_full_s must be > 0"):
        read_prefill_attention(out)


def test_a_failing_benchmark_is_one_line_naming_the_interpreter(tmp_path):
    engine = fake_engine(tmp_path, [ROW], rc=3)
    with pytest.raises(
        DataError, match=r"fake-python: the prefill-attention benchmark failed \(exit 3\): a log line"
    ):
        run_prefill_attention(engine, {"m": {}}, [1024], 3, 1)


def test_the_cli_writes_the_folder_and_prints_the_registry_field_it_gives(tmp_path, monkeypatch, capsys):
    import slimlib.cli.cmd_bench as cmd_bench
    from slimlib.cli.main import main

    fake = fake_engine(
        tmp_path, [ROW, {**ROW, "input_len": 2048, "best_causal_s": 4e-3, "best_full_s": 8e-3}]
    )
    real = cmd_bench.run_prefill_attention
    monkeypatch.setattr(cmd_bench, "run_prefill_attention",
                        lambda *a, **k: real(*a, **{**k, "check_load": False}))  # fmt: skip
    out = tmp_path / "attn"
    assert (
        main(["bench", "attention", "--engine-python", fake, "--out", str(out), "--lengths", "1024", "2048"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "2 rows; causal / unmasked time 0.50-0.50; causal attention 536.9 GFLOP/s" in printed
    assert "registry field: prefill_attention_flops = 5.369e+11" in printed
    assert len(read_prefill_attention(out)) == 2


def test_the_amx_hosts_table_is_physical_and_gives_its_registry_rate():
    table = read_prefill_attention(COMMITTED.parent / "engine-cpu-amx-attention")
    amx = get_gpu("cpu-amx")
    assert set(table["threads"]) == {1} and set(table["isa"]) == {"amx"}
    share = causal_share(table)
    assert share[table["input_len"] >= 512].between(0.35, 0.65).all()  # the masked half skipped
    rate = causal_flops(table) / table["best_causal_s"]
    assert (rate < amx.decode_gemm_flops).all()  # below the same thread's AMX GEMMs
    assert amx.prefill_attention_flops == pytest.approx(prefill_attention_flops(table), rel=5e-4)
    # AMX attention: 7.7x the other host's kernel, which has no AMX path
    assert amx.prefill_attention_flops / get_gpu("cpu").prefill_attention_flops == pytest.approx(7.7, abs=0.1)


def test_the_benchmark_asks_for_the_amx_tile_state_before_timing(monkeypatch):
    """The attention kernel's AMX path needs the tile state the engine's first GEMM asks Linux for."""
    import ctypes

    from slimlib.kit import prefill_attention_bench as bench

    calls = []

    class Libc:
        def syscall(self, *args):
            calls.append(tuple(a.value for a in args))
            return 0

    monkeypatch.setattr(ctypes, "CDLL", lambda name, use_errno=False: Libc())
    monkeypatch.setattr("platform.system", lambda: "Linux")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    bench.allow_amx_tiles()
    assert calls == [(158, 0x1023, 18)]
    monkeypatch.setattr("platform.machine", lambda: "aarch64")
    bench.allow_amx_tiles()
    assert len(calls) == 1
