"""THC's fused Triton kernels against the eager path.

On a GPU machine they run on CUDA; elsewhere on CPU tensors under Triton's interpreter
(tests/conftest.py turns it on), which executes the same kernel code with numpy.
"""
import logging
import math
import re

import pytest
import torch

from hina.worker.codecs.base import float_from_max_code, reference_aggregate, reference_agree
from hina.worker.codecs.hadamard import fwht, random_signs
from hina.worker.codecs.packing import unpack_nibbles
from hina.worker.codecs.thc import ThcCodec, _rounding_luts
from hina.worker.codecs.thc_table import DEFAULT_TABLE

K = pytest.importorskip("hina.worker.codecs.thc_triton")
if not K.AVAILABLE:
    pytest.skip("Triton is not installed", allow_module_level=True)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if DEVICE.type == "cpu" and not K.INTERPRET:
    pytest.skip("no GPU and Triton's interpreter is off (TRITON_INTERPRET=1)", allow_module_level=True)

EPS32 = torch.finfo(torch.float32).eps
Z_BOUND = 6.0


def _signs(padded, seed=0):
    """(+-1 float64 signs, their packed bits for the kernels)."""
    signs = random_signs(seed, padded, torch.int8, DEVICE)
    return signs.double(), K.pack_sign_bits(signs)


def test_sign_bits_pack_little_endian():
    signs = torch.tensor([1, -1, 1, 1, 1, 1, 1, -1] + [-1] * 8, dtype=torch.int8)
    assert K.pack_sign_bits(signs).tolist() == [0b10000010, 0xFF]
    with pytest.raises(ValueError, match="multiple of 8"):
        K.pack_sign_bits(signs[:7])


@pytest.mark.parametrize("block", [256, 512, 1024, 2048])
@pytest.mark.parametrize("residual", [False, True])
def test_rotate_is_the_blockwise_randomized_transform(block, residual):
    """y = fwht(D pad(x)) + e blockwise, and the per-block partial sums add up to ||y||^2."""
    gen = torch.Generator().manual_seed(block)
    padded = 3 * block
    numel = padded - 17  # a padded tail
    x = torch.randn(numel, generator=gen).to(DEVICE)
    signs, bits = _signs(padded, block)
    e = torch.randn(padded, generator=gen).to(DEVICE) if residual else None
    y = torch.empty(padded, device=DEVICE)
    parts = K.rotate(x, bits, e, y, block, torch.empty(8, device=DEVICE))
    ref = fwht(torch.cat([x, x.new_zeros(17)]).double() * signs, block)
    if residual:
        ref += e.double()
    # a 2-factor orthonormal transform in float32: error ~ eps * |x| * sqrt(block) at worst
    torch.testing.assert_close(y.double(), ref, rtol=0, atol=16 * EPS32 * math.sqrt(block) * ref.abs().max().item())
    assert parts.numel() == 3
    torch.testing.assert_close(parts.double().sum(), (ref ** 2).sum(), rtol=1e-5, atol=0)


@pytest.mark.parametrize("group", [2, 4])
def test_several_blocks_per_program_give_the_same_bits(group):
    """A program that transforms ``group`` blocks (the last group cut short: 5 blocks) writes the
    same values and per-block norms as one block per program, forward and inverse."""
    block, nblocks = 256, 5
    padded = nblocks * block
    gen = torch.Generator().manual_seed(group)
    x = torch.randn(padded - 9, generator=gen).to(DEVICE)
    e = torch.randn(padded, generator=gen).to(DEVICE)
    sums = torch.randint(0, 480, (padded,), generator=gen).to(torch.int32).to(DEVICE)
    _, bits = _signs(padded, 5)
    prec = K.launch_config(DEVICE, block)[0]
    outs = []
    for g in (1, group):
        y = torch.full((padded,), float("nan"), device=DEVICE)
        parts = torch.full((nblocks + 3,), float("nan"), device=DEVICE)
        K.rotate(x, bits, e, y, block, parts, config=(prec, 4, g))
        out = torch.full((padded - 9,), float("nan"), device=DEVICE)
        K.inverse(sums, bits, out, block, 0.125, 7.5, config=(prec, 4, g))
        outs.append((y, parts, out))
    (y1, p1, o1), (yg, pg, og) = outs
    assert not y1.isnan().any() and not o1.isnan().any()
    assert torch.equal(y1, yg) and torch.equal(p1[:nblocks], pg[:nblocks]) and torch.equal(o1, og)
    assert pg[nblocks:].isnan().all(), "a program wrote past the last block's norm"


