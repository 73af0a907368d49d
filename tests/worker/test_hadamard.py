"""Fast Walsh-Hadamard transform: matches the butterfly and the dense matrix, orthonormal."""
import pytest
import torch

from hina.worker.codecs.hadamard import fwht, fwht_butterfly, fwht_into, hadamard_matrix, irht, random_signs, rht

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


# ----------------------------------------------------------------------- opt-in native kernel
def _native_or_skip():
    from hina.worker.codecs.hadamard import native_kernel
    if native_kernel() is None:
        pytest.skip("native kernel unavailable (no C++ compiler)")


@pytest.mark.parametrize("block", [1, 2, 8, 16, 32, 1024, 1 << 13])
def test_native_fwht_matches_fwht_with_factors_and_offset(block):
    from hina.worker.codecs.hadamard import native_fwht_into
    _native_or_skip()
    gen = torch.Generator().manual_seed(block)
    x = torch.randn(3 * block, generator=gen)
    pre, post = random_signs(1, x.numel()), random_signs(2, x.numel())
    add = torch.randn(x.numel(), generator=gen)
    out = torch.empty_like(x)
    sumsq = native_fwht_into(x, block, out, scale=0.5, pre=pre, post=post, offset0=0.25, add=add, sumsq=True)
    expected = fwht(x * pre, block) * 0.5
    expected.view(-1, block)[:, 0] -= 0.25
    expected = expected * post + add
    torch.testing.assert_close(out, expected, atol=ATOL, rtol=0)
    assert sumsq == pytest.approx(expected.double().square().sum().item(), rel=1e-5)
    assert native_fwht_into(out, block, out) == 0.0  # in place, plain: involution
    torch.testing.assert_close(out, fwht(expected, block), atol=ATOL, rtol=0)
    ints = torch.randint(-1000, 1000, (x.numel(),), generator=gen, dtype=torch.int32)
    assert native_fwht_into(ints, block, out, scale=0.5) is not None  # int32 read as is
    torch.testing.assert_close(out, fwht(ints.float(), block) * 0.5, atol=1e3 * ATOL, rtol=0)


def test_native_fwht_refuses_what_it_cannot_take():
    from hina.worker.codecs.hadamard import native_fwht_into
    x = torch.randn(64)
    assert native_fwht_into(x.double(), 32, torch.empty(64, dtype=torch.float64)) is None
    assert native_fwht_into(torch.randn(128)[::2], 32, torch.empty(64)) is None
    assert native_fwht_into(x, 32, torch.empty(32)) is None
    assert native_fwht_into(x.long(), 32, torch.empty(64)) is None


def test_native_kernels_load_only_from_a_cache_of_this_user_alone(monkeypatch, tmp_path, caplog):
    """The native kernels' cache defaults to ``<tmp>/hina-<uid>``, in the shared temporary
    directory: a directory or library there that another user owns, or that group or others may
    write, is refused (one warning, the eager path), never built into or loaded from."""
    import os
    import shutil

    import hina.worker.codecs.hadamard as hadamard
    cache = tmp_path / "cache"
    monkeypatch.setenv("HINA_CACHE_DIR", str(cache))

    def load():
        monkeypatch.setattr(hadamard, "_NATIVE_LIBS", {})
        caplog.clear()
        with caplog.at_level("WARNING", logger="hina.worker.codecs.hadamard"):
            return hadamard.native_kernel()

    cache.mkdir()
    cache.chmod(0o777)  # anyone may plant a library here
    assert load() is None and "no group or other may write" in caplog.text
    assert not list(cache.iterdir())  # nothing was built into it either
    if shutil.which(os.environ.get("CXX", "g++")) is None:
        pytest.skip("no C++ compiler: the library checks need a build")
    cache.chmod(0o700)
    assert load() is not None and not caplog.records
    (lib,) = cache.glob("hina_fwht_*.so")
    lib.chmod(0o666)  # a library someone else could have rewritten
    assert load() is None and str(lib) in caplog.text
    lib.chmod(0o755)
    assert load() is not None
    if os.getuid() == 0:  # root can hand the directory to another user
        os.chown(cache, 12345, 12345)
        assert load() is None and "owned by uid 12345" in caplog.text


@pytest.mark.parametrize("block", [256, 512, 1024, 2048, 4096])
def test_unnormalised_transform_of_integers_is_exact(block):
    """``fwht_into(..., normalized=False)`` on integers whose transform stays below 2**24: the
    exact integer transform (what THC's decode relies on for every implementation to agree),
    up to the bound, where float32's integers end."""
    bound = (1 << 24) // block - 1
    gen = torch.Generator().manual_seed(block)
    ints = torch.randint(-bound, bound + 1, (3 * block,), generator=gen)
    ints[:block] = bound  # one block all at the bound: its first value is block * bound
    src = ints.float()
    out, scratch = torch.empty_like(src), torch.empty_like(src)
    fwht_into(src, block, out, scratch, normalized=False)
    exact = (ints.view(-1, block) @ hadamard_matrix(block, torch.float64, normalized=False).long().T).reshape(-1)
    assert int(exact.abs().max()) == block * bound < 1 << 24
    assert torch.equal(out.long(), exact)
