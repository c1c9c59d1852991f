"""Eqs. 3-12 against hand calculations for a small MHA model (OPT-125M shape) and a GQA model (Llama-3-8B shape)."""

import numpy as np
import pytest

from slimlib.model import equations as eq


def test_d_kv_mha_and_gqa():
    assert eq.d_kv(768, 12, 12) == 768  # MHA: D_kv = D
    assert eq.d_kv(4096, 32, 8) == 1024  # GQA 4:1
    assert eq.d_kv(4544, 71, 1) == pytest.approx(64)  # MQA (Falcon-7B)


def test_active_context():
    # Eq. 3 for 4 requests of IL 100 after 7 generated tokens
    assert eq.active_context(4, 100, 7) == 428


def test_prefill_flops_opt125m_by_hand():
    # L=12, D=768, MHA, D_ff=3072 (r_ff=4), B=2, IL=10:
    # per token 4*768^2 + 4*768*768 + 4*3072*768 = 14,155,776; x B*IL=20 -> 283,115,520
    # attention 4*B*IL^2*D = 614,400; total x L=12 -> 3,404,759,040
    assert eq.prefill_flops(2, 10, 12, 768, 768, 3072, 2) == 3_404_759_040


def test_prefill_flops_gqa_gated_by_hand():
    # Llama-3-8B shape: L=32, D=4096, D_kv=1024, D_ff=14336, gated (3 matrices), B=1, IL=1
    # per token 4*4096^2 + 4*4096*1024 + 6*4096*14336 = 436,207,616; attention 4*4096 = 16,384
    assert eq.prefill_flops(1, 1, 32, 4096, 1024, 14336, 3) == 32 * (436_207_616 + 16_384)


def test_two_matrix_ffn_equals_paper_r_ff_form():
    dim, dff = 2048, 8192
    r_ff = dff / dim
    paper = 12 * (5 * 7 * (4 * dim**2 + 4 * dim * dim + 4 * r_ff * dim**2) + 4 * 5 * 7**2 * dim)
    assert eq.prefill_flops(5, 7, 12, dim, dim, dff, 2) == pytest.approx(paper, rel=1e-15)


def test_prefill_time():
    assert eq.prefill_time(1e12, 1e15, 0.5) == pytest.approx(2e-3)


def test_kv_scan_tokens_matches_sum():
    # Eq. 12: C = sum_{j=1..OL} (IL + j)
    for il, ol in [(10, 4), (0, 1), (242, 130), (1024, 2048)]:
        assert eq.kv_scan_tokens(il, ol) == sum(il + j for j in range(1, ol + 1))
    assert eq.kv_scan_tokens(10, 4) == 50


def test_decode_kv_bytes_gqa():
    # Eq. 11: 2 * L * D_kv * b_kv * C = 2 * 32 * 1024 * 2 * 50
    assert eq.decode_kv_bytes(32, 1024, 2, 50) == 6_553_600


def test_dense_decode_time():
    # Eq. 10: alpha*OL + gamma*L*(D/1024)^2*OL = 4e-4 + 2e-5*12*0.5625*4
    assert eq.dense_decode_time(4, 12, 768, 1e-4, 2e-5) == pytest.approx(9.4e-4)


def test_decode_time():
    # Eq. 9: (B + B0) / eta_m * (T_d + M/BW) = 10 / 0.5 * (9.4e-4 + 6,553,600 / 2e12)
    assert eq.decode_time(8, 9.4e-4, 6_553_600, 2e12, 0.5, 2) == pytest.approx(0.018865536)


def test_e2e_and_throughput():
    assert eq.e2e_latency(0.1, 0.35, 0.05) == pytest.approx(0.5)
    assert eq.throughput(8, 10, 4, 0.5) == pytest.approx(224.0)  # Eq. 6


def test_vectorized_broadcasting():
    b = np.array([1, 2, 4, 8])
    out = eq.prefill_flops(b, 128, 24, 2048, 2048, 8192)
    assert out.shape == (4,)
    np.testing.assert_allclose(out / out[0], b)  # linear in B at fixed IL
    c = eq.kv_scan_tokens(np.array([[100], [200]]), np.array([10, 20, 30]))
    assert c.shape == (2, 3)


@pytest.mark.parametrize(
    "il,ol,w", [(500, 100, 256), (100, 300, 256), (10, 50, 4096), (300, 1, 128), (0, 7, 3)]
)
def test_window_scan_tokens_is_the_capped_sum(il, ol, w):
    """Sliding-window layers: step t reads min(IL + 1 + t, W) positions (Eq. 12 with the context capped)."""
    assert eq.window_scan_tokens(il, ol, w) == pytest.approx(sum(min(il + 1 + t, w) for t in range(ol)))


def test_decode_time_is_the_factor_times_the_per_request_time():
    """Eq. 9 = ``(B + B0) / eta_m`` (the decode factor, beyond which terms add per request) x ``[T_d + M / BW]``."""
    factor = eq.decode_batch_factor(10.0, 0.5, 2.0)
    assert factor == pytest.approx(24.0)
    assert eq.decode_time(10.0, 1e-3, 4e9, 2e12, 0.5, 2.0) == pytest.approx(factor * (1e-3 + 4e9 / 2e12))


def test_layer_prefill_flops_is_eq8_from_linear_flops():
    per_token = eq.dense_flops_per_token(4096, 1024, 14336, 3)
    assert eq.layer_prefill_flops(4, 500, 32, 4096, per_token) == eq.prefill_flops(
        4, 500, 32, 4096, 1024, 14336, 3
    )
