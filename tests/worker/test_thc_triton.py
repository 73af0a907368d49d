"""THC's fused Triton kernels against the eager path (and the encode without error feedback:
the norm-only rotation, rotate_quantise, the tf32x2 split, the encode plans).

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
from hina.worker.codecs.thc import ThcCodec
from hina.worker.codecs.thc_rounding import rounding_luts
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


@pytest.mark.parametrize("block", [256, 1024, 2048])
def test_small_sums_take_one_product_fewer_and_give_the_same_bits(block):
    """Sums declared below 2**11 (``sums_bound``, as THC's decode declares g * n) take one TF32
    product fewer in the transform's first factor; on integers that small both ways are exact,
    so the outputs are the same bits, at the bound and at zero (on a GPU, real TF32 products;
    under the interpreter, the code path). A bound at 2**11 keeps the split."""
    padded = 3 * block
    gen = torch.Generator().manual_seed(block)
    sums = torch.randint(-(K.SMALL_SUMS - 1), K.SMALL_SUMS, (padded,), generator=gen, dtype=torch.int32)
    sums[:block] = K.SMALL_SUMS - 1  # one block at the bound: its transform's largest values
    _, bits = _signs(padded, 4)
    config = (K.launch_config(DEVICE, block)[0] if DEVICE.type == "cuda" else "tf32x2", 2, 1)
    outs = []
    for bound in (None, K.SMALL_SUMS - 1, K.SMALL_SUMS):
        out = torch.full((padded - 5,), float("nan"), device=DEVICE)
        K.inverse(sums.to(DEVICE), bits, out, block, 0.5, 3.0, config=config, sums_bound=bound)
        outs.append(out)
    z = fwht(sums.double(), block) * 0.5 / math.sqrt(block)
    assert float(z.abs().max()) > 1e3
    assert not outs[0].isnan().any()
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


def test_sign_bits_at_any_byte_offset():
    """The kernels read the sign bits as 32-bit words; bits handed over at a byte offset that is
    not a multiple of 4 (a slice of a bigger buffer) are copied first, and give the same result."""
    block, padded = 256, 1024
    x = torch.randn(padded, generator=torch.Generator().manual_seed(6)).to(DEVICE)
    _, bits = _signs(padded, 6)
    shifted = torch.zeros(bits.numel() + 1, dtype=torch.uint8, device=DEVICE)
    shifted[1:] = bits
    ys = []
    for b in (bits, shifted[1:]):
        y = torch.empty(padded, device=DEVICE)
        K.rotate(x, b, None, y, block, torch.empty(padded // block, device=DEVICE))
        ys.append(y)
    assert torch.equal(ys[0], ys[1])


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
    luts = rounding_luts(DEFAULT_TABLE)
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
    luts = rounding_luts(DEFAULT_TABLE)
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
    luts = rounding_luts(DEFAULT_TABLE)
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
    GPU needed), with the codec's launch configuration and with the opt-in butterfly transform:
    the real compiler, not only the interpreter, accepts the kernels. Spills stay within 32 bytes: the launch table was timed
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
                           "--max-spill", "256", "--precisions", "codec,butterfly"],
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [l for l in done.stdout.splitlines() if l.startswith("sm_")]
    for line in lines:
        stack = int(re.search(r"stack\s+(\d+)", line).group(1))
        allowed = 256 if re.match(r"sm_90\s+inverse\s+block 2048 ", line) else 32
        assert stack <= allowed, f"spills {stack} bytes (at most {allowed}): {line}"
    # per block 4 rotate variants (fp32 without and with the residual, bf16, fp16), 2 inverses
    # (sums below 2**11, as decode declares THC's, and any) and 2 fused encodes (fp32, bf16);
    # sm_75: 1024 only, sm_80/90: 1024 and 2048; 2 quantisers per arch; and the butterfly
    # (HINA_THC_PRECISION=butterfly) at both blocks on all three
    assert len(lines) == (8 + 2) + 2 * (16 + 2) + 3 * 16 and not any("FAILED" in l for l in lines)
    assert sum(" butterfly " in l for l in lines) == 3 * 16


# ------------------------------------------------------------------------------------------
# Encode without error feedback: the norm-only rotation (agreement) and rotate_quantise
# (encode), which rotates the gradient again straight into the rounding, so the rotated
# values never go through memory; the two-product TF32 split (tf32x2); the encode plans.
# ------------------------------------------------------------------------------------------
G, TOP = 30.0, float(len(DEFAULT_TABLE) - 1)


def _luts():
    return {k: v.to(DEVICE) for k, v in rounding_luts(DEFAULT_TABLE).items()}


@pytest.mark.parametrize("block,dtype", [(256, torch.float32), (512, torch.float32), (1024, torch.float32),
                                         (2048, torch.float32), (1024, torch.bfloat16),
                                         (1024, torch.float16)])
def test_fused_encode_is_rotate_then_quantise_byte_for_byte(block, dtype):
    """The same rotation products and the same draws: the same packed indices as the two
    kernels, for a padded tail and for half-precision gradients read as they are; and the
    norm-only rotation sums the same squares as the one that writes y."""
    gen = torch.Generator().manual_seed(block)
    padded = 3 * block
    x = (torch.randn(padded - 11, generator=gen) * 3).to(dtype).to(DEVICE)
    bits = K.pack_sign_bits(random_signs(block, padded, torch.int8, DEVICE))
    luts = _luts()
    y = torch.empty(padded, device=DEVICE)
    with_y = K.rotate(x, bits, None, y, block, torch.empty(3, device=DEVICE)).clone()
    norm_only = K.rotate(x, bits, None, None, block, torch.empty(3, device=DEVICE), padded=padded)
    assert torch.equal(with_y, norm_only)
    # a = 1.5 on unit-scale values: some clamp at both ends of the table
    args = (luts["offset"], luts["slope"], 987654321, 1.5, G / 2, G, TOP)
    two = torch.empty(padded // 2, dtype=torch.uint8, device=DEVICE)
    K.quantise(y, two, args[0], args[1], None, *args[2:])
    one = torch.empty(padded // 2, dtype=torch.uint8, device=DEVICE)
    K.rotate_quantise(x, bits, one, block, *args)
    assert torch.equal(one, two)
    # and the draws depend on the seed
    K.rotate_quantise(x, bits, one, block, luts["offset"], luts["slope"], 5, *args[3:])
    assert not torch.equal(one, two)


def test_fused_launcher_refuses_bad_buffers():
    bits = K.pack_sign_bits(random_signs(0, 2048, torch.int8, DEVICE))
    luts = _luts()
    x = torch.zeros(2048, device=DEVICE)
    with pytest.raises(ValueError, match="whole blocks"):
        K.rotate_quantise(x, bits, torch.empty(700, dtype=torch.uint8, device=DEVICE), 1024,
                          luts["offset"], luts["slope"], 0, 1.0, G / 2, G, TOP)
    with pytest.raises(ValueError, match="packed"):
        K.rotate_quantise(x, bits, torch.empty(1024, dtype=torch.int32, device=DEVICE), 1024,
                          luts["offset"], luts["slope"], 0, 1.0, G / 2, G, TOP)
    with pytest.raises(ValueError, match="padded"):
        K.rotate(x, bits, None, None, 1024, torch.empty(2, device=DEVICE))


def test_codec_without_error_feedback_encodes_in_the_fused_kernel(monkeypatch):
    """The codec's fused encode gives the bytes the two kernels give for the seed and scale it
    used, and its decode matches the eager codec's quality; with error feedback (the default)
    the fused kernel is never launched, whatever the plan."""
    calls = []
    real = K.rotate_quantise

    def spy(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(K, "rotate_quantise", spy)
    grads = [torch.randn(5000, generator=torch.Generator().manual_seed(i)).to(DEVICE) for i in range(2)]
    codecs = [ThcCodec(2, rank=r, seed=4, error_feedback=False, triton=True) for r in range(2)]
    for c in codecs:
        c.encode_plan = "fused"
    agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
    assert all(c.last_kernels == {"agreement": "triton", "encode": "triton"} for c in codecs)
    calls[:] = [args for args in calls if args[0].numel() == 5000]  # not the self-check's
    assert len(calls) == 2
    # worker 0's bytes again through rotate + quantise, with the seed and factor it passed
    x, bits, packed, block, offset, slope, seed, a = calls[0][:8]
    y = torch.empty(2 * packed.numel(), device=DEVICE)
    K.rotate(x, bits, None, y, block, torch.empty(y.numel() // block, device=DEVICE))
    two = torch.empty_like(packed)
    K.quantise(y, two, offset, slope, None, seed, a, *calls[0][8:])
    assert torch.equal(lanes[0].streams[0].data, two)
    sums = reference_aggregate(lanes)
    outs = [c.decode(sums, agreed, meta=lanes[0].meta) for c in codecs]
    assert torch.equal(outs[0], outs[1])
    true = (grads[0] + grads[1]) / 2
    eager = [ThcCodec(2, rank=r, seed=4, error_feedback=False, triton=False) for r in range(2)]
    e_agreed = reference_agree([c.agreement(g.cpu()) for c, g in zip(eager, grads)])
    e_lanes = [c.encode(g.cpu(), e_agreed) for c, g in zip(eager, grads)]
    e_out = eager[0].decode(reference_aggregate(e_lanes), e_agreed, meta=e_lanes[0].meta)
    err = ((outs[0] - true).norm() / true.norm()).item()
    e_err = ((e_out - true.cpu()).norm() / true.norm()).item()
    assert err < 0.3 and 0.7 < err / e_err < 1.4, (err, e_err)
    calls.clear()
    ef = ThcCodec(1, seed=4, triton=True)
    ef.encode_plan = "fused"
    ef.encode(grads[0], reference_agree([ef.agreement(grads[0])]))
    assert not calls and ef.last_kernels["encode"] == "triton"


def test_fused_agreement_never_takes_the_callers_gradient_as_scratch():
    """Without error feedback the agreement keeps a reference to the caller's gradient, not a
    copy: an agreement again before encode, and an encode that falls back to the eager path,
    must never write into it."""
    g = torch.randn(4096, generator=torch.Generator().manual_seed(1)).to(DEVICE)
    kept = g.clone()
    c = ThcCodec(1, seed=2, error_feedback=False, triton=True)
    c.encode_plan = "fused"
    c.agreement(g)
    agreed = reference_agree([c.agreement(g)])  # the first agreement's pending state is dropped
    c.triton = "off"  # e.g. a kernel failed in between: encode rotates eagerly
    lanes = c.encode(g, agreed)
    assert c.last_kernels["encode"] == "eager"
    for _ in range(2):  # later rounds on the eager path reuse their scratch
        agreed = reference_agree([c.agreement(g)])
        lanes = c.encode(g, agreed)
    out = c.decode(reference_aggregate([lanes]), agreed, meta=lanes.meta)
    assert torch.equal(g, kept)
    assert ((out - g).norm() / g.norm()).item() < 0.3


@pytest.mark.parametrize("block", [256, 2048])
def test_two_product_split_matches_plain_float32(block):
    """"tf32x2" (the data operand split into a TF32 head and tail, two products per factor) on
    the rotation, the inverse and the fused encode: float32 results within float32 rounding of
    the plain ones (on a GPU, of real TF32 products; under the interpreter the split's masking
    and sums), the same indices but for values on a rounding boundary."""
    gen = torch.Generator().manual_seed(3)
    padded = 2 * block
    x = (torch.randn(padded, generator=gen) * 1e3).to(DEVICE)
    bits = K.pack_sign_bits(random_signs(1, padded, torch.int8, DEVICE))
    split, plain = ("tf32x2", 4, 1), ("ieee", 4, 1)
    if DEVICE.type == "cuda":
        split, plain = ("tf32x2", 1, 1), ("tf32x3", 1, 1)
    ys = []
    for config in (split, plain):
        y = torch.empty(padded, device=DEVICE)
        K.rotate(x, bits, None, y, block, torch.empty(2, device=DEVICE), config=config)
        ys.append(y)
    tol = 1e-5 * float(ys[1].abs().max())
    assert float((ys[0] - ys[1]).abs().max()) <= tol
    sums = torch.randint(-400, 400, (padded,), generator=gen, dtype=torch.int32).to(DEVICE)
    outs = []
    for config in (split, plain):
        out = torch.empty(padded, device=DEVICE)
        K.inverse(sums, bits, out, block, 0.01, 2.0, config=config)
        outs.append(out)
    assert float((outs[0] - outs[1]).abs().max()) <= 1e-5 * float(outs[1].abs().max())
    luts = _luts()
    packs = []
    for config in (split, plain):
        packed = torch.empty(padded // 2, dtype=torch.uint8, device=DEVICE)
        K.rotate_quantise(x, bits, packed, block, luts["offset"], luts["slope"], 9, 1e-3, G / 2, G, TOP,
                          config=config)
        packs.append(packed)
    assert float((packs[0] != packs[1]).float().mean()) < 0.01


def test_precision_override(monkeypatch, caplog):
    """HINA_THC_PRECISION names the transforms' precision; one the GPU lacks, or an unknown
    one, is refused with the choices, and a codec then warns once and runs eagerly."""
    monkeypatch.setenv(K.PRECISION_ENV, "tf32x2")
    assert K.precision_for((9, 0)) == "tf32x2"
    with pytest.raises(ValueError, match="sm_80"):
        K.precision_for((7, 5))
    monkeypatch.setenv(K.PRECISION_ENV, "fp8")
    with pytest.raises(ValueError, match="one of"):
        K.precision_for((9, 0))
    monkeypatch.setenv(K.PRECISION_ENV, "butterfly")  # additions only: any GPU
    assert K.precision_for((7, 5)) == K.precision_for((9, 0)) == "butterfly"
    monkeypatch.delenv(K.PRECISION_ENV)
    assert K.precision_for((9, 0)) == K.TENSOR_CORE_PRECISION and K.precision_for((7, 5)) == "ieee"
    if DEVICE.type == "cuda":  # the override is read where the codec picks its launch
        monkeypatch.setenv(K.PRECISION_ENV, "fp8")
        c = ThcCodec(1, triton=True)
        x = torch.randn(4096, device=DEVICE)
        c.encode(x, reference_agree([c.agreement(x)]))
        assert c.triton == "off" and "HINA_THC_PRECISION" in caplog.text


def test_encode_plans(monkeypatch):
    """Each plan without error feedback decodes the same gradient to the same quality; an
    unknown plan is refused."""
    g = torch.randn(6000, generator=torch.Generator().manual_seed(8)).to(DEVICE)
    errs = {}
    for plan in ThcCodec.ENCODE_PLANS:
        c = ThcCodec(1, seed=1, error_feedback=False, triton=True)
        c.encode_plan = plan
        agreed = reference_agree([c.agreement(g)])
        lanes = c.encode(g, agreed)
        out = c.decode(reference_aggregate([lanes]), agreed, meta=lanes.meta)
        assert c.last_kernels["encode"] == "triton"
        assert c.last_kernels["agreement"] == ("torch" if plan == "fused-xnorm" else "triton")
        errs[plan] = ((out - g).norm() / g.norm()).item()
    assert max(errs.values()) < 0.3 and max(errs.values()) / min(errs.values()) < 1.3, errs
    c = ThcCodec(1, error_feedback=False, triton=True)
    c.encode_plan = "fused-twice"
    with pytest.raises(ValueError, match="encode_plan"):
        c.agreement(g)


# ------------------------------------------------------------------------------------------
# The butterfly transform (HINA_THC_PRECISION=butterfly): the same kernels with the Hadamard
# transform as log2(B) stages of float32 additions on a flat 1 x B tile instead of products.
# ------------------------------------------------------------------------------------------
def _butterfly_config(block):
    """The butterfly's launch as the codec makes it on a GPU (its warps), or under the interpreter."""
    return ("butterfly", K.LAUNCH_CONFIG["butterfly"][block], 1)


@pytest.mark.parametrize("block", [256, 512, 1024, 2048])
def test_butterfly_kernels_match_the_eager_math(block):
    """Rotation (with and without the residual, and the norm alone), inverse and fused encode
    on the butterfly: the eager transform to float32 rounding, integer sums transformed exactly,
    the fused encode byte for byte the rotation then the quantiser."""
    config = _butterfly_config(block)
    assert K.kernel_tile("butterfly", block) == (1, block)
    gen = torch.Generator().manual_seed(block + 1)
    padded = 3 * block
    x = (torch.randn(padded - 13, generator=gen) * 3).to(DEVICE)
    signs, bits = _signs(padded, block + 1)
    e = torch.randn(padded, generator=gen).to(DEVICE)
    ref = fwht(torch.cat([x, x.new_zeros(13)]).double() * signs, block)
    atol = 16 * EPS32 * math.sqrt(block) * ref.abs().max().item()
    for res in (None, e):
        y = torch.full((padded,), float("nan"), device=DEVICE)
        parts = K.rotate(x, bits, res, y, block, torch.empty(3, device=DEVICE), config=config).clone()
        want = ref + (e.double() if res is not None else 0)
        torch.testing.assert_close(y.double(), want, rtol=0, atol=atol)
        torch.testing.assert_close(parts.double().sum(), (want ** 2).sum(), rtol=1e-5, atol=0)
    norm_only = K.rotate(x, bits, None, None, block, torch.empty(3, device=DEVICE), config=config, padded=padded)
    y = torch.empty(padded, device=DEVICE)
    assert torch.equal(K.rotate(x, bits, None, y, block, torch.empty(3, device=DEVICE), config=config), norm_only)
    # integer sums: every partial sum of the transform is an integer below 2**24, so exact; the
    # scale is one float32 product (the first value also takes the offset: left out here)
    sums = torch.randint(-(K.SMALL_SUMS - 1), K.SMALL_SUMS, (padded,), generator=gen, dtype=torch.int32)
    out = torch.empty(padded - 5, device=DEVICE)
    K.inverse(sums.to(DEVICE), bits, out, block, 0.5, 3.0, config=config, sums_bound=K.SMALL_SUMS - 1)
    exact = fwht(sums.double(), block)  # fwht is orthonormal: undo its 1 / sqrt(block)
    exact = torch.round(exact * math.sqrt(block)).float()
    scale = torch.tensor(0.5 / math.sqrt(block), dtype=torch.float32)
    want = (exact * scale * signs.float())[: padded - 5]
    keep = torch.ones(padded - 5, dtype=torch.bool)
    keep[::block] = False
    assert torch.equal(out.cpu()[keep], want[keep])
    torch.testing.assert_close(out.cpu()[::block].double(), want[::block].double() - 3.0 * signs[: padded - 5: block].cpu(),
                               rtol=1e-6, atol=1e-6 * float(want.abs().max()))
    luts = _luts()
    args = (luts["offset"], luts["slope"], 4242, 1.5, G / 2, G, TOP)
    two = torch.empty(padded // 2, dtype=torch.uint8, device=DEVICE)
    K.quantise(y, two, args[0], args[1], None, *args[2:])
    one = torch.empty(padded // 2, dtype=torch.uint8, device=DEVICE)
    K.rotate_quantise(x, bits, one, block, *args, config=config)
    assert torch.equal(one, two)


def test_butterfly_precision_runs_the_codec(monkeypatch, fresh_self_check):
    """HINA_THC_PRECISION=butterfly on any GPU (no tensor cores needed): the codec's self-check
    passes on it and workers decode as well as on the eager path, with and without error
    feedback."""
    monkeypatch.setenv(K.PRECISION_ENV, "butterfly")
    assert K.precision_for((7, 5)) == K.precision_for((9, 0)) == "butterfly"
    assert K.launch_config(DEVICE, 1024)[0] == "butterfly"
    g = torch.randn(6000, generator=torch.Generator().manual_seed(9)).to(DEVICE)
    for ef in (True, False):
        errs = {}
        for triton in (True, False):
            c = ThcCodec(1, seed=4, error_feedback=ef, triton=triton)
            agreed = reference_agree([c.agreement(g)])
            lanes = c.encode(g, agreed)
            out = c.decode(reference_aggregate([lanes]), agreed, meta=lanes.meta)
            assert c.last_kernels["encode"] == c.last_kernels["decode"] == ("triton" if triton else "eager")
            errs[triton] = ((out - g).norm() / g.norm()).item()
        assert errs[True] < 0.3 and 0.7 < errs[True] / errs[False] < 1.3, errs


@pytest.mark.parametrize("block", [256, 1024, 2048])
@pytest.mark.parametrize("n", [60, 200])
def test_decode_on_the_kernels_is_the_eager_decode_bit_for_bit(block, n):
    """The Triton decode (on a GPU: real tensor cores, launched without fused multiply-adds)
    gives the same float32 bits as the CPU's eager decode of the same sums, with the sums small
    enough for the one-product transform (60 workers: g n < 2**11) and not (200): workers on
    GPUs and on CPUs keep identical replicas (tests/worker/test_thc.py checks every CPU path)."""
    x = torch.randn(5000, generator=torch.Generator().manual_seed(block + n))
    cpu = ThcCodec(n, seed=3, block=block, error_feedback=False, triton=False, compiled=False)
    gpu = ThcCodec(n, seed=3, block=block, error_feedback=False, triton=True)
    agreed = reference_agree([cpu.agreement(x)])
    meta_cpu = cpu.encode(x, agreed).meta
    xd = x.to(DEVICE)
    gpu.agreement(xd)
    meta_gpu = gpu.encode(xd, agreed.to(DEVICE)).meta
    sums = torch.randint(0, 30 * n + 1, (meta_cpu["padded"],), generator=torch.Generator().manual_seed(n),
                         dtype=torch.int32)
    want = cpu.decode([sums], agreed, meta=meta_cpu)
    got = gpu.decode([sums.to(DEVICE)], agreed.to(DEVICE), meta=meta_gpu)
    assert gpu.last_kernels["decode"] == "triton" and cpu.last_kernels["decode"] == "eager"
    assert torch.equal(got.cpu().view(torch.int32), want.view(torch.int32))


def test_self_check_warns_when_the_decode_is_right_but_not_the_cpus_bits(monkeypatch, caplog, fresh_self_check):
    """An inverse off by one float32 ulp (a compiler that contracts the product and the
    difference into one fused multiply-add, say) is right to rounding, so the kernels stay, but
    a CPU worker would decode other bits: the self-check says so once, naming the cause; an
    exact inverse passes without a word."""
    import hina.worker.codecs.thc as thc
    real = K.inverse

    def one_ulp_off(*args, **kwargs):
        out = real(*args, **kwargs)
        out.view(-1)[0] = torch.nextafter(out.view(-1)[0], torch.tensor(float("inf"), device=out.device))
        return out

    x = torch.randn(3000, device=DEVICE)
    with caplog.at_level(logging.WARNING):
        ThcCodec(1, triton=True).agreement(x)
    assert "decode differs" not in caplog.text
    monkeypatch.setattr(K, "inverse", one_ulp_off)
    monkeypatch.setattr(thc, "_KERNELS_VERIFIED", {})  # the first codec's verdict was kept
    caplog.clear()
    c = ThcCodec(1, triton=True)
    with caplog.at_level(logging.WARNING):
        c.agreement(x)
    assert c.triton != "off" and c.last_kernels["agreement"] == "triton"
    assert "decode differs from the CPU implementations' by float32 rounding (1 of" in caplog.text
