"""`slim data ingest`: a folder of vLLM benchmark result JSONs -> the table `slim fit` reads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from shared_paths import MEMGAP, needs

from slimlib.cli.main import main
from slimlib.data.ingest import checked, ingest
from slimlib.errors import DataError, UnknownNameError
from slimlib.schema import KEY_COLUMNS, TARGET_COLUMN, read_csv_table, validate_table

FIXTURE = Path(__file__).parent / "fixtures" / "ingest"
needs_mirror = needs(MEMGAP, "raw vLLM mirror")

OLD, NEW, DETAILED = "old-vllm-b32.json", "bench-serve-c16.json", "detailed-c4.json"


@pytest.fixture
def runs(tmp_path: Path) -> Path:
    dest = tmp_path / "runs"
    shutil.copytree(FIXTURE / "runs", dest)
    return dest


def _by_file(df: pd.DataFrame) -> pd.DataFrame:
    return df.set_index("source_file")


def _rewrite(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is ...:
            data.pop(key)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


def test_settings_come_from_sidecar_then_json_then_cli(runs):
    df = ingest(runs, gpu="h100-sxm-80gb", batch_size=999, input_len=1.0, output_len=1.0, model="opt-125m")
    assert df["source_file"].tolist() == sorted([OLD, NEW, DETAILED])  # one row per file, file-name order
    t = _by_file(df)
    # old vLLM file: no max_concurrency, so B, IL, OL come from slim-runs.csv; model from its model_id
    assert t.loc[OLD, ["batch_size", "input_len", "output_len"]].tolist() == [32, 100.0, 200.0]
    assert t.loc[OLD, "model"] == "opt-1.3b" and t.loc[OLD, "gpu"] == "h100-sxm-80gb"
    assert (
        t.loc[OLD, "settings_from"]
        == "batch_size=sidecar;input_len=sidecar;output_len=sidecar;model=json;gpu=cli"
    )
    # new vLLM file: max_concurrency, token totals / completed, model_id, --metadata gpu=...
    assert t.loc[NEW, ["batch_size", "input_len", "output_len"]].tolist() == [16, 81920 / 160, 20480 / 160]
    assert t.loc[NEW, "model"] == "llama-2-7b"
    assert t.loc[NEW, "gpu"] == "h100-sxm-80gb"  # registry spelling of the metadata's "H100-SXM-80GB"
    assert t.loc[NEW, "mean_e2el_ms"] == 7770.0
    # --save-detailed file: per-request lengths; the sidecar names the model (model_id is a local path)
    assert t.loc[DETAILED, ["batch_size", "input_len", "output_len"]].tolist() == [4, 500.0, 100.0]
    assert t.loc[DETAILED, "model"] == "llama-2-7b"
    assert pd.isna(t.loc[OLD, "mean_e2el_ms"])  # no e2el keys in that file
    assert "e2e_s" not in df.columns  # the fit table takes e2e_s for all rows or none
    assert t.loc[OLD, "throughput_tok_s"] == 600.0 and t.loc[OLD, "duration_s"] == 50.0
    assert t.loc[OLD, ["mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms"]].tolist() == [1200.5, 9.5, 9.6]


def test_cli_values_fill_what_the_files_lack(runs):
    (runs / "slim-runs.csv").unlink()
    with pytest.raises(DataError, match=rf"{OLD}: no value for 'batch_size'; .*--batch-size"):
        ingest(runs, gpu="h100-sxm-80gb")
    df = _by_file(ingest(runs, gpu="h100-sxm-80gb", batch_size=8, model="llama-2-13b"))
    assert df.loc[OLD, "batch_size"] == 8 and df.loc[NEW, "batch_size"] == 16  # JSON before the command line
    assert df.loc[DETAILED, "model"] == "llama-2-7b"  # basename of the local path /models/llama-2-7b


def test_metadata_max_num_seqs_caps_with_max_concurrency(runs):
    _rewrite(runs / NEW, max_num_seqs="8")  # written by --metadata max_num_seqs=8
    t = _by_file(ingest(runs, gpu="a100-sxm-80gb"))
    assert t.loc[NEW, "batch_size"] == 8 and t.loc[NEW, "max_num_seqs"] == 8  # the server's cap, carried
    _rewrite(runs / NEW, max_num_seqs="64")
    assert _by_file(ingest(runs, gpu="a100-sxm-80gb")).loc[NEW, "batch_size"] == 16


def test_how_the_server_ran_comes_from_the_metadata_or_the_sidecar(runs):
    """`slim plan`'s clients record the serving options (``--metadata quantization=fp8 ...``); ingest carries them
    into the table, checked, so the fit prices and schedules the runs as they ran."""
    _rewrite(runs / NEW, quantization="fp8", max_num_batched_tokens="8192", chunked_prefill="true")
    t = _by_file(ingest(runs, gpu="h100-sxm-80gb"))
    assert (t.loc[NEW, "quantization"], t.loc[NEW, "max_num_batched_tokens"]) == ("fp8", 8192)
    assert t.loc[NEW, "chunked_prefill"] is True and pd.isna(t.loc[OLD, "quantization"])
    side = (runs / "slim-runs.csv").read_text().splitlines()
    (runs / "slim-runs.csv").write_text(
        "\n".join([side[0] + ",max_num_batched_tokens", *(x + ",512" for x in side[1:])]) + "\n"
    )
    assert (
        _by_file(ingest(runs, gpu="h100-sxm-80gb")).loc[OLD, "max_num_batched_tokens"] == 512
    )  # the sidecar's
    for field, bad, says in (
        ("quantization", "fp5", "is not one of none, fp8"),
        ("max_num_batched_tokens", "2048.5", "must be a whole number >= 1"),
        ("chunked_prefill", "yes", "must be true or false"),
        ("gpu_memory_utilization", "1.5", r"must be a fraction in \(0, 1\]"),
    ):
        _rewrite(runs / NEW, **{field: bad})
        with pytest.raises(DataError, match=rf"{NEW}: {field} = '{bad}' \(json\) {says}"):
            ingest(runs, gpu="h100-sxm-80gb")
        _rewrite(runs / NEW, **{field: ...})


def test_yaml_sidecar(runs):
    df = _by_file(ingest(runs, sidecar=FIXTURE / "settings.yaml", gpu="h100-sxm-64gb"))
    assert df.loc[OLD, "batch_size"] == 64 and df.loc[OLD, "gpu"] == "a100-sxm-80gb"
    assert df.loc[OLD, "input_len"] == 100.0  # 10000 tokens / 100 completed, from the JSON
    assert df.loc[DETAILED, "gpu"] == "h100-sxm-64gb"
    (runs / "slim-runs.csv").unlink()
    shutil.copy(FIXTURE / "settings.yaml", runs / "slim-runs.yaml")
    assert _by_file(ingest(runs, gpu="h100-sxm-64gb")).loc[OLD, "batch_size"] == 64
    (runs / "slim-runs.yaml").write_text("runs:\n  - file: old-vllm-b32.json\n    batch_size: 2\n")
    assert _by_file(ingest(runs, gpu="h100-sxm-64gb", model="opt-1.3b")).loc[OLD, "batch_size"] == 2


def test_round_trip_to_the_fit_schema(runs, tmp_path):
    out = tmp_path / "tidy.csv"
    argv = ["data", "ingest", str(runs), "--gpu", "h100-sxm-80gb", "--out", str(out)]
    assert main(argv) == 0
    first = out.read_bytes()
    assert main(argv) == 0 and out.read_bytes() == first  # deterministic
    table = validate_table(read_csv_table(out))
    for col in (*KEY_COLUMNS, TARGET_COLUMN):
        assert col in table.columns
    assert len(table) == 3
    assert table.set_index("source_file").loc[NEW, "batch_size"] == 16


def test_e2e_column_only_when_every_file_has_it(runs):
    (runs / OLD).unlink()
    (runs / DETAILED).unlink()
    (runs / "slim-runs.csv").unlink()
    df = ingest(runs, gpu="h100-sxm-80gb")
    assert df["e2e_s"].tolist() == [pytest.approx(7.77)]  # mean_e2el_ms / 1000
    validate_table(df)
    (runs / NEW).unlink()
    shutil.copy(FIXTURE / "runs" / OLD, runs / OLD)
    assert "e2e_s" not in ingest(runs, gpu="h100-sxm-80gb", batch_size=2).columns


# ----------------------------------------------------------------------------------------------- bad input


def test_folder_errors(tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        ingest(tmp_path / "absent", gpu="h100-sxm-80gb")
    with pytest.raises(
        DataError, match=r"no \*\.json result files; run the vLLM benchmark with --save-result"
    ):
        ingest(tmp_path, gpu="h100-sxm-80gb")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"duration": 50.0, "completed": 1', "invalid or truncated JSON"),
        ("", "invalid or truncated JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"architectures": ["OPTForCausalLM"], "hidden_size": 2048}', r"missing field\(s\) duration"),
    ],
)
def test_broken_or_foreign_json(runs, text, message):
    (runs / "zz.json").write_text(text)
    with pytest.raises(DataError, match=rf"zz\.json: .*{message}"):
        ingest(runs, gpu="h100-sxm-80gb")


def test_append_result_file_is_refused(runs):
    line = (runs / OLD).read_text().strip()
    (runs / OLD).write_text(line + "\n" + line + "\n")
    with pytest.raises(DataError, match=r"old-vllm-b32\.json: holds more than one JSON result"):
        ingest(runs, gpu="h100-sxm-80gb")


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"duration": 0.05},
            "'request_throughput' = 2 disagrees with the counts over 'duration'",
        ),  # ms->s mix-up
        ({"duration": "fifty"}, "field 'duration' is 'fifty', expected a number"),
        ({"duration": -1.0}, "field 'duration'"),
        ({"total_token_throughput": 6.0}, "'total_token_throughput' = 6 disagrees"),
        ({"completed": 0, "request_throughput": 0.0}, "'completed' is 0; no request finished"),
        ({"total_output_tokens": ...}, r"missing field\(s\) total_output_tokens"),
        ({"max_concurrency": 0}, r"field 'max_concurrency' \(from json\) is 0; expected a number > 0"),
        ({"max_concurrency": "many"}, r"field 'max_concurrency' \(from json\) is 'many'"),
        ({"failed": -3}, "field 'failed' is -3"),
        ({"input_lens": []}, "field 'input_lens' is not a non-empty list"),
        ({"output_lens": [100, "x", 100, 100]}, r"field 'output_lens' \(from json\) is 'x'"),
        ({"model_id": ""}, r"no value for 'model'"),
    ],
)
def test_bad_fields(runs, changes, message):
    target = DETAILED if {"input_lens", "output_lens"} & set(changes) else NEW
    if "model_id" in changes:
        target = NEW
    _rewrite(runs / target, **changes)
    with pytest.raises(DataError, match=message) as info:
        ingest(runs, gpu="h100-sxm-80gb")
    assert target in str(info.value)


def test_unknown_model_id_needs_a_model(runs):
    _rewrite(runs / NEW, model_id="acme/secret-model")
    with pytest.raises(
        DataError, match=r"no value for 'model' \(its model_id 'acme/secret-model' is not a known"
    ):
        ingest(runs, gpu="h100-sxm-80gb")
    assert _by_file(ingest(runs, gpu="h100-sxm-80gb", model="mistral-7b")).loc[NEW, "model"] == "mistral-7b"


@pytest.mark.parametrize(
    ("cli", "message"),
    [
        ({"gpu": "h100-sxm-80gb", "input_len": 0.0}, None),  # not used: every file has lengths
        ({"gpu": None}, r"no value for 'gpu'; .*--metadata gpu=NAME, or pass --gpu"),
        ({"gpu": "h1000"}, r"field 'gpu' \(from cli\): unknown GPU"),
    ],
)
def test_cli_value_errors(runs, cli, message):
    if message is None:
        assert len(ingest(runs, **cli)) == 3
        return
    with pytest.raises((DataError, UnknownNameError), match=message):
        ingest(runs, **cli)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("old-vllm-b32.json,0,100,200,,", r"field 'batch_size' \(from sidecar\) is '0'"),
        (
            "old-vllm-b32.json,8.5,100,200,,",
            r"field 'batch_size' \(from sidecar\) is '8.5'; expected a whole number",
        ),
        ("old-vllm-b32.json,8,nan,200,,", r"field 'input_len' \(from sidecar\) is 'nan'"),
        ("old-vllm-b32.json,8,100,-5,,", r"field 'output_len' \(from sidecar\) is '-5'"),
        ("missing.json,8,100,200,,", r"slim-runs\.csv line 2: file 'missing\.json' is not a \*\.json result"),
    ],
)
def test_bad_sidecar_values(runs, row, message):
    (runs / "slim-runs.csv").write_text("file,batch_size,input_len,output_len,model,gpu\n" + row + "\n")
    with pytest.raises(DataError, match=message):
        ingest(runs, gpu="h100-sxm-80gb", model="opt-1.3b")


def test_bad_sidecar_files(runs):
    side = runs / "slim-runs.csv"
    side.write_text("name,batch_size\nold-vllm-b32.json,8\n")
    with pytest.raises(DataError, match="missing column 'file'"):
        ingest(runs, gpu="h100-sxm-80gb")
    side.write_text("file,batch,input_len\nold-vllm-b32.json,8,1\n")
    with pytest.raises(DataError, match=r"unknown field\(s\) batch; known: batch_size"):
        ingest(runs, gpu="h100-sxm-80gb")
    side.write_text("file,batch_size\nold-vllm-b32.json,8\nold-vllm-b32.json,16\n")
    with pytest.raises(DataError, match="listed twice"):
        ingest(runs, gpu="h100-sxm-80gb")
    side.write_text("")
    with pytest.raises(DataError, match="sidecar is empty"):
        ingest(runs, gpu="h100-sxm-80gb")
    side.unlink()
    (runs / "slim-runs.yaml").write_text("old-vllm-b32.json: [1, 2\n")
    with pytest.raises(DataError, match="not readable YAML"):
        ingest(runs, gpu="h100-sxm-80gb")
    (runs / "slim-runs.yaml").write_text("- 3\n")
    with pytest.raises(DataError, match="item 1 is not a mapping with a 'file' key"):
        ingest(runs, gpu="h100-sxm-80gb")
    (runs / "slim-runs.csv").write_text("file\n")
    with pytest.raises(DataError, match="keep one sidecar"):
        ingest(runs, gpu="h100-sxm-80gb")
    with pytest.raises(DataError, match="no such sidecar"):
        ingest(runs, gpu="h100-sxm-80gb", sidecar=runs / "nope.csv")


def test_failed_requests_are_an_exclusion_of_the_physical_checks(runs):
    _rewrite(runs / NEW, failed=2)
    table = ingest(runs, gpu="h100-sxm-80gb")
    assert _by_file(table).loc[NEW, "failed"] == 2  # read, not dropped silently
    kept, got = checked(table)
    assert NEW not in set(kept["source_file"])
    assert (
        "2 request(s) failed"
        in got.exclusions.set_index(["source_file", "check"]).loc[(NEW, "failed"), "reason"]
    )


@needs_mirror
def test_real_memgap_result_jsons(tmp_path):
    """Real vLLM 0.5 results (no max_concurrency): lengths from token totals, B and GPU from the command line."""
    files = sorted((MEMGAP / "benchmarks/definitive_results/background/opt-2.7b").glob("_*_/openai-*.json"))[
        :3
    ]
    assert files, "expected openai-*.json result files in the mirror"
    folder = tmp_path / "real"
    folder.mkdir()
    for f in files:
        shutil.copy(f, folder / f.name)
    df = ingest(folder, gpu="h100-sxm-64gb", batch_size=8)
    assert len(df) == len(files)
    assert set(df["model"]) == {"opt-2.7b"}  # from the model_id path's last component
    for f, row in zip(sorted(files, key=lambda p: p.name), df.itertuples(), strict=True):
        raw = json.loads(f.read_text())
        assert row.throughput_tok_s == raw["total_token_throughput"]
        assert row.input_len == raw["total_input_tokens"] / raw["completed"]
        assert row.output_len == raw["total_output_tokens"] / raw["completed"]
    validate_table(df)


@needs_mirror
def test_real_runs_round_trip_into_slim_model(tmp_path):
    """Real advisor runs (opt-1.3b, OL 130) -> sidecar for B -> ingest -> CSV -> PaperModel fit/predict columns."""
    from slimlib.model import PaperModel

    family = MEMGAP / "benchmarks/definitive_results/advisor/output_length/_130/opt-1.3b"
    folder = tmp_path / "advisor"
    folder.mkdir()
    lines = ["file,batch_size"]
    for run in sorted(family.glob("_*__2000")):
        results = list(run.glob("openai-*.json"))
        if len(results) != 1:  # a failed run without a result (listed in memgap's exclusions table)
            continue
        result = results[0]
        shutil.copy(result, folder / result.name)
        lines.append(f"{result.name},{run.name.strip('_').split('__')[0]}")
    (folder / "slim-runs.csv").write_text("\n".join(lines) + "\n")
    out = tmp_path / "tidy.csv"
    ingest(folder, gpu="h100-sxm-64gb").to_csv(out, index=False)
    table = validate_table(read_csv_table(out))
    assert len(table) == len(lines) - 1 >= 6
    assert set(table["model"]) == {"opt-1.3b"}
    assert table["input_len"].round().eq(242).all() and table["output_len"].round().eq(130).all()
    pred = PaperModel().fit(table).predict(table)
    for col in ("pred_throughput_tok_s", "pred_e2e_s", "pred_prefill_s", "pred_decode_s"):
        assert col in pred.columns and pred[col].notna().all()


def test_ingest_takes_one_result_file_as_well_as_a_folder(runs, tmp_path):
    out = tmp_path / "one.csv"
    assert main(["data", "ingest", str(runs / NEW), "--gpu", "h100-sxm-80gb", "--out", str(out)]) == 0
    df = pd.read_csv(out)
    assert df["source_file"].tolist() == [NEW] and df["batch_size"].tolist() == [16]
    with pytest.raises(DataError, match="no such folder or result file"):
        ingest(runs / "missing.json", gpu="h100-sxm-80gb")


def test_percentiles_and_client_are_read_from_the_result(runs):
    _rewrite(runs / NEW, p90_ttft_ms=190.0, p50_tpot_ms=58.5)
    row = _by_file(ingest(runs, gpu="h100-sxm-80gb")).loc[NEW]
    assert row["p50_ttft_ms"] == 140.0  # the result's median stands for the 50th
    assert row["p90_ttft_ms"] == 190.0 and row["p99_ttft_ms"] == 210.0
    assert row["p50_tpot_ms"] == 58.5  # a written p50 wins over the median
    assert row["client"] == "concurrency"  # --max-concurrency 16 below the 160 prompts
    _rewrite(runs / NEW, max_concurrency=None)
    assert _by_file(ingest(runs, gpu="h100-sxm-80gb", batch_size=16)).loc[NEW, "client"] == "burst"


def test_latencies_that_cannot_be_are_refused_with_the_row(runs):
    _rewrite(runs / NEW, p90_ttft_ms=250.0)  # above the p99 of 210
    table = ingest(runs, gpu="h100-sxm-80gb")
    with pytest.raises(DataError, match=r"row \d+.*p90 TTFT 250 ms > p99 210 ms"):
        validate_table(table)
    kept, got = checked(table)
    assert NEW not in set(kept["source_file"])
    reason = got.exclusions.set_index(["source_file", "check"]).loc[(NEW, "latency_order"), "reason"]
    assert "p90 TTFT 250 ms > p99 210 ms" in reason
