"""`slim fit` / `slim predict`: round trip on a temporary CSV, one-line errors, help texts."""

import json

import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

from slimlib.cli.main import main
from slimlib.model import PaperModel


@pytest.fixture()
def data_csv(tmp_path):
    truth = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid())
    path = tmp_path / "runs.csv"
    df.to_csv(path, index=False)
    return path


def test_fit_predict_round_trip(data_csv, tmp_path, capsys):
    params = tmp_path / "params.json"
    assert main(["fit", str(data_csv), "--out", str(params), "--variant", "paper"]) == 0
    out = capsys.readouterr().out
    assert "train throughput MAPE" in out and "eta_m" in out
    d = json.loads(params.read_text())
    assert d["variant"] == "paper" and d["gpu"] == "h100-sxm-80gb"
    for k, v in TRUE_PARAMS.items():
        assert d["params"][k] == pytest.approx(v, rel=0.01)

    grid_csv = tmp_path / "grid.csv"
    pd.read_csv(data_csv).drop(columns=["throughput_tok_s", "e2e_s"]).to_csv(grid_csv, index=False)
    pred_csv = tmp_path / "pred.csv"
    assert main(["predict", str(params), str(grid_csv), "--out", str(pred_csv)]) == 0
    pred = pd.read_csv(pred_csv)
    assert list(pred.columns[-6:]) == [
        "pred_throughput_tok_s",
        "pred_e2e_s",
        "pred_prefill_s",
        "pred_decode_s",
        "pred_ttft_s",
        "pred_tpot_s",
    ]
    assert pred[["pred_ttft_s", "pred_tpot_s"]].isna().all().all()  # the paper model has no TTFT/TPOT split
    truth = pd.read_csv(data_csv)
    rel = (pred["pred_throughput_tok_s"] - truth["throughput_tok_s"]).abs() / truth["throughput_tok_s"]
    assert rel.max() < 1e-3
    assert (
        (pred["pred_e2e_s"] - pred["pred_prefill_s"] - pred["pred_decode_s"])
        .round(9)
        .eq(round(d["params"]["t_fixed"], 9))
        .all()
    )


def test_predict_to_stdout(data_csv, tmp_path, capsys):
    params = tmp_path / "p.json"
    main(["fit", str(data_csv), "--out", str(params), "--variant", "paper", "--fix", "B0=3"])
    capsys.readouterr()
    assert main(["predict", str(params), str(data_csv)]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0].endswith("pred_tpot_s") and len(text.splitlines()) == 61


@pytest.mark.parametrize(
    "content, needle",
    [
        ("", "is empty"),
        (
            "model,gpu,batch_size,input_len,output_len\nopt-1.3b,h100,1,2,3\n",
            "lacks column(s) throughput_tok_s",
        ),
        (
            "model,gpu,batch_size,input_len,output_len,throughput_tok_s\nopt-1.3b,h100,1,2,3,x\n",
            "line 2: field 'throughput_tok_s' is 'x'",
        ),
        (
            "model,gpu,batch_size,input_len,output_len,throughput_tok_s\nopt-1.3b,h100,1,-2,3,5\n",
            "line 2: field 'input_len' is -2",
        ),
        (
            "model,gpu,batch_size,input_len,output_len,throughput_tok_s\nnope,h100,1,2,3,5\n",
            "line 2: unknown model 'nope'",
        ),
    ],
)
def test_fit_bad_input_is_one_line_error(tmp_path, capsys, content, needle):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    assert main(["fit", str(path), "--out", str(tmp_path / "p.json"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert needle in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "p.json").exists()


def test_default_variant_is_recorded(data_csv, tmp_path, capsys):
    from slimlib.model import DEFAULT_VARIANT

    params = tmp_path / "p.json"
    assert main(["fit", str(data_csv), "--out", str(params)]) == 0
    assert json.loads(params.read_text())["variant"] == DEFAULT_VARIANT
    assert main(["predict", str(params), str(data_csv)]) == 0


def test_fit_several_files_and_error_names_the_file(data_csv, tmp_path, capsys):
    df = pd.read_csv(data_csv)
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    df.iloc[:30].to_csv(a, index=False)
    df.iloc[30:].to_csv(b, index=False)
    one, two = tmp_path / "one.json", tmp_path / "two.json"
    assert main(["fit", str(data_csv), "--out", str(one)]) == 0
    assert main(["fit", str(a), str(b), "--out", str(two)]) == 0
    assert json.loads(one.read_text())["params"] == json.loads(two.read_text())["params"]
    df.iloc[30:].assign(output_len=0).to_csv(b, index=False)
    capsys.readouterr()
    assert main(["fit", str(a), str(b), "--out", str(two)]) == 2
    assert f"{b} line 2: field 'output_len' is 0" in capsys.readouterr().err


def test_fit_bad_fix_and_missing_file(tmp_path, capsys, data_csv):
    assert main(["fit", str(data_csv), "--out", str(tmp_path / "p.json"), "--fix", "B0"]) == 2
    assert "NAME=VALUE" in capsys.readouterr().err
    assert main(["fit", str(tmp_path / "nothere.csv"), "--out", str(tmp_path / "p.json")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_predict_rejects_other_gpu(data_csv, tmp_path, capsys):
    params = tmp_path / "p.json"
    main(["fit", str(data_csv), "--out", str(params)])
    other = tmp_path / "a100.csv"
    pd.read_csv(data_csv).assign(gpu="a100-sxm-80gb").to_csv(other, index=False)
    assert main(["predict", str(params), str(other)]) == 2
    assert "parameters are for h100-sxm-80gb" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", [[], ["fit"], ["predict"]])
def test_help_has_examples(cmd, capsys):
    with pytest.raises(SystemExit) as exc:
        main([*cmd, "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "usage: slim" in out
    if cmd:
        assert "examples:" in out


def test_model_column_may_be_a_config_json_path(tmp_path):
    """A row's model may be a path to a Hugging Face config.json: it predicts exactly as the registry entry."""
    from pathlib import Path

    cfg = Path(__file__).parent / "fixtures" / "configs" / "opt-125m.json"
    truth = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    by_name = grid(models=("opt-125m",))
    by_path = by_name.assign(model=str(cfg))
    pd.testing.assert_frame_equal(truth.predict(by_path), truth.predict(by_name))
    data = tmp_path / "cfg.csv"
    synthesize(truth, by_path).to_csv(data, index=False)
    assert (
        main(
            ["fit", str(data), "--out", str(tmp_path / "p.json"), "--variant", "paper", "--fix", "gamma=5e-7"]
        )
        == 0
    )


def test_an_unexpected_error_is_one_line_and_debug_shows_its_traceback(monkeypatch, capsys):
    """A bug (any exception that is not a SlimError) is one line pointing at `slim --debug`; with it, the exception
    itself."""
    import slimlib.cli.cmd_registry as cmd_registry
    from slimlib.cli.main import main

    def boom(args):
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(cmd_registry, "_cmd_gpus", boom)
    assert main(["gpus"]) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "slim gpus: unexpected error (RuntimeError: boom second line); this is a bug in slim: rerun as "
        "`slim --debug ...` for the traceback and report it"
    ]
    with pytest.raises(RuntimeError, match="boom"):
        main(["--debug", "gpus"])
