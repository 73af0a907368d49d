"""Fast Walsh-Hadamard transform: matches the butterfly and the dense matrix, orthonormal."""
import pytest
import torch

from worker.codecs.hadamard import fwht, fwht_butterfly, fwht_into, hadamard_matrix, irht, random_signs, rht

# float32 transform of unit-variance data: rounding error ~ eps * sqrt(log2 B) per value
ATOL = 1e-5 * 8


@pytest.mark.parametrize("block", [1, 2, 4, 32, 64, 1024, 1 << 13])
def test_fwht_matches_butterfly_and_is_involution(block):
    x = torch.randn(3 * block, generator=torch.Generator().manual_seed(block))
    y = fwht(x, block)
    torch.testing.assert_close(y, fwht_butterfly(x, block), atol=ATOL, rtol=0)
    torch.testing.assert_close(fwht(y, block), x, atol=ATOL, rtol=0)
    torch.testing.assert_close(y.norm(), x.norm(), rtol=1e-5, atol=0)


def test_fwht_matches_dense_matrix():
    x = torch.randn(2, 16, dtype=torch.float64)
    h = hadamard_matrix(16, torch.float64)
    torch.testing.assert_close(fwht(x, 16).view(2, 16), x @ h.T)
    assert torch.allclose(h @ h, torch.eye(16, dtype=torch.float64))


def test_rht_roundtrip_and_shared_signs():
    x = torch.randn(4096)
    s = random_signs(7, 4096)
    assert torch.equal(s, random_signs(7, 4096)) and not torch.equal(s, random_signs(8, 4096))
    assert set(s.unique().tolist()) == {-1.0, 1.0}
    torch.testing.assert_close(irht(rht(x, s, 1024), s, 1024), x, atol=ATOL, rtol=0)


def test_bad_block_refused():
    with pytest.raises(ValueError, match="block=3"):
        fwht(torch.zeros(6), 3)
    with pytest.raises(ValueError, match="multiple of block"):
        fwht(torch.zeros(6), 4)
    assert fwht(torch.zeros(0), 4).numel() == 0


@pytest.mark.parametrize("block", [1, 2, 64, 1024, 1 << 13])
def test_fwht_into_matches_fwht_with_scale_and_keeps_src(block):
    x = torch.randn(3 * block, generator=torch.Generator().manual_seed(block))
    src = x.clone()
    out, scratch = torch.full_like(x, float("nan")), torch.full_like(x, float("nan"))
    got = fwht_into(src, block, out, scratch, scale=0.75)
    assert got.data_ptr() == out.data_ptr() and torch.equal(src, x)
    torch.testing.assert_close(out, 0.75 * fwht_butterfly(x, block), atol=ATOL, rtol=0)
