"""Bad numbers and impossible shapes in a config.json: each is refused in one line naming the file and the key
(NaN, infinity, sizes above the bounds, deep nesting, expert groups, ranks and windows of 0, RoPE factors), while
null still means "no such feature"; the bounds leave every published config of the data mirror far inside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from config_files import write_config
from shared_paths import RAW, needs

from slimlib.errors import DataError
from slimlib.registry.architectures import architecture_from_config
from slimlib.registry.config_reader import MAX_INTEGER, MAX_SIZE

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "configs"
MIRROR = RAW / "aiconfigurator-kernels" / "aiconfigurator_core" / "model_configs"
_MIRRORED = needs(MIRROR, "AIConfigurator model_configs mirror")


def _config(name: str) -> dict:
    """A published config: a test fixture (``*.json``) or a mirror file (``owner--model``)."""
    path = MIRROR / f"{name}_config.json" if "--" in name else FIXTURES / f"{name}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def _write_edited(folder: Path, name: str, key: str, raw: str) -> Path:
    """`name`'s config with `key` (``a.b`` for a nested one) set to the JSON text `raw`, as config.json."""
    data = _config(name)
    outer, _, inner = key.partition(".")
    if inner:
        data[outer][inner] = "@@"
    else:
        data[outer] = "@@"
    p = write_config(folder, data)
    p.write_text(p.read_text().replace('"@@"', raw))
    return p


LLAMA, DSV3, MIXTRAL = "llama-3.1-8b", "deepseek-ai--DeepSeek-V3", "mistralai--Mixtral-8x7B-v0.1"


@pytest.mark.parametrize(
    "name, key, raw",
    [
        (LLAMA, "hidden_size", "NaN"),
        (LLAMA, "hidden_size", "1e400"),
        (LLAMA, "hidden_size", "-Infinity"),
        (LLAMA, "hidden_size", "1000001"),
        (LLAMA, "num_hidden_layers", "4611686018427387904"),
        (LLAMA, "vocab_size", "10000001"),
        (LLAMA, "intermediate_size", "1e300"),
        (LLAMA, "num_attention_heads", "true"),
        (LLAMA, "rope_scaling.factor", "-8.0"),
        (LLAMA, "rope_scaling.factor", "0"),
        (LLAMA, "rope_scaling.factor", "NaN"),
        pytest.param(DSV3, "topk_group", "9", marks=_MIRRORED),
        pytest.param(DSV3, "n_group", "7", marks=_MIRRORED),
        pytest.param(DSV3, "n_group", "0", marks=_MIRRORED),
        pytest.param(DSV3, "q_lora_rank", "0", marks=_MIRRORED),
        pytest.param(MIXTRAL, "sliding_window", "0", marks=_MIRRORED),
        ("mistral-7b", "sliding_window", "0"),
    ],
)
def test_a_bad_value_is_refused_naming_the_file_and_the_key(tmp_path, name, key, raw):
    p = _write_edited(tmp_path, name, key, raw)
    with pytest.raises(DataError) as err:
        architecture_from_config(p)
    msg = str(err.value)
    assert str(p) in msg and f"'{key}" in msg and "\n" not in msg


@pytest.mark.parametrize(
    "name, key",
    [
        pytest.param(DSV3, "q_lora_rank", marks=_MIRRORED),
        pytest.param(MIXTRAL, "sliding_window", marks=_MIRRORED),
        ("mistral-7b", "sliding_window"),
    ],
)
def test_null_means_no_such_feature(tmp_path, name, key):
    arch = architecture_from_config(_write_edited(tmp_path, name, key, "null"))
    assert arch.n_params > 0
    if key == "sliding_window":
        assert arch.sliding_window == 0 and arch.n_sliding_layers == 0
    else:
        assert arch.q_lora_rank == 0


@_MIRRORED
@pytest.mark.parametrize("n_group, topk_group", [("null", "4"), ("8", "null"), ("8", "0")])
def test_one_group_or_every_group_where_a_key_is_null_or_0(tmp_path, n_group, topk_group):
    data = _config(DSV3)
    data["n_group"], data["topk_group"] = "@n@", "@t@"
    p = write_config(tmp_path, data)
    p.write_text(p.read_text().replace('"@n@"', n_group).replace('"@t@"', topk_group))
    assert architecture_from_config(p).n_experts == 256


def test_json_nested_too_deeply_is_refused_naming_the_file(tmp_path):
    p = tmp_path / "config.json"
    p.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(DataError) as err:
        architecture_from_config(p)
    msg = str(err.value)
    assert str(p) in msg and "nested too deeply" in msg and "\n" not in msg


@_MIRRORED
def test_the_bounds_leave_every_published_config_ten_times_inside():
    files = sorted(MIRROR.glob("*_config.json"))
    assert files
    for f in files:
        data = json.loads(f.read_text(encoding="utf-8"))
        for block in (data, data.get("text_config") or {}):
            for key, value in block.items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    assert value * 10 <= MAX_SIZE.get(key, MAX_INTEGER), (f.name, key, value)
