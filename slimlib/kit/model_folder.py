"""A servable model folder without weights: ``config.json``, a tokenizer trained here, and a note saying so.

vLLM serves such a folder with ``--load-format dummy`` (random weights): the engine does all the work of the real
model of that shape, so its timings are measurements of the engine on that shape, not of any trained model.

The config comes from a registry architecture (`slimlib.registry.architectures`: OPT style for a two-matrix FFN,
Qwen3 style with per-head q/k norms for a ``qwen3`` model, Llama style for other gated ones) or a Hugging Face
``config.json``, optionally scaled: ``divide=K`` divides the depth, the width, the head counts, the FFN width and the vocabulary by K
(head width kept), explicit values override single fields. The tokenizer is a byte-level BPE trained with the
`tokenizers` package on a corpus of pseudo-words drawn from a seeded generator: the same arguments give the same
files, byte for byte.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slimlib.errors import DataError
from slimlib.io import check_owned, write_text
from slimlib.registry.architectures import Architecture, architecture_from_config, get_architecture
from slimlib.registry.config_reader import shapes_from_config

__all__ = ["Scaling", "model_config", "write_model_folder", "NOTE_FILE"]

NOTE_FILE = "NO_WEIGHTS.md"
SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<unk>")
#: config keys of each field, by config style (first match is written)
_KEYS = {
    "layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "hidden": ("hidden_size", "n_embd", "d_model"),
    "heads": ("num_attention_heads", "n_head"),
    "kv_heads": ("num_key_value_heads", "num_kv_heads"),
    "ffn": ("ffn_dim", "intermediate_size", "n_inner"),
    "vocab": ("vocab_size",),
}


@dataclass(frozen=True)
class Scaling:
    """How to shrink a model: `divide` K (depth, width, heads, FFN, vocabulary / K; head width kept), then any
    explicit field (None: keep)."""

    divide: int = 1
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    ffn: int | None = None
    vocab: int | None = None


def _arch_config(arch: Architecture) -> dict[str, Any]:
    """A Hugging Face config of `arch` (OPT style for a two-matrix FFN, Llama style for a gated one)."""
    dtype = {2: "bfloat16", 4: "float32"}.get(arch.weight_bytes, "bfloat16")
    if arch.is_moe:
        raise DataError(
            f"{arch.name}: mixture-of-experts models are not supported by the model-folder generator"
        )
    if arch.ffn_kind == "mlp":
        if arch.n_kv_heads != arch.n_heads:
            raise DataError(
                f"{arch.name}: a two-matrix FFN model with grouped KV heads has no OPT-style config"
            )
        return {
            "architectures": ["OPTForCausalLM"],
            "model_type": "opt",
            "hidden_size": arch.hidden_size,
            "num_hidden_layers": arch.n_layers,
            "num_attention_heads": arch.n_heads,
            "ffn_dim": arch.ffn_size,
            "vocab_size": arch.vocab_size,
            "max_position_embeddings": arch.max_position or 2048,
            "word_embed_proj_dim": arch.hidden_size,
            "do_layer_norm_before": True,
            "activation_function": "relu",
            "enable_bias": True,
            "torch_dtype": dtype,
        }
    tied = (
        arch.embedding_params == arch.vocab_size * arch.hidden_size
    )  # one embedding matrix: the head is tied
    qwen3 = arch.family == "qwen3"  # Qwen3's config.json: per-head q/k RMSNorm is implied by the model type
    shape = {
        "hidden_size": arch.hidden_size,
        "num_hidden_layers": arch.n_layers,
        "num_attention_heads": arch.n_heads,
        "num_key_value_heads": arch.n_kv_heads,
        "head_dim": arch.head_dim,
        "intermediate_size": arch.ffn_size,
        "vocab_size": arch.vocab_size,
        "max_position_embeddings": arch.max_position or 4096,
        "hidden_act": "silu",
    }
    if qwen3:
        return {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", **shape, "rms_norm_eps": 1e-6,
                "rope_theta": 1000000.0, "attention_bias": False, "use_sliding_window": False,
                "tie_word_embeddings": tied, "torch_dtype": dtype}  # fmt: skip
    return {"architectures": ["LlamaForCausalLM"], "model_type": "llama", **shape, "rms_norm_eps": 1e-5,
            "tie_word_embeddings": False, "torch_dtype": dtype}  # fmt: skip


def _key(config: dict[str, Any], field: str) -> str | None:
    return next((k for k in _KEYS[field] if k in config), None)


def model_config(source: str | os.PathLike[str] | Architecture, scaling: Scaling = Scaling(),
                 name: str | None = None) -> dict[str, Any]:  # fmt: skip
    """The scaled config dict of `source` (registry name, Architecture, or config.json path / folder).

    Scaled fields must stay whole: DataError names the field when K does not divide it. The result is checked by
    parsing it back with `architecture_from_config` rules (the same parser as the registry)."""
    if isinstance(source, Architecture):
        config, label = _arch_config(source), source.name
    else:
        p = Path(source)
        cfg = p / "config.json" if p.is_dir() else p
        if cfg.is_file():
            architecture_from_config(cfg)  # validates the file with the registry's parser
            config, label = json.loads(cfg.read_text(encoding="utf-8")), cfg.parent.name or cfg.stem
        else:
            arch = get_architecture(str(source))
            config, label = _arch_config(arch), arch.name
    config = dict(config)
    k = int(scaling.divide)
    if k < 1 or k != scaling.divide:
        raise DataError(f"divide must be a whole number >= 1, got {scaling.divide!r}")
    for field in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab"):
        key = _key(config, field)
        if key is None or config[key] is None:
            continue
        value = int(config[key])
        if k > 1:
            if field == "vocab":
                value = max(len(SPECIAL_TOKENS) + 256, value // k)  # byte alphabet + special tokens at least
            elif value % k:
                raise DataError(f"{label}: {key} = {value} is not divisible by {k}; pick another divisor")
            else:
                value //= k
        explicit = getattr(scaling, field)
        config[key] = int(explicit) if explicit is not None else value
    if "word_embed_proj_dim" in config and _key(config, "hidden"):
        config["word_embed_proj_dim"] = config[str(_key(config, "hidden"))]
    hidden, heads = config.get(str(_key(config, "hidden"))), config.get(str(_key(config, "heads")))
    if "head_dim" in config and scaling.divide > 1 and hidden and heads:
        config["head_dim"] = int(hidden) // int(heads)
    if hidden and heads and int(hidden) % int(heads):
        raise DataError(f"{label}: hidden size {hidden} is not a multiple of the {heads} heads")
    config["_name_or_path"] = name or (label if k == 1 else f"{label}-s{k}")
    config.update({"bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2})
    # the registry's parser refuses a model that cannot exist
    shapes_from_config(config, f"{label} as scaled")
    return config


def _corpus(seed: int, n_words: int = 60000) -> list[str]:
    """Pseudo-words of 1-4 syllables from a fixed syllable set, drawn by a seeded generator (deterministic)."""
    rng = np.random.default_rng(seed)
    cons = list("bcdfghjklmnprstvwz")
    vows = list("aeiou")
    syll = [c + v for c in cons for v in vows] + [c + v + c2 for c in cons[:9] for v in vows for c2 in "nrst"]
    lens = rng.integers(1, 5, size=n_words)
    picks = rng.integers(0, len(syll), size=int(lens.sum()))
    words, pos = [], 0
    for n in lens:
        words.append("".join(syll[i] for i in picks[pos : pos + n]))
        pos += n
    return [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]


def train_tokenizer_json(vocab_size: int, seed: int = 0) -> str:
    """A byte-level BPE tokenizer (``tokenizer.json`` text) of at most `vocab_size` tokens, trained on `_corpus`."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        raise DataError(
            "a model folder's tokenizer is trained with `tokenizers` (pip install 'slimlib[engine]', or run in the "
            "engine's environment, scripts/engine_env.sh)"
        ) from None

    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=int(vocab_size), special_tokens=list(SPECIAL_TOKENS), show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), min_frequency=2,
    )  # fmt: skip
    tok.train_from_iterator(_corpus(seed), trainer=trainer)
    return tok.to_str(pretty=False)


