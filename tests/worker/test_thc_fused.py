"""THC's encode without error feedback on the Triton kernels: the rotation that only sums squares
(agreement) and :func:`rotate_quantise` (encode), which rotates the gradient again straight into
the rounding, so the rotated values never go through memory.

On a GPU machine they run on CUDA; elsewhere under Triton's interpreter (tests/conftest.py).
"""
import pytest
import torch

from hina.worker.codecs.base import reference_aggregate, reference_agree
from hina.worker.codecs.hadamard import random_signs
from hina.worker.codecs.thc import ThcCodec, _rounding_luts
from hina.worker.codecs.thc_table import DEFAULT_TABLE

K = pytest.importorskip("hina.worker.codecs.thc_triton")
if not K.AVAILABLE:
    pytest.skip("Triton is not installed", allow_module_level=True)
DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
if DEVICE.type == "cpu" and not K.INTERPRET:
    pytest.skip("no GPU and Triton's interpreter is off (TRITON_INTERPRET=1)", allow_module_level=True)

G, TOP = 30.0, float(len(DEFAULT_TABLE) - 1)


def _luts():
    return {k: v.to(DEVICE) for k, v in _rounding_luts(DEFAULT_TABLE).items()}


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
