"""Bottom-up decode-step and prefill times composed from measured vLLM kernel latencies (NVIDIA AIConfigurator
data, tables ``aic-*``).

A decode step of a model on a GPU is, per layer, the sum of the measured QKV projection, decode attention at the
current context, output projection and FFN GEMMs (gate and up fused for a gated FFN, then down), times the number of
layers, plus the LM-head GEMM. A prefill is the same at ``m = B IL`` tokens with the prefill-attention kernel (the
LM head on the last token of each request only). This is a reference, not a replacement for SLIM: it leaves out
scheduling, sampling, norms/activations/RoPE (not in the data) and launch overheads.

A mixture of experts (without shared experts, dense layers or latent attention: Mixtral, Qwen3-MoE) replaces the FFN
GEMMs with the measured fused-MoE kernel of its expert shape at m tokens (``experts``; table ``aic-moe``: vLLM's
kernel of each system, router distribution `MOE_DISTRIBUTION`, each expert's FFN split over the ``tp`` GPUs; a
degree or shape the tables do not keep is refused). Left out: its router GEMM (``E`` columns, below the GEMM grid's
32: a few microseconds per layer).

Tensor parallelism ``tp`` (one node): every kernel is timed at one GPU's share as vLLM splits the model
(`slimlib.data.aiconfigurator.rank_heads`, `model_gemm_shapes`: heads, QKV/FFN columns, O/down rows, the
vocabulary-parallel LM head), and each layer adds two measured all-reduces of the pass's activations (``m D`` bf16
elements, after the attention and after the FFN), with the CUDA-graph backend for a pass of at most
`CUDA_GRAPH_MAX_TOKENS` tokens (every decode step here) and the eager backend above it. Left out: the gather of the
vocabulary-parallel logits (not in the data; at B = 256 and a 128k vocabulary about 1% of a decode step).

Interpolation (nothing is extrapolated; a request outside a measured grid raises `OutOfGridError`):

- GEMM: multilinear in (log m, log n, log k) of log latency (exact for a power law between grid points);
- decode attention: log latency linear in log context at each measured batch size; linear in the batch size
  between measured batch sizes (so sums over decode steps are exact sums of interpolated steps);
- prefill attention: multilinear in (log B, log IL) of log latency;
- all-reduce: log latency linear in log message size.

Composition rules beyond a grid's largest size (stated, not extrapolation): a GEMM with more rows than the largest
measured m is timed as row blocks of that m, one with more columns than the largest n as column blocks (the LM head
of a 128k vocabulary); a prefill of more requests than measured for its input length runs as back-to-back groups of
the largest measured batch (vLLM also splits large prefills by its token budget); an all-reduce larger than the largest
measured message runs as messages of that size.

Decode steps: the prefill writes the prompt's KV and yields the first token; step j = 1..OL-1 runs with
``IL + j - 1`` tokens already cached (AIConfigurator's 'step') and yields token j + 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import pandas as pd

from slimlib.data import load
from slimlib.data.aiconfigurator import (
    SYSTEMS,
    TP_DEGREES,
    ffn_split_width,
    model_gemm_shapes,
    rank_heads,
    splittable,
    system_for_gpu,
)
from slimlib.data.aiconfigurator_moe import COMPOSED_DISTRIBUTION
from slimlib.errors import DataError
from slimlib.registry.architectures import get_architecture
from slimlib.registry.gpus import get_gpu
from slimlib.registry.precision import compute_peak

__all__ = [
    "OutOfGridError",
    "KernelSet",
    "kernel_set",
    "system_names",
    "gemm_flops",
    "gemm_bytes",
    "compose_kernels",
    "LABEL",
]

#: caption every figure on these data carries
LABEL = "measured vLLM kernel timings, NVIDIA AIConfigurator data"
GEMM_KINDS = ("qkv", "o", "ffn_up", "ffn_down")  # per-layer GEMMs; the LM head is "lm_head"
#: all-reduces per layer under tensor parallelism (after the attention's O projection and the FFN's down projection)
ALLREDUCES_PER_LAYER = 2
#: router distribution of the fused-MoE kernel timings composed (`slimlib.data.aiconfigurator_moe`, which keeps
#: them at every single-node degree)
MOE_DISTRIBUTION = COMPOSED_DISTRIBUTION
#: largest pass (tokens) vLLM runs inside a CUDA graph by default (``max_cudagraph_capture_size``, vLLM >= 0.11);
#: larger passes run eagerly, with the eager all-reduce
CUDA_GRAPH_MAX_TOKENS = 512


class OutOfGridError(DataError):
    """A request outside the measured kernel grid (nothing is extrapolated)."""


def system_names() -> list[str]:
    """AIConfigurator systems the kernel tables cover."""
    return sorted(SYSTEMS)


def _system(name: str) -> str:
    """The kernel-table system of GPU `name`, resolved through the GPU registry (`system_for_gpu`)."""
    return system_for_gpu(name)


# ------------------------------------------------------------------------------------------ analytic counts
def gemm_flops(m, n, k):
    """``2 m n k``."""
    return 2.0 * np.asarray(m, float) * n * k


def gemm_bytes(m, n, k, w_bytes=2, act_bytes=2):
    """DRAM bytes of a GEMM reading activations and weights and writing its output once:
    ``(m k + m n) act_bytes + k n w_bytes``."""
    m = np.asarray(m, float)
    return (m * k + m * n) * act_bytes + float(k) * n * w_bytes


# ------------------------------------------------------------------------------------------ interpolation
def _interp_loglog(x, xs, ys):
    """Piecewise-linear interpolation of log y over log x at the points x (inside [xs[0], xs[-1]])."""
    return np.exp(np.interp(np.log(x), np.log(xs), np.log(ys)))


@dataclass
class KernelSet:
    """Measured grids of one model shape on one GPU, and the composition on them (see the module docstring)."""

    model: str
    system: str
    n_layers: int
    shapes: dict[str, tuple[int, int]]  # GEMM kind -> (n, k)
    heads: tuple  # (n_heads, n_kv_heads, head_dim)
    kv_dtype: str
    gemm_dtype: str
    peak_flops: float
    mem_bw: float
    dec_b: np.ndarray  # measured decode batch sizes
    dec_c: np.ndarray  # measured contexts
    dec_t: np.ndarray  # [batch, context] ms, NaN where not measured
    pre_b: np.ndarray
    pre_il: np.ndarray
    pre_t: np.ndarray  # [batch, input_len] ms, NaN where not measured
    gemm_m: np.ndarray  # measured m
    gemm_t: dict  # kind -> ms at each measured m (n and k interpolated; NaN where a corner is missing)
    tp: int = 1
    hidden: int = 0  # the model's hidden size D (all-reduce message per token)
    ar_elements: np.ndarray = field(default_factory=lambda: np.zeros(0))  # measured message sizes
    ar_ms: dict = field(default_factory=dict)  # backend (vllm_graph, vllm_eager) -> ms at each message size
    moe_tokens: np.ndarray = field(
        default_factory=lambda: np.zeros(0)
    )  # measured fused-MoE tokens (MoE only)
    moe_ms: np.ndarray = field(default_factory=lambda: np.zeros(0))  # fused-MoE latency at each of them
    _cum: dict = field(default_factory=dict, repr=False)

    @property
    def layer_kinds(self) -> tuple[str, ...]:
        """The kernels of one layer besides the attention and the all-reduces: `GEMM_KINDS`, or for a mixture
        of experts the projections and the fused-MoE kernel (``experts``)."""
        return ("qkv", "o", "experts") if len(self.moe_tokens) else GEMM_KINDS

    # ---------------------------------------------------------------- GEMMs
    def gemm_ms(self, kind: str, m) -> np.ndarray:
        """Latency (ms) of one `kind` GEMM (qkv, o, ffn_up, ffn_down, lm_head) at m rows; row blocks of the
        largest measured m beyond it."""
        shape = np.shape(m)
        m = np.atleast_1d(np.asarray(m, dtype=float)).ravel()
        u, inv = np.unique(m, return_inverse=True)  # batches repeat: time each distinct m once
        return self._gemm_ms(kind, u)[inv].reshape(shape)

    def _gemm_ms(self, kind: str, m: np.ndarray) -> np.ndarray:
        if np.any(~(m >= 1)):
            raise OutOfGridError(f"{self._where()}: GEMM {kind} needs m >= 1 rows, got {m[~(m >= 1)][:3]}")
        ms, ts = self.gemm_m, self.gemm_t[kind]
        top = ms[-1]
        full, rest = np.floor(m / top), np.mod(m, top)
        out = full * ts[-1]
        has = rest >= 1
        if np.any(has):
            r = rest[has]
            i = np.clip(np.searchsorted(ms, r, side="right") - 1, 0, len(ms) - 2)
            bad = ~(np.isfinite(ts[i]) & np.isfinite(ts[i + 1]))
            if np.any(bad):
                raise OutOfGridError(f"{self._where()}: GEMM {kind} (n, k) = {self.shapes[kind]} is not measured "
                                     f"around m = {r[bad][0]:g}; nothing is extrapolated")  # fmt: skip
            out = out.copy()
            out[has] += _interp_loglog(r, ms, np.where(np.isfinite(ts), ts, 1.0))
        return out

    def gemm_step_ms(self, m) -> dict:
        """Per-kind latency (ms) of one layer's `layer_kinds` at m rows."""
        return {k: self.experts_ms(m) if k == "experts" else self.gemm_ms(k, m) for k in self.layer_kinds}

    def experts_ms(self, m) -> np.ndarray:
        """Latency (ms) of one layer's fused-MoE kernel at m tokens: log latency linear in log m between the
        measured token counts; blocks of the largest beyond it (as a GEMM's rows)."""
        x = np.atleast_1d(np.asarray(m, dtype=float))
        if len(self.moe_tokens) == 0:
            raise OutOfGridError(f"{self._where()}: a dense model has no fused-MoE kernel")
        if np.any(~(x >= self.moe_tokens[0])):
            raise OutOfGridError(f"{self._where()}: fused MoE at {x[~(x >= self.moe_tokens[0])][0]:g} tokens is "
                                 f"below the measured {self.moe_tokens[0]:g}; nothing is extrapolated")  # fmt: skip
        top = self.moe_tokens[-1]
        full, rest = np.floor(x / top), np.mod(x, top)
        part = np.where(rest > 0, _interp_loglog(np.maximum(rest, self.moe_tokens[0]), self.moe_tokens, self.moe_ms),
                        0.0)  # fmt: skip
        return np.asarray(full * self.moe_ms[-1] + part, dtype=float).reshape(np.shape(m))

    # ---------------------------------------------------------------- decode attention
    def _row(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Measured contexts and latencies at batch row i, up to the first context not measured."""
        t = self.dec_t[i]
        ok = np.isfinite(t)
        stop = int(np.argmin(ok)) if not ok.all() else len(t)
        return self.dec_c[:stop], t[:stop]

    def _bracket_b(self, b: np.ndarray, what: str):
        bs = self.dec_b
        if np.any((b < bs[0]) | (b > bs[-1])):
            bad = b[(b < bs[0]) | (b > bs[-1])][0]
            raise OutOfGridError(f"{self._where()}: {what} at batch size {bad:g} is outside the measured "
                                 f"{bs[0]:g}-{bs[-1]:g}; nothing is extrapolated")  # fmt: skip
        i = np.clip(np.searchsorted(bs, b, side="right") - 1, 0, len(bs) - 2)
        w = (b - bs[i]) / (bs[i + 1] - bs[i])  # weight of the upper row
        return i, w

    def _check_context(self, i: np.ndarray, w: np.ndarray, c_hi: np.ndarray, b: np.ndarray, c_lo=None):
        cmax = np.array([self._row(r)[0][-1] if len(self._row(r)[0]) else 0 for r in range(len(self.dec_b))])
        for rows, need in ((i, w < 1), (i + 1, w > 0)):
            over = need & (c_hi > cmax[rows])
            if c_lo is not None:
                over |= need & (c_lo < self.dec_c[0])
            if np.any(over):
                j = int(np.argmax(over))
                raise OutOfGridError(
                    f"{self._where()}: decode attention at batch size {b[j]:g}, context {c_hi[j]:g} is beyond the "
                    f"measured grid (longest context measured at B = {self.dec_b[rows[j]]:g}: {cmax[rows[j]]:g}); "
                    "nothing is extrapolated"
                )

    def decode_attention_ms(self, batch_size, context) -> np.ndarray:
        """Latency (ms) of one layer's decode attention at `context` cached tokens per request."""
        b, c = np.broadcast_arrays(np.asarray(batch_size, float), np.asarray(context, float))
        b, c = b.ravel(), c.ravel()
        i, w = self._bracket_b(b, "decode attention")
        self._check_context(i, w, c, b, c_lo=c)
        out = np.zeros_like(b)
        for r in np.unique(np.concatenate([i, i + 1])):
            cs, ts = self._row(r)
            lo, hi = (i == r) & (w < 1), (i + 1 == r) & (w > 0)
            sel = lo | hi
            f = _interp_loglog(c[sel], cs, ts)
            weight = np.where(lo[sel], 1 - w[sel], 0.0) + np.where(hi[sel], w[sel], 0.0)
            out[sel] += weight * f
        return out.reshape(np.shape(np.broadcast_arrays(np.asarray(batch_size), np.asarray(context))[0]))

    def _cumulative(self, r: int) -> np.ndarray:
        """S[c] = sum of the interpolated decode-attention latency over contexts 1..c-1 at batch row r."""
        if r not in self._cum:
            cs, ts = self._row(r)
            x = np.arange(1, int(cs[-1]) + 1, dtype=float)
            self._cum[r] = np.concatenate([[0.0, 0.0], np.cumsum(_interp_loglog(x, cs, ts))])
        return self._cum[r]

    def decode_attention_sum_ms(self, batch_size, first_context, n_steps) -> np.ndarray:
        """Sum (ms) of one layer's decode attention over `n_steps` steps with contexts first_context, +1, ..."""
        b = np.asarray(batch_size, float).ravel()
        c0 = np.asarray(first_context, float).ravel()
        n = np.asarray(n_steps, float).ravel()
        b, c0, n = np.broadcast_arrays(b, c0, n)
        i, w = self._bracket_b(b, "decode attention")
        last = c0 + n - 1
        self._check_context(i, w, np.where(n > 0, last, c0), b, c_lo=c0)
        out = np.zeros(len(b))
        c0i, endi = c0.astype(np.int64), (c0 + n).astype(np.int64)
        for r in np.unique(np.concatenate([i, i + 1])):
            lo, hi = (i == r) & (w < 1) & (n > 0), (i + 1 == r) & (w > 0) & (n > 0)
            sel = lo | hi
            if not np.any(sel):
                continue
            s = self._cumulative(int(r))
            total = s[endi[sel]] - s[c0i[sel]]
            weight = np.where(lo[sel], 1 - w[sel], 0.0) + np.where(hi[sel], w[sel], 0.0)
            out[sel] += weight * total
        return out

    # ---------------------------------------------------------------- prefill attention
    def prefill_attention_ms(self, batch_size, input_len) -> np.ndarray:
        """Latency (ms) of one layer's prefill attention of `batch_size` prompts of `input_len` tokens; batches
        larger than measured at that length run as back-to-back groups of the largest measured batch."""
        b, il = np.broadcast_arrays(np.asarray(batch_size, float), np.asarray(input_len, float))
        shape = b.shape
        b, il = b.ravel(), il.ravel()
        ils = self.pre_il
        if np.any((il < ils[0]) | (il > ils[-1])):
            bad = il[(il < ils[0]) | (il > ils[-1])][0]
            raise OutOfGridError(f"{self._where()}: prefill input length {bad:g} is outside the measured "
                                 f"{ils[0]:g}-{ils[-1]:g}; nothing is extrapolated")  # fmt: skip
        if np.any(b < 1):
            raise OutOfGridError(f"{self._where()}: prefill batch size must be >= 1")
        j = np.clip(np.searchsorted(ils, il, side="right") - 1, 0, len(ils) - 2)
        # largest measured batch with both bracketing input lengths measured
        v = (np.log(il) - np.log(ils[j])) / (np.log(ils[j + 1]) - np.log(ils[j]))
        ok = (np.isfinite(self.pre_t[:, j]) | (v == 1)) & (np.isfinite(self.pre_t[:, j + 1]) | (v == 0))
        gmax = np.where(ok, self.pre_b[:, None], 0.0).max(axis=0)
        if np.any(gmax == 0):
            raise OutOfGridError(
                f"{self._where()}: prefill at input length {il[gmax == 0][0]:g} not measured"
            )
        g = np.minimum(b, gmax)
        groups, rest = np.floor(b / g), np.mod(b, g)
        return ((groups * self._pre_interp(g, il, j)) + np.where(rest >= 1, self._pre_interp(
            np.maximum(rest, 1), il, j), 0.0)).reshape(shape)  # fmt: skip

    def _pre_interp(self, b, il, j):
        bs, ils, t = self.pre_b, self.pre_il, self.pre_t
        i = np.clip(np.searchsorted(bs, b, side="right") - 1, 0, len(bs) - 2)
        u = (np.log(b) - np.log(bs[i])) / (np.log(bs[i + 1]) - np.log(bs[i]))
        v = (np.log(il) - np.log(ils[j])) / (np.log(ils[j + 1]) - np.log(ils[j]))
        lt = np.log(np.where(np.isfinite(t), t, np.nan))
        corners = ((i, j, (1 - u) * (1 - v)), (i + 1, j, u * (1 - v)), (i, j + 1, (1 - u) * v),
                   (i + 1, j + 1, u * v))  # fmt: skip
        acc = np.zeros(len(b))
        for ii, jj, wt in corners:
            val = lt[ii, jj]
            need = wt > 0
            if np.any(need & ~np.isfinite(val)):
                k = int(np.argmax(need & ~np.isfinite(val)))
                raise OutOfGridError(f"{self._where()}: prefill attention at batch {b[k]:g}, input length "
                                     f"{il[k]:g} needs an unmeasured grid point; nothing is extrapolated")  # fmt: skip
            acc += np.where(need, wt * np.nan_to_num(val), 0.0)
        return np.exp(acc)

    # ---------------------------------------------------------------- all-reduce
    def allreduce_ms(self, tokens) -> np.ndarray:
        """Latency (ms) of one all-reduce of `tokens` x D bf16 elements over the `tp` GPUs (0 at TP 1): the
        CUDA-graph backend up to `CUDA_GRAPH_MAX_TOKENS` tokens, eager above; messages above the largest measured
        run as blocks of it."""
        t = np.atleast_1d(np.asarray(tokens, dtype=float))
        if self.tp == 1:
            return np.zeros(t.shape)
        m = t * self.hidden
        xs = self.ar_elements
        if np.any(m < xs[0]):
            raise OutOfGridError(f"{self._where()}: all-reduce of {m[m < xs[0]][0]:g} elements is below the "
                                 f"measured {xs[0]:g}; nothing is extrapolated")  # fmt: skip
        out = np.zeros(t.shape)
        for backend, sel in (
            ("vllm_graph", t <= CUDA_GRAPH_MAX_TOKENS),
            ("vllm_eager", t > CUDA_GRAPH_MAX_TOKENS),
        ):
            if np.any(sel):
                ys = self.ar_ms[backend]
                full, rest = np.floor(m[sel] / xs[-1]), np.mod(m[sel], xs[-1])
                part = np.where(rest > 0, _interp_loglog(np.maximum(rest, xs[0]), xs, ys), 0.0)
                out[sel] = full * ys[-1] + part
        return out

    # ---------------------------------------------------------------- composition
    def decode_step(self, batch_size, context) -> pd.DataFrame:
        """One decode step (ms) by kernel: per-layer kinds times the layers, plus lm_head, and total_ms."""
        b, c = np.broadcast_arrays(np.asarray(batch_size, float), np.asarray(context, float))
        b, c = b.ravel(), c.ravel()
        L = self.n_layers
        parts = {k: L * v for k, v in self.gemm_step_ms(b).items()}
        parts["attention"] = L * self.decode_attention_ms(b, c)
        parts["lm_head"] = self.gemm_ms("lm_head", b)
        parts["allreduce"] = ALLREDUCES_PER_LAYER * L * self.allreduce_ms(b)
        df = pd.DataFrame({"batch_size": b, "context": c, **parts})
        df["total_ms"] = df[list(parts)].sum(axis=1)
        return df

    def prefill(self, batch_size, input_len) -> pd.DataFrame:
        """A prefill (ms) by kernel: GEMMs at m = B IL rows per layer, prefill attention, LM head at m = B."""
        b, il = np.broadcast_arrays(np.asarray(batch_size, float), np.asarray(input_len, float))
        b, il = b.ravel(), il.ravel()
        L = self.n_layers
        parts = {k: L * v for k, v in self.gemm_step_ms(b * il).items()}
        parts["attention"] = L * self.prefill_attention_ms(b, il)
        parts["lm_head"] = self.gemm_ms("lm_head", b)
        parts["allreduce"] = ALLREDUCES_PER_LAYER * L * self.allreduce_ms(b * il)
        df = pd.DataFrame({"batch_size": b, "input_len": il, **parts})
        df["total_ms"] = df[list(parts)].sum(axis=1)
        return df

    def e2e(self, batch_size, input_len, output_len) -> pd.DataFrame:
        """Composed batch E2E (s): prefill, then OL - 1 decode steps (module docstring), and total-token
        throughput B (IL + OL) / E2E (Eq. 6). Columns prefill_s, decode_s, decode_attention_s, decode_gemm_s,
        decode_allreduce_s, e2e_s, throughput_tok_s."""
        b, il, ol = np.broadcast_arrays(*(np.asarray(x, float) for x in (batch_size, input_len, output_len)))
        b, il, ol = b.ravel(), il.ravel(), ol.ravel()
        if np.any(ol < 1) or np.any(il < 1):
            raise OutOfGridError(f"{self._where()}: input and output lengths must be >= 1")
        steps = ol - 1
        pre = self.prefill(b, il)["total_ms"].to_numpy()
        gem = sum(self.gemm_step_ms(b).values()) * self.n_layers + self.gemm_ms("lm_head", b)
        att = self.n_layers * self.decode_attention_sum_ms(b, il, steps)
        dec_g = steps * gem
        dec_ar = steps * ALLREDUCES_PER_LAYER * self.n_layers * self.allreduce_ms(b)
        dec = att + dec_g + dec_ar
        e2e = (pre + dec) / 1e3
        return pd.DataFrame({
            "batch_size": b, "input_len": il, "output_len": ol, "prefill_s": pre / 1e3, "decode_s": dec / 1e3,
            "decode_attention_s": att / 1e3, "decode_gemm_s": dec_g / 1e3, "decode_allreduce_s": dec_ar / 1e3,
            "e2e_s": e2e,
            "throughput_tok_s": b * (il + ol) / e2e,
        })  # fmt: skip

    def _where(self) -> str:
        tp = f", TP {self.tp}" if self.tp > 1 else ""
        return f"{self.model} on {self.system} (KV {self.kv_dtype}, GEMM {self.gemm_dtype}{tp})"


def _grid(df: pd.DataFrame, row: str, col: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    piv = df.pivot_table(index=row, columns=col, values="latency_ms", aggfunc="first").sort_index(axis=0)
    piv = piv.sort_index(axis=1)
    return piv.index.to_numpy(float), piv.columns.to_numpy(float), piv.to_numpy(float)


@dataclass(frozen=True)
class _GemmGrid:
    """One system's measured GEMMs of one dtype: the n, k and m grids and the latency at each m per (n, k)."""

    ngrid: np.ndarray
    kgrid: np.ndarray
    ms: np.ndarray
    by_nk: dict  # (n, k) -> ms at each m of `ms` (NaN where not measured)


@lru_cache(maxsize=16)
def _gemm_grid(system: str, gemm_dtype: str, folder: str | None) -> _GemmGrid:
    gem = _tables(folder)["aic-gemm"]
    g = gem[(gem["system"] == system) & (gem["gemm_dtype"] == gemm_dtype)]
    ms = np.sort(g["m"].unique()).astype(float)
    piv = g.pivot_table(index=["n", "k"], columns="m", values="latency_ms", aggfunc="first").reindex(
        columns=ms
    )
    by_nk = {(int(n), int(k)): row for (n, k), row in zip(piv.index, piv.to_numpy(float), strict=True)}
    return _GemmGrid(
        np.sort(g["n"].unique()).astype(float), np.sort(g["k"].unique()).astype(float), ms, by_nk
    )


def _gemm_table(grid: _GemmGrid, n: int, k: int, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Latency at each measured m of an (n, k) GEMM: log-log bilinear in (n, k); column blocks beyond the
    largest n. NaN where a needed corner is not measured."""
    ngrid, kgrid, ms, by_nk = grid.ngrid, grid.kgrid, grid.ms, grid.by_nk
    if k < kgrid[0] or k > kgrid[-1]:
        raise OutOfGridError(f"{where}: GEMM k = {k} outside the measured {kgrid[0]:g}-{kgrid[-1]:g}")
    blocks = [float(ngrid[-1])] * int(n // ngrid[-1]) + ([float(n % ngrid[-1])] if n % ngrid[-1] else [])
    total = np.zeros(len(ms))
    for nb in blocks:
        if nb < ngrid[0]:
            raise OutOfGridError(f"{where}: GEMM n = {nb:g} below the measured {ngrid[0]:g}")
        acc = np.zeros(len(ms))
        jn = min(np.searchsorted(ngrid, nb, side="right") - 1, len(ngrid) - 2)
        jk = min(np.searchsorted(kgrid, k, side="right") - 1, len(kgrid) - 2)
        u = (np.log(nb) - np.log(ngrid[jn])) / (np.log(ngrid[jn + 1]) - np.log(ngrid[jn]))
        v = (np.log(k) - np.log(kgrid[jk])) / (np.log(kgrid[jk + 1]) - np.log(kgrid[jk]))
        for nn, wn in ((ngrid[jn], 1 - u), (ngrid[jn + 1], u)):
            for kk, wk in ((kgrid[jk], 1 - v), (kgrid[jk + 1], v)):
                if wn * wk == 0:
                    continue
                col = by_nk.get((int(nn), int(kk)))
                vals = np.full(len(ms), np.nan) if col is None else col
                acc += wn * wk * np.log(vals)
        total += np.exp(acc)
    return ms, total


@lru_cache(maxsize=4)
def _tables(folder: str | None) -> dict[str, pd.DataFrame]:
    return {n: load(n, folder) for n in ("aic-systems", "aic-decode-attention", "aic-prefill-attention",
                                         "aic-gemm", "aic-allreduce", "aic-moe")}  # fmt: skip


@lru_cache(maxsize=64)
def _cached(
    model: str, system: str, kv_dtype: str, gemm_dtype: str, folder: str | None, tp: int = 1
) -> KernelSet:
    arch = get_architecture(model)
    where = f"{arch.name} on {system}" + (f" at TP {tp}" if tp > 1 else "")
    per_kind = arch.sliding_kv_heads or arch.sliding_head_dim or (arch.v_head_dim and not arch.is_mla)
    if (
        arch.n_linear_layers
        or arch.n_mixerless_layers
        or arch.n_ffnless_layers
        or arch.ffn_width_sum
        or per_kind
    ):
        raise OutOfGridError(f"{where}: linear-attention, attention-free, FFN-free, per-layer-width or per-kind layers; the "
                             "composition times layers of one attention and one FFN of the same shape only")  # fmt: skip
    if not splittable(arch, tp):
        raise OutOfGridError(f"{where}: vLLM cannot split {arch.n_heads} query / {arch.n_kv_heads} KV heads and "
                             f"FFN width {ffn_split_width(arch)} over {tp} GPUs")  # fmt: skip
    heads = rank_heads(arch, tp) or (0, 0, 0)  # set: splittable
    tabs = _tables(folder)
    moe_x, moe_t = _moe_grid(arch, system, gemm_dtype, tp, tabs["aic-moe"], where)
    systems = tabs["aic-systems"]
    sysrow = systems[systems["system"] == system].iloc[0]
    dec = tabs["aic-decode-attention"]
    dec = dec[(dec["system"] == system) & (dec["n_heads"] == heads[0]) & (dec["n_kv_heads"] == heads[1])
              & (dec["head_dim"] == heads[2]) & (dec["kv_cache_dtype"] == kv_dtype)]  # fmt: skip
    if len(dec) == 0:
        raise OutOfGridError(
            f"{where}: no measured decode attention for {heads[0]} query / {heads[1]} KV heads of size "
            f"{heads[2]} with a {kv_dtype} KV cache (the data cover at most 8 KV heads: no MHA decode)"
        )
    pre = tabs["aic-prefill-attention"]
    pre = pre[(pre["system"] == system) & (pre["n_heads"] == heads[0]) & (pre["n_kv_heads"] == heads[1])
              & (pre["head_dim"] == heads[2]) & (pre["kv_cache_dtype"] == kv_dtype)]  # fmt: skip
    if len(pre) == 0:
        raise OutOfGridError(f"{where}: no measured prefill attention for this head shape and KV dtype")
    gem = tabs["aic-gemm"]
    gem = gem[(gem["system"] == system) & (gem["gemm_dtype"] == gemm_dtype)]
    if len(gem) == 0:
        raise OutOfGridError(f"{where}: no measured {gemm_dtype} GEMMs")
    grid = _gemm_grid(system, gemm_dtype, folder)
    shapes = model_gemm_shapes(arch, tp)
    gt, ms = {}, None
    for kind, (n, k) in shapes.items():
        ms, gt[kind] = _gemm_table(grid, n, k, f"{where} GEMM {kind}")
    db, dc, dt = _grid(dec, "batch_size", "context")
    pb, pil, pt = _grid(pre, "batch_size", "input_len")
    hw = get_gpu(
        str(sysrow["gpu"])
    )  # the registry's peaks and bandwidth (aic-systems records AIConfigurator's)
    peak = compute_peak(hw, "" if gemm_dtype == "bfloat16" else gemm_dtype)
    ar_x, ar_ms = np.zeros(0), {}
    if tp > 1:
        ar = tabs["aic-allreduce"]
        ar = ar[(ar["system"] == system) & (ar["n_gpus"] == tp)]
        for backend in ("vllm_graph", "vllm_eager"):
            g = ar[ar["backend"] == backend].sort_values("message_elements")
            if len(g) < 2:
                raise OutOfGridError(f"{where}: no measured {backend} all-reduce over {tp} GPUs")
            x = g["message_elements"].to_numpy(float)
            if len(ar_x) and not np.array_equal(ar_x, x):
                raise OutOfGridError(
                    f"{where}: the all-reduce backends are measured at different message sizes"
                )
            ar_x, ar_ms[backend] = x, g["latency_ms"].to_numpy(float)
    return KernelSet(
        model=arch.name, system=system, n_layers=arch.n_layers, shapes=shapes, heads=heads, kv_dtype=kv_dtype,
        gemm_dtype=gemm_dtype, peak_flops=peak, mem_bw=float(hw.mem_bw), dec_b=db, dec_c=dc, dec_t=dt,
        pre_b=pb, pre_il=pil, pre_t=pt, gemm_m=ms, gemm_t=gt, tp=tp, hidden=arch.hidden_size, ar_elements=ar_x,
        ar_ms=ar_ms, moe_tokens=moe_x, moe_ms=moe_t,
    )  # fmt: skip


def _moe_grid(arch, system: str, gemm_dtype: str, tp: int, moe: pd.DataFrame, where: str):
    """(tokens, ms) of `arch`'s measured fused-MoE kernel on `system` with each expert split over `tp` GPUs (empty
    for a dense model); OutOfGridError for a mixture of experts the composition does not time (shared experts,
    dense layers, latent attention) or whose kernel is not measured at this degree."""
    if not arch.is_moe:
        return np.zeros(0), np.zeros(0)
    if arch.is_mla or arch.n_shared_experts or arch.n_dense_layers:
        raise OutOfGridError(f"{where}: a mixture of experts with shared experts, dense layers or latent attention; "
                             "the composition times routed experts in every layer of a GQA model only")  # fmt: skip
    g = moe[(moe["system"] == system) & (moe["hidden_size"] == arch.hidden_size)
            & (moe["inter_size"] == arch.moe_ffn_size) & (moe["top_k"] == arch.experts_per_token)
            & (moe["n_experts"] == arch.n_experts) & (moe["moe_dtype"] == gemm_dtype) & (moe["moe_tp"] == tp)
            & (moe["moe_ep"] == 1) & (moe["distribution"] == MOE_DISTRIBUTION)].sort_values("num_tokens")  # fmt: skip
    if len(g) < 2:
        raise OutOfGridError(
            f"{where}: no measured fused-MoE kernel for {arch.n_experts} experts of {arch.hidden_size} x "
            f"{arch.moe_ffn_size}, top {arch.experts_per_token}, {gemm_dtype}, split over {tp} GPUs "
            f"({MOE_DISTRIBUTION} routing)"
        )
    return g["num_tokens"].to_numpy(float), g["latency_ms"].to_numpy(float)


def kernel_set(model: str, gpu: str, kv_dtype: str = "bfloat16", gemm_dtype: str = "bfloat16",
               folder=None, tp: int = 1) -> KernelSet:  # fmt: skip
    """The measured grids of registry `model` on `gpu` (h100, h200, a100, b200 or their registry/system names) at
    tensor parallelism `tp` (1, 2, 4 or 8 GPUs of one node), cached. OutOfGridError when the data do not cover the
    model's per-GPU attention shape (e.g. MHA decode) or vLLM cannot split it over `tp`."""
    if kv_dtype not in ("bfloat16", "fp8") or gemm_dtype not in ("bfloat16", "fp8", "nvfp4"):
        raise DataError(
            f"kv_dtype is 'bfloat16' or 'fp8' and gemm_dtype 'bfloat16', 'fp8' or 'nvfp4', got "
            f"{kv_dtype!r}, {gemm_dtype!r}"
        )
    if isinstance(tp, bool) or tp not in TP_DEGREES:
        raise DataError(f"tp must be one of {TP_DEGREES} (the measured all-reduce groups), got {tp!r}")
    return _cached(
        str(model), _system(gpu), kv_dtype, gemm_dtype, None if folder is None else str(folder), int(tp)
    )


def compose_kernels(configs: pd.DataFrame, **kw) -> pd.DataFrame:
    """Composed E2E of every row of `configs` (columns model, gpu, batch_size, input_len, output_len, and
    optional tensor_parallel, 1 where absent), grouped by (model, gpu, TP) and vectorized; returns `KernelSet.e2e`
    columns in the input order."""
    need = ["model", "gpu", "batch_size", "input_len", "output_len"]
    missing = [c for c in need if c not in configs.columns]
    if missing:
        raise DataError(f"compose: configs lack columns {missing}")
    configs = configs.assign(
        tensor_parallel=configs["tensor_parallel"] if "tensor_parallel" in configs else 1
    )
    parts = []
    for (model, gpu, tp), grp in configs.groupby(["model", "gpu", "tensor_parallel"], sort=False):
        ks = kernel_set(model, gpu, tp=int(tp), **kw)
        out = ks.e2e(grp["batch_size"], grp["input_len"], grp["output_len"])
        out.index = grp.index
        parts.append(out.assign(model=model, gpu=gpu))
    return pd.concat(parts).loc[configs.index]