@pytest.mark.parametrize("dtype", [torch.int16, torch.int32, torch.int64])
def test_inverse_is_decodes_affine_map(dtype):
    """out = D (fwht(sums) * scale - off0 e_0) blockwise, first numel values, from any int lanes."""
    block, padded, numel = 1024, 4096, 3001
    sums = torch.randint(0, 16 * 30, (padded,), generator=torch.Generator().manual_seed(1)).to(dtype).to(DEVICE)
    signs, bits = _signs(padded, 3)
    out = torch.full((numel,), float("nan"), device=DEVICE)
    K.inverse(sums, bits, out, block, 0.125, 7.5)
    z = fwht(sums.double(), block) * 0.125
    z.view(-1, block)[:, 0] -= 7.5
    ref = (z * signs)[:numel]
    torch.testing.assert_close(out.double(), ref, rtol=0, atol=64 * EPS32 * ref.abs().max().item())


def _eager_indices(y, codec, state, a):
    """The eager quantiser's indices and the int16 draws it used (same generator state)."""
    gen = codec._generator(state, y.device)
    saved = gen.get_state()
    words = torch.empty(-(-y.numel() // 4), dtype=torch.int64, device=y.device)
    words.random_(-(1 << 63), None, generator=gen)
    gen.set_state(saved)
    u = (y * a + 15.0).clamp_(0.0, 30.0)
    with codec._lock:
        v = codec._rounded_levels(u, state).clone()
    return v.to(torch.int64), words.view(torch.int16)[: y.numel()].contiguous()


@pytest.mark.parametrize("n", [2, 2048, 1 << 14])
def test_quantise_matches_the_eager_rounding(n):
    """Same values, same draws: the eager indices (but for float-contraction ties at rounding
    boundaries, one level apart at most), packed two per byte, and y -= deq[index]."""
    c = ThcCodec(1, seed=2, triton=False)
    state = c._state(0)
    y = torch.randn(n, generator=torch.Generator().manual_seed(n)) * 6  # clamps some (|u - 15| > 15)
    want, rand = _eager_indices(y, c, state, 2.0)
    luts = _rounding_luts(DEFAULT_TABLE)
    deq = (luts["levels"] - 15.0) * 0.25
    yk = y.clone().to(DEVICE)
    packed = torch.empty(n // 2, dtype=torch.uint8, device=DEVICE)
    K.quantise(yk, packed, luts["offset"].to(DEVICE), luts["slope"].to(DEVICE), deq.to(DEVICE), 0, 2.0, 15.0,
               30.0, 15.0, rand=rand.to(DEVICE))
    got = unpack_nibbles(packed.cpu(), n).to(torch.int64)
    differ = got != want
    assert differ.sum().item() <= max(1, n // 10000) and (got - want).abs().max().item() <= 1
    torch.testing.assert_close(yk.cpu(), y - deq[got], rtol=0, atol=0)


def test_philox_rounding_is_unbiased_and_per_seed():
    """In-kernel noise: P(upper level) = p for a value between two levels, independently per
    coordinate; other seeds, other draws."""
    luts = _rounding_luts(DEFAULT_TABLE)
    n, u = 1 << 16, 10.3  # between levels 9 (index 4) and 11 (index 5): p = 0.65
    a = 1.0
    y = torch.full((n,), u - 15.0, device=DEVICE)
    out = []
    for seed in (1, 2):
        packed = torch.empty(n // 2, dtype=torch.uint8, device=DEVICE)
        K.quantise(y.clone(), packed, luts["offset"].to(DEVICE), luts["slope"].to(DEVICE), None, seed, a, 15.0,
                   30.0, 15.0)
        idx = unpack_nibbles(packed.cpu(), n)
        assert set(idx.unique().tolist()) == {4, 5}
        p_hat = (idx == 5).double().mean().item()
        assert abs(p_hat - 0.65) <= Z_BOUND * math.sqrt(0.65 * 0.35 / n)
        # the 8 coordinates that share one Philox call draw independently: P(both up) = p^2
        up = (idx == 5).double().view(-1, 8)
        both = 0.65 ** 2
        for k in range(1, 8):
            se = math.sqrt(both * (1 - both) / up.shape[0])
            assert abs((up[:, 0] * up[:, k]).mean().item() - both) <= Z_BOUND * se
        out.append(idx)
    assert not torch.equal(out[0], out[1])


def test_launchers_refuse_bad_buffers():
    y = torch.zeros(1024, device=DEVICE)
    signs, bits = _signs(1024)
    with pytest.raises(ValueError, match="signs"):
        K.rotate(y, signs.to(torch.int8), None, torch.empty_like(y), 1024, torch.empty(1, device=DEVICE))
    with pytest.raises(ValueError, match="partial"):
        K.rotate(y, bits, None, torch.empty_like(y), 1024, torch.empty(0, device=DEVICE))
    luts = _rounding_luts(DEFAULT_TABLE)
    with pytest.raises(ValueError, match="whole pairs"):
        K.quantise(torch.zeros(3, device=DEVICE), torch.empty(2, dtype=torch.uint8, device=DEVICE),
                   luts["offset"].to(DEVICE), luts["slope"].to(DEVICE), None, 0, 1.0, 15.0, 30.0, 15.0)
    with pytest.raises(ValueError, match="sums"):
        K.inverse(torch.zeros(1000, dtype=torch.int32, device=DEVICE), _signs(1000)[1], torch.empty(10, device=DEVICE),
                  1024, 1.0, 0.0)
    assert not K.supported(y, 128) and not K.supported(y, 4096) and K.supported(y, 1024)


@pytest.mark.parametrize("n", [2, 4])
def test_codec_on_kernels_tracks_the_eager_codec(n):
    """Workers on the kernels and on the eager path: the same agreement (norms within float
    rounding), the same rotation, and decodes of the same quality over error-feedback steps."""
    d = 5000
    grads = [torch.randn(d, generator=torch.Generator().manual_seed(i)).to(DEVICE) for i in range(n)]
    true = torch.stack(grads).mean(0)
    errs = {}
    for triton in (True, False):
        codecs = [ThcCodec(n, rank=r, seed=11, triton=triton) for r in range(n)]
        total = torch.zeros(d, device=DEVICE)
        norms = []
        for _ in range(4):
            codes = [c.agreement(g) for c, g in zip(codecs, grads)]
            norms.append(float_from_max_code(torch.cat(codes).cpu()).double())
            agreed = reference_agree(codes)
            lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
            total += codecs[0].decode(reference_aggregate(lanes), agreed, meta=lanes[0].meta)
        assert set(codecs[0].last_kernels.values()) == {"triton" if triton else "eager"}
        errs[triton] = ((total / 4 - true).norm() / true.norm()).item()
        if triton:
            first = norms[0]
        else:  # same rotation: step 1's local norms agree to float rounding
            torch.testing.assert_close(first, norms[0], rtol=1e-5, atol=0)
    # error feedback averages the noise down; both paths land at the same level
    assert errs[True] < 0.1 and errs[False] < 0.1 and 0.5 < errs[True] / errs[False] < 2.0


@pytest.fixture
def fresh_self_check(monkeypatch):
    """The kernels' once-per-process self-check runs again (and its verdict is dropped after)."""
    import hina.worker.codecs.thc as thc
    monkeypatch.setattr(thc, "_KERNELS_VERIFIED", {})


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_gradients_are_read_as_they_are(dtype):
    """A float16/bfloat16 gradient goes to the kernel unconverted: the same norm, indices and
    decode as its float32 copy, and the decode comes back in the gradient's dtype."""
    x = torch.randn(3000, generator=torch.Generator().manual_seed(5)).to(dtype).to(DEVICE)
    runs = []
    for grad in (x, x.float()):
        c = ThcCodec(1, seed=3, triton=True)
        agreed = reference_agree([c.agreement(grad)])
        lanes = c.encode(grad, agreed)
        out = c.decode(reference_aggregate([lanes]), agreed, meta=lanes.meta)
        assert c.last_kernels["agreement"] == "triton"
        runs.append((agreed, lanes.streams[0].data, out))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])
    assert runs[0][2].dtype == dtype and torch.equal(runs[0][2], runs[1][2].to(dtype))


@pytest.mark.parametrize("verified", [False, True], ids=["at-self-check", "at-launch"])
def test_kernel_failure_falls_back_once(monkeypatch, caplog, fresh_self_check, verified):
    """A kernel that cannot build or launch (caught by the self-check, or later at a launch):
    one warning, then the eager path, results intact."""
    def broken(*args, **kwargs):
        raise RuntimeError("simulated PTX assembly failure")

    if verified:  # the self-check passed before the kernel broke
        assert ThcCodec(1, triton=True)._kernels(torch.zeros(1, device=DEVICE), 1024) is not None
    monkeypatch.setattr(K, "rotate", broken)
    c = ThcCodec(1, triton=True)
    x = torch.randn(4096, device=DEVICE)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            agreed = reference_agree([c.agreement(x)])
            lanes = c.encode(x, agreed)
            out = c.decode(reference_aggregate([lanes]), agreed, meta=lanes.meta)
    assert sum("Triton kernels failed" in r.getMessage() for r in caplog.records) == 1
    assert c.triton == "off" and set(c.last_kernels.values()) == {"eager"}
    assert ((out - x).norm() / x.norm()).item() < 0.3


@pytest.mark.parametrize("kernel", ["rotate", "quantise", "inverse", "rotate_quantise"])
def test_self_check_catches_a_kernel_that_computes_wrongly(monkeypatch, caplog, fresh_self_check, kernel):
    """A kernel that runs but is off by a little (a miscompile, say): the first use's self-check
    against the eager math turns the codec eager, with a warning naming the kernel."""
    real = getattr(K, kernel)

    def skewed(*args, **kwargs):
        result = real(*args, **kwargs)
        target = {"rotate": args[3], "quantise": args[1], "inverse": args[2], "rotate_quantise": args[2]}[kernel]
        if target is None:  # the norm-only rotation writes no y
            return result
        target.view(-1)[-1] += 1  # one wrong value (a packed byte: one index)
        return result

    monkeypatch.setattr(K, kernel, skewed)
    c = ThcCodec(1, triton=True)
    with caplog.at_level(logging.WARNING):
        agreed = reference_agree([c.agreement(torch.randn(3000, device=DEVICE))])
    assert c.triton == "off" and c.last_kernels["agreement"] == "eager"
    assert any(f"{kernel} differs" in r.getMessage() for r in caplog.records), caplog.text
    assert agreed.numel() == 1


def test_env_switch_turns_the_kernels_off(monkeypatch):
    monkeypatch.setenv("HINA_THC_TRITON", "0")
    assert ThcCodec(1).triton == "off"
    monkeypatch.delenv("HINA_THC_TRITON")
    assert ThcCodec(1).triton == "auto" and ThcCodec(1, triton=True).triton == "on"
    # auto: CUDA tensors only
    c = ThcCodec(1)
    x = torch.randn(2048)
    agreed = reference_agree([c.agreement(x)])
    assert c.last_kernels["agreement"] == "eager"
    c.encode(x, agreed)


def test_kernels_compile_for_gpu_targets():
    """Triton and its ptxas build every kernel the codec launches for sm_75, sm_80 and sm_90 (no
    GPU needed), with the codec's launch configuration: the real compiler, not only the
    interpreter, accepts the kernels. Spills stay within 32 bytes: the launch table was timed
    on an H100 (bench/bench_thc_kernels.py; docs/codecs.md), where one warp per 32x32 tile was
    fastest by 1.4x for the inverse, for which Triton 3.9's ptxas spills 16 bytes on sm_90.
    One exception, also timed: the 2048-value inverse at 2 warps on sm_90 spills 192 bytes
    with Triton 3.6 (none with 3.9) and still ran 11 % faster than 4 warps on the H100
    (0.414 against 0.460 ms at 64M values), so it may spill up to 256 bytes."""
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parents[2] / "bench" / "triton_aot.py"
    done = subprocess.run([sys.executable, str(tool), "--archs", "75,80,90", "--blocks", "1024,2048", "--check",
                           "--max-spill", "256"],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [l for l in done.stdout.splitlines() if l.startswith("sm_")]
    for line in lines:
        stack = int(re.search(r"stack\s+(\d+)", line).group(1))
        allowed = 256 if re.match(r"sm_90\s+inverse\s+block 2048 ", line) else 32
        assert stack <= allowed, f"spills {stack} bytes (at most {allowed}): {line}"
    # per block 4 rotate variants (fp32 without and with the residual, bf16, fp16), the inverse
    # and 2 fused encodes (fp32, bf16); sm_75: 1024 only, sm_80/90: 1024 and 2048; 2 quantisers
    # per arch
    assert len(lines) == (7 + 2) + 2 * (14 + 2) and not any("FAILED" in l for l in lines)
