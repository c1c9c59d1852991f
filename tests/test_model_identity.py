"""A model is identified by its content, never by its folder's name: two different config.json files in
folders both named ``model`` are two models to `slim fit`; the same content in two folders is one model."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
from synthetic import TRUE_PARAMS, grid, synthesize

from slimlib.cli.main import main
from slimlib.model import PaperModel, model_features
from slimlib.model.validity import canonical_model
from slimlib.registry.architectures import Architecture, architecture_from_config, get_architecture

CONFIGS = Path(__file__).resolve().parent / "fixtures" / "configs"


def _model_folder(root: Path, sub: str, fixture: str) -> Path:
    """`root/sub/model/config.json`: the fixture without its ``_name_or_path`` (its name is the folder's)."""
    folder = root / sub / "model"
    folder.mkdir(parents=True)
    data = json.loads((CONFIGS / fixture).read_text())
    data.pop("_name_or_path", None)
    (folder / "config.json").write_text(json.dumps(data, indent=2))
    return folder


def test_two_configs_in_folders_named_model_fit_together(tmp_path, capsys):
    small = _model_folder(tmp_path, "small", "opt-125m.json")
    large = _model_folder(tmp_path, "large", "opt-350m.json")
    assert get_architecture(small).name == get_architecture(large).name == "model"
    assert get_architecture(small).identity != get_architecture(large).identity
    truth = PaperModel.with_params(TRUE_PARAMS, gpu="h100-sxm-80gb")
    df = synthesize(truth, grid(models=(str(small), str(large))))
    data = tmp_path / "runs.csv"
    df.to_csv(data, index=False)
    assert (
        main(["fit", str(data), "--out", str(tmp_path / "p.json"), "--variant", "paper", "--quiet"]) == 0
    ), capsys.readouterr().err


def test_same_content_in_two_folders_is_one_model(tmp_path):
    a = _model_folder(tmp_path, "a", "qwen3-8b.json")
    b = tmp_path / "elsewhere" / "qwen3-copy"
    b.mkdir(parents=True)
    shutil.copy(CONFIGS / "qwen3-8b.json", b / "config.json")
    assert get_architecture(a).source != get_architecture(b).source
    assert canonical_model(str(a)) == canonical_model(str(b)) == get_architecture(a).identity
    # a registry entry and a config.json of the same content are one model; a changed shape is another
    assert canonical_model("mistral-7b") == canonical_model(str(CONFIGS / "mistral-7b.json"))
    assert canonical_model("mistral-7b") == canonical_model("mistralai/Mistral-7B-v0.1")
    assert canonical_model("llama-2-7b") != canonical_model("llama-2-13b")


def test_identity_is_the_content_and_follows_every_shape_field():
    a = get_architecture("llama-2-7b")
    assert len(a.identity) == 16 and int(a.identity, 16) >= 0
    same = Architecture(**{**a.__dict__, "name": "x", "hf_id": "y/z", "source": "s", "aliases": ("w",)})
    assert same.identity == a.identity
    assert replace(a, n_layers=a.n_layers + 1).identity != a.identity
    assert replace(a, quantization="fp8").identity != a.identity
    assert replace(a, identity="forged").identity == a.identity


def test_file_reads_are_cached_on_the_resolved_path_and_follow_edits(tmp_path, monkeypatch):
    folder = _model_folder(tmp_path, "x", "opt-125m.json")
    first = get_architecture(folder)
    monkeypatch.chdir(folder.parent)
    assert get_architecture("model") is first  # the same file by a relative path: one cached reading
    text = (folder / "config.json").read_text().replace('"num_hidden_layers": 12', '"num_hidden_layers": 6')
    (folder / "config.json").write_text(text)
    edited = get_architecture("model")
    assert edited.n_layers == 6 and edited.identity != first.identity
    other = _model_folder(tmp_path, "y", "opt-350m.json")
    monkeypatch.chdir(other.parent)
    assert get_architecture("model").n_layers == 24  # same relative name, another file
    assert architecture_from_config(other).identity == get_architecture("model").identity


@pytest.mark.parametrize("fixture", ["opt-125m.json", "llama-3.1-8b.json", "gemma-2-9b.json"])
def test_registry_and_reader_share_identity(fixture):
    a = architecture_from_config(CONFIGS / fixture)
    assert a.identity == Architecture(**{**a.__dict__, "name": "other"}).identity


def test_model_features_follow_the_file_a_relative_path_names(tmp_path, monkeypatch):
    """`model_features` looks architectures up by the resolved file, never by the name string alone."""
    rows = {"batch_size": [1], "input_len": [8], "output_len": [8]}
    a = _model_folder(tmp_path, "a", "opt-125m.json")
    b = _model_folder(tmp_path, "b", "opt-350m.json")
    monkeypatch.chdir(a.parent)
    first = model_features(pd.DataFrame({"model": ["model"], **rows}))
    monkeypatch.chdir(b.parent)
    second = model_features(pd.DataFrame({"model": ["model"], **rows}))
    assert first["n_layers"][0] == 12 and second["n_layers"][0] == 24
