"""The minimal PyTorch decoder the harness times: random weights, a preallocated KV cache, SDPA attention.

This module imports torch at import time; import it only through `slimlib.kit.harness`, which checks first.
It is a minimal PyTorch engine, not vLLM: static batch, no paging, no scheduler, greedy next token.

One layer: norm -> Q/K/V projections -> write K/V into the cache -> ``scaled_dot_product_attention`` over the
cache prefix (causal in prefill, all positions so far in decode; GQA through ``enable_gqa`` where the torch version
has it, else K/V heads repeated) -> output projection -> residual -> norm -> FFN -> residual. FFN ``"mlp"`` is two
matrices with ReLU (OPT), ``"gated"`` three with SiLU (Llama/Mistral/Granite). LayerNorm for ``"mlp"``
architectures, RMSNorm for ``"gated"`` ones. Left out on purpose (small elementwise work): positional embeddings
(learned or rotary). The LM head is tied to the token embedding.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _sdpa_supports_gqa() -> bool:
    q = torch.zeros(1, 2, 1, 4)
    kv = torch.zeros(1, 1, 1, 4)
    try:
        F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
    except TypeError:
        return False
    return True


SDPA_GQA = _sdpa_supports_gqa()


class _Nvtx:
    """NVTX push/pop that does nothing unless switched on (ranges select kernels for Nsight Compute)."""

    def __init__(self) -> None:
        self.on = False

    def push(self, name: str) -> None:
        if self.on:
            torch.cuda.nvtx.range_push(name)

    def pop(self) -> None:
        if self.on:
            torch.cuda.nvtx.range_pop()


class DecoderLayer(nn.Module):
    def __init__(self, arch, nvtx: _Nvtx, device, dtype) -> None:
        super().__init__()
        d, h, hkv, hd, ff = arch.hidden_size, arch.n_heads, arch.n_kv_heads, arch.head_dim, arch.ffn_size
        self.h, self.hkv, self.hd = h, hkv, hd
        self.gated = arch.ffn_kind == "gated"
        bias = not self.gated  # OPT-style layers carry biases, Llama-style ones do not
        kw = {"device": device, "dtype": dtype}
        norm = (lambda: nn.RMSNorm(d, **kw)) if self.gated else (lambda: nn.LayerNorm(d, **kw))
        self.norm1, self.norm2 = norm(), norm()
        self.q = nn.Linear(d, h * hd, bias=bias, **kw)
        self.k = nn.Linear(d, hkv * hd, bias=bias, **kw)
        self.v = nn.Linear(d, hkv * hd, bias=bias, **kw)
        self.o = nn.Linear(h * hd, d, bias=bias, **kw)
        if self.gated:
            self.gate = nn.Linear(d, ff, bias=False, **kw)
            self.up = nn.Linear(d, ff, bias=False, **kw)
            self.down = nn.Linear(ff, d, bias=False, **kw)
        else:
            self.fc1 = nn.Linear(d, ff, bias=True, **kw)
            self.fc2 = nn.Linear(ff, d, bias=True, **kw)
        self.nvtx = nvtx

    def forward(self, x, k_cache, v_cache, start: int):
        b, t, _ = x.shape
        y = self.norm1(x)
        q = self.q(y).view(b, t, self.h, self.hd).transpose(1, 2)
        k = self.k(y).view(b, t, self.hkv, self.hd).transpose(1, 2)
        v = self.v(y).view(b, t, self.hkv, self.hd).transpose(1, 2)
        k_cache[:, :, start : start + t] = k
        v_cache[:, :, start : start + t] = v
        keys, values = k_cache[:, :, : start + t], v_cache[:, :, : start + t]
        self.nvtx.push("slim_attn")
        if self.hkv == self.h:
            a = F.scaled_dot_product_attention(q, keys, values, is_causal=t > 1)
        elif SDPA_GQA:
            a = F.scaled_dot_product_attention(q, keys, values, is_causal=t > 1, enable_gqa=True)
        else:
            rep = self.h // self.hkv
            a = F.scaled_dot_product_attention(
                q, keys.repeat_interleave(rep, dim=1), values.repeat_interleave(rep, dim=1), is_causal=t > 1
            )
        self.nvtx.pop()
        x = x + self.o(a.transpose(1, 2).reshape(b, t, self.h * self.hd))
        y = self.norm2(x)
        self.nvtx.push("slim_ffn")
        if self.gated:
            y = self.down(F.silu(self.gate(y)) * self.up(y))
        else:
            y = self.fc2(F.relu(self.fc1(y)))
        self.nvtx.pop()
        return x + y


class Decoder(nn.Module):
    """Token embedding, `arch.n_layers` decoder layers, final norm, tied LM head; random weights."""

    def __init__(self, arch, device, dtype) -> None:
        super().__init__()
        self.nvtx = _Nvtx()
        kw = {"device": device, "dtype": dtype}
        self.embed = nn.Embedding(arch.vocab_size, arch.hidden_size, **kw)
        self.layers = nn.ModuleList(
            DecoderLayer(arch, self.nvtx, device, dtype) for _ in range(arch.n_layers)
        )
        gated = arch.ffn_kind == "gated"
        self.norm = nn.RMSNorm(arch.hidden_size, **kw) if gated else nn.LayerNorm(arch.hidden_size, **kw)
        with torch.no_grad():  # small weights keep fp16 activations finite through many layers
            for p in self.parameters():
                if p.dim() == 2:
                    p.normal_(0.0, 1.0 / math.sqrt(p.shape[1]))

    def forward(self, tokens, k_caches, v_caches, start: int):
        x = self.embed(tokens)
        for layer, kc, vc in zip(self.layers, k_caches, v_caches, strict=True):
            x = layer(x, kc, vc, start)
        x = self.norm(x[:, -1:])
        return F.linear(x, self.embed.weight)  # logits of the last position, (B, 1, vocab)


class Engine:
    """A model plus its KV cache for B sequences of up to IL+OL tokens, and the next-token buffer.

    `prefill()` runs the B x IL prompt; `step(t)` runs decode step t (position IL+t) reading and writing the
    static token buffer `tokens`, so each step can be captured in a CUDA graph.
    """

    def __init__(self, arch, batch_size: int, input_len: int, output_len: int, device, dtype, seed: int = 0):
        self.arch, self.b, self.il, self.ol = arch, batch_size, input_len, output_len
        self.device = torch.device(device)
        self.dtype = dtype
        gen = torch.Generator(device="cpu").manual_seed(seed)
        torch.manual_seed(seed)
        with torch.no_grad():
            self.model = Decoder(arch, self.device, dtype).eval()
        s = input_len + output_len
        shape = (batch_size, arch.n_kv_heads, s, arch.head_dim)
        self.k_caches = [torch.zeros(shape, device=self.device, dtype=dtype) for _ in range(arch.n_layers)]
        self.v_caches = [torch.zeros(shape, device=self.device, dtype=dtype) for _ in range(arch.n_layers)]
        prompt = torch.randint(0, arch.vocab_size, (batch_size, input_len), generator=gen)
        self.prompt = prompt.to(self.device)
        self.tokens = torch.zeros((batch_size, 1), dtype=torch.long, device=self.device)

    @property
    def kv_cache_nbytes(self) -> int:
        return sum(t.nbytes for t in self.k_caches) + sum(t.nbytes for t in self.v_caches)

    @property
    def weight_nbytes(self) -> int:
        return sum(p.nbytes for p in self.model.parameters())

    @torch.no_grad()
    def prefill(self) -> None:
        logits = self.model(self.prompt, self.k_caches, self.v_caches, 0)
        self.tokens.copy_(logits.argmax(dim=-1))

    @torch.no_grad()
    def step(self, t: int) -> None:
        self.model.nvtx.push("slim_step")
        logits = self.model(self.tokens, self.k_caches, self.v_caches, self.il + t)
        self.tokens.copy_(logits.argmax(dim=-1))
        self.model.nvtx.pop()