def write_model_folder(out: str | os.PathLike[str], config: dict[str, Any], *, seed: int = 0) -> list[Path]:
    """Write `config` (from `model_config`) as a servable folder: config.json, tokenizer files, NO_WEIGHTS.md.

    Returns the paths written. Refuses a folder that holds weight files (``*.safetensors``, ``*.bin``) or any other
    file of its own (one this function wrote holds its `NOTE_FILE`)."""
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    weights = sorted(p.name for p in root.iterdir() if p.suffix in (".safetensors", ".bin", ".pt"))
    if weights:
        raise DataError(
            f"{root}: holds weight files ({', '.join(weights)}); write the model folder elsewhere"
        )
    check_owned(root, "--out", "slim bench model", legacy=lambda p: (p / NOTE_FILE).is_file())
    vocab_key = _key(config, "vocab")
    if vocab_key is None:
        raise DataError("the config has no vocab_size; cannot size the tokenizer")
    tok_json = train_tokenizer_json(int(config[vocab_key]), seed)
    tok_config = {
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>",
        "unk_token": "<unk>", "model_max_length": int(config.get("max_position_embeddings", 2048)),
        "add_bos_token": False, "clean_up_tokenization_spaces": False,
    }  # fmt: skip
    specials = {"bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>"}
    note = (
        f"# {config['_name_or_path']}: a model folder without weights\n\n"
        "Written by `slim bench model` (slimlib.kit.model_folder). There are no weight files: serve it with\n"
        "`vllm serve FOLDER --load-format dummy`, which fills the weights with random values. Timings measured on it\n"
        "are measurements of the serving engine on this model shape, not of a trained model; its outputs are\n"
        f"meaningless text. The tokenizer is a byte-level BPE trained locally (seed {seed}) on generated pseudo-words.\n"
    )
    dump = lambda d: json.dumps(d, indent=2, sort_keys=True) + "\n"  # noqa: E731
    return [
        write_text(root / "config.json", dump(config)),
        write_text(root / "tokenizer.json", tok_json + "\n"),
        write_text(root / "tokenizer_config.json", dump(tok_config)),
        write_text(root / "special_tokens_map.json", dump(specials)),
        write_text(root / "generation_config.json", dump({"bos_token_id": 0, "eos_token_id": 1})),
        write_text(root / NOTE_FILE, note),
    ]
