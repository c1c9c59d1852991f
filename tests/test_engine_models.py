"""Model folders without weights, the scaled OPT family, the host CPU device, the campaign grid and the launcher."""

from __future__ import annotations

import importlib.util
import json

import pytest

from slimlib.data.catalog import data_dir
from slimlib.errors import DataError
from slimlib.kit.model_folder import NOTE_FILE, Scaling, model_config, write_model_folder
from slimlib.kit.vllm_runner import LAUNCHER
from slimlib.model.serving import serving_config
from slimlib.registry.architectures import architecture_from_config, get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.host_cpu import HOST_CPU_KV_SPACE_GIB

SHAPE = ("n_layers", "hidden_size", "n_heads", "n_kv_heads", "head_dim", "ffn_size", "ffn_kind", "vocab_size",
         "n_params", "kv_bytes", "weight_bytes", "max_position")  # fmt: skip


def _shape(a):
    return {k: getattr(a, k) for k in SHAPE}


@pytest.mark.parametrize("base", ["opt-1.3b", "opt-2.7b", "opt-6.7b", "opt-13b"])
def test_scaled_family_is_opt_divided_by_8_and_folders_match_the_registry(tmp_path, base):
    full, small = get_architecture(base), get_architecture(f"{base}-s8")
    assert small.n_layers * 8 == full.n_layers and small.hidden_size * 8 == full.hidden_size
    assert small.n_heads * 8 == full.n_heads and small.head_dim == full.head_dim
    assert small.n_layers / small.hidden_size == full.n_layers / full.hidden_size  # same depth/width ratio
    write_model_folder(tmp_path / "m", model_config(base, Scaling(divide=8)))
    assert _shape(architecture_from_config(tmp_path / "m")) == _shape(small)
    write_model_folder(tmp_path / "r", model_config(f"{base}-s8"))
    assert _shape(architecture_from_config(tmp_path / "r")) == _shape(small)


def test_model_folder_is_deterministic_servable_and_says_it_has_no_weights(tmp_path):
    cfg = model_config("opt-1.3b-s8")
    a = write_model_folder(tmp_path / "a", cfg, seed=0)
    b = write_model_folder(tmp_path / "b", cfg, seed=0)
    assert [p.name for p in a] == [p.name for p in b]
    assert all(pa.read_bytes() == pb.read_bytes() for pa, pb in zip(a, b, strict=True))
    names = {p.name for p in (tmp_path / "a").iterdir()}
    assert {"config.json", "tokenizer.json", "tokenizer_config.json", NOTE_FILE} <= names
    assert not [n for n in names if n.endswith((".safetensors", ".bin"))]
    assert "--load-format dummy" in (tmp_path / "a" / NOTE_FILE).read_text()
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tmp_path / "a" / "tokenizer.json"))
    assert 256 < tok.get_vocab_size() <= cfg["vocab_size"]
    ids = tok.encode("kame lori satun").ids
    assert tok.decode(ids) == "kame lori satun"  # byte-level BPE: lossless
    c = write_model_folder(tmp_path / "c", cfg, seed=1)
    assert c[1].read_bytes() != a[1].read_bytes()  # another seed, another tokenizer


def test_model_config_errors_and_explicit_fields(tmp_path):
    with pytest.raises(DataError, match="not divisible by 3"):
        model_config("opt-1.3b", Scaling(divide=3))
    cfg = model_config("llama-2-7b", Scaling(divide=8, layers=2))
    assert cfg["num_hidden_layers"] == 2 and cfg["hidden_size"] == 512 and cfg["head_dim"] == 128
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "model.safetensors").write_bytes(b"")
    with pytest.raises(DataError, match="holds weight files"):
        write_model_folder(tmp_path / "w", cfg)
    (tmp_path / "cfg.json").write_text(json.dumps(model_config("opt-2.7b")))
    assert model_config(tmp_path / "cfg.json", Scaling(divide=8))["hidden_size"] == 320


def test_cpu_is_a_device_wherever_a_gpu_name_is():
    cpu = get_gpu("cpu")
    assert cpu is get_gpu("CPU") is get_gpu("host-cpu")
    config = serving_config(get_architecture("opt-13b-s8"), cpu)
    # the default accounting gives the campaign's KV space minus the weights
    assert abs(config.kv_pool + config.weights - HOST_CPU_KV_SPACE_GIB * 2**30) < 2**20


def test_cpu_peaks_are_the_best_of_the_committed_campaigns_measurements():
    micros = []
    for folder in ("engine-cpu-pre-protocol", "engine-cpu"):
        manifest = json.loads((data_dir() / folder / "manifest.json").read_text())
        micros.append(manifest["sessions"][0]["microbenchmark"])
        assert manifest["sessions"][0]["engine_env"]["VLLM_CPU_KVCACHE_SPACE"] == f"{HOST_CPU_KV_SPACE_GIB:g}"
    cpu = get_gpu("cpu")
    assert cpu.peak_flops == pytest.approx(max(m["gemm"]["peak_flops"] for m in micros), rel=1e-3)
    assert cpu.mem_bw == pytest.approx(max(m["triad"]["peak_bytes_s"] for m in micros), rel=1e-3)


def test_launcher_answers_the_vllm_metadata_lookup_with_vllm_cpu(monkeypatch):
    spec = importlib.util.spec_from_file_location("vllm_cpu_launcher", LAUNCHER)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    import importlib.metadata as md

    def fake(name):
        if name == "vllm-cpu":
            return "0.32.0"
        raise md.PackageNotFoundError(name)

    monkeypatch.setattr(mod, "_version", fake)
    assert mod._patched_version("vllm") == "0.32.0"
    with pytest.raises(md.PackageNotFoundError):
        mod._patched_version("other")


def test_bench_model_creates_the_folders_of_its_output(tmp_path, capsys):
    """`slim bench model ... --out models/NAME` makes `models/` as needed (the engine smoke test's call), and still
    refuses an output beside the input config."""
    from slimlib.cli.main import main

    out = tmp_path / "models" / "opt-1.3b-s8"
    assert main(["bench", "model", "opt-1.3b", "--divide", "8", "--out", str(out)]) == 0
    assert (out / "config.json").is_file()
    capsys.readouterr()
    assert main(["bench", "model", str(out / "config.json"), "--divide", "2", "--out", str(out)]) == 2
    assert "holds the input" in capsys.readouterr().err
