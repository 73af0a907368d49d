"""THC codec: packing, unbiasedness, NMSE vs theory, decode of sums, error feedback, bad input."""
import contextlib
import math
import os

import pytest
import torch

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hina.worker.codecs.base import (LaneOp, float32_of, float_from_max_code, float_to_max_code, max_code_of,
                                     max_code_value, reference_aggregate, reference_agree)
from hina.worker.codecs.errors import CodecError, NonFiniteGradientError
from hina.worker.codecs.hadamard import fwht, random_signs
from hina.worker.codecs.packing import EVEN_COORD_IN_HIGH_NIBBLE, pack_nibbles, unpack_nibbles
from hina.worker.codecs.thc import ThcCodec, quantise_two_stage
from hina.worker.codecs.thc_table import DEFAULT_T, DEFAULT_TABLE, clamp_error, expected_variance

EPS32 = torch.finfo(torch.float32).eps
#: a two-sided normal quantile: a mean of many draws stays within Z_BOUND standard errors (p ~ 1e-9
#: per coordinate, so also over the ~1e4 coordinates/intervals these tests look at)
Z_BOUND = 6.0


def _compiled_available():
    return ThcCodec(1, compiled=True).compiled


#: eager, the opt-in compiled path where the native kernels build, and the Triton kernels where
#: they run on CPU tensors (Triton installed; tests/conftest.py turns its interpreter on when
#: there is no GPU; tests/worker/test_thc_triton.py runs them on the GPU when there is one)
PATHS = ["eager", "compiled", "triton"]


def _path(path):
    """ThcCodec keyword arguments of one implementation (skips when it cannot run here)."""
    if path == "compiled" and not _compiled_available():
        pytest.skip("compiled THC unavailable (no C++ compiler)")
    if path == "triton":
        from hina.worker.codecs import thc_triton
        if not thc_triton.AVAILABLE:
            pytest.skip("Triton is not installed")
        if not thc_triton.INTERPRET:
            pytest.skip("Triton's interpreter is off (GPU machine): test_thc_triton.py covers the kernels")
    return {"compiled": path == "compiled", "triton": path == "triton"}


def _ran(codec, path):
    """The codec's last agreement, encode and decode ran the implementation under test."""
    want = {"eager": "eager", "compiled": "native", "triton": "triton"}[path]
    assert set(codec.last_kernels.values()) == {want}, codec.last_kernels


def run_round(codecs, grads, key=0):
    agreed = reference_agree([c.agreement(g, key) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed, key) for c, g in zip(codecs, grads)]
    return agreed, lanes, reference_aggregate(lanes)


# ----------------------------------------------------------------------- packing
@pytest.mark.parametrize("count", [0, 1, 2, 7, 1000, 1001])
def test_pack_roundtrip(count):
    idx = torch.randint(0, 16, (count,), dtype=torch.uint8)
    packed = pack_nibbles(idx)
    assert packed.numel() == (count + 1) // 2
    assert torch.equal(unpack_nibbles(packed, count), idx)


def test_nibble_order_is_documented_constant():
    assert EVEN_COORD_IN_HIGH_NIBBLE
    assert pack_nibbles(torch.tensor([0xA, 0x5], dtype=torch.uint8)).tolist() == [0xA5]
    with pytest.raises(ValueError, match="ceil"):
        unpack_nibbles(torch.zeros(2, dtype=torch.uint8), 5)
    with pytest.raises(ValueError, match="uint8"):
        pack_nibbles(torch.zeros(2, dtype=torch.int64))


# ----------------------------------------------------------------------- quantiser
def test_one_draw_rounding_equals_two_stage():
    """Both choose the upper level with probability (u - a) / (b - a): binomial bounds."""
    trials = 20_000
    codec = ThcCodec(1)
    state = codec._state(0)
    levels = torch.tensor(DEFAULT_TABLE, dtype=torch.float64)
    for u0 in [0.3, 13.5, 14.2, 15.7, 29.9]:
        u = torch.full((trials,), u0)
        ours = codec._quantise(u.clone(), state).long()
        ref = quantise_two_stage(u, DEFAULT_TABLE, torch.Generator().manual_seed(1))
        k = int(torch.searchsorted(levels, torch.tensor(u0, dtype=torch.float64), right=True)) - 1
        a, b = levels[k].item(), levels[k + 1].item()
        p = (u0 - a) / (b - a)
        se = math.sqrt(p * (1 - p) / trials)
        for got in (ours, ref):
            assert set(got.unique().tolist()) <= {k, k + 1}
            assert abs((got == k + 1).double().mean().item() - p) <= Z_BOUND * se


# ----------------------------------------------------------------------- statistics
@pytest.mark.parametrize("path", PATHS)
def test_unbiased_over_seeds_without_clamping(path):
    """T = sqrt(D) never clamps (|s y_j| <= sqrt(D)); the mean over seeds converges to x."""
    d, seeds = 1024, 300
    x = torch.randn(d, generator=torch.Generator().manual_seed(0))
    t = math.sqrt(d)
    acc = torch.zeros(d, dtype=torch.float64)
    c = ThcCodec(1, threshold=t, error_feedback=False, **_path(path))
    for key in range(seeds):  # each bucket key has its own rotation seed
        agreed, lanes, agg = run_round([c], [x], key)
        acc += c.decode(agg, agreed, key, meta=lanes[0].meta).double()
    _ran(c, path)
    # per-coordinate variance <= (max gap / 2)**2 table units -> (2T / (g s))**2 with s = sqrt(d)/|x|
    gap = max(b - a for a, b in zip(DEFAULT_TABLE, DEFAULT_TABLE[1:]))
    var_bound = (gap / 2) ** 2 * (2 * t / (30 * math.sqrt(d) / x.norm().item())) ** 2
    err = (acc / seeds - x.double()).abs().max().item()
    assert err <= Z_BOUND * math.sqrt(var_bound / seeds)


@pytest.mark.parametrize("path", PATHS)
def test_unbiased_given_rotation_with_clamping(path):
    """With clamping, E[decode] = R^-1 clamp(R x) (rotation fixed, quantisation noise varies)."""
    d, ranks = 1024, 256
    x = torch.randn(d, generator=torch.Generator().manual_seed(3))
    x[:4] *= 40  # heavy coordinates so that clamping happens
    codecs = [ThcCodec(ranks, rank=r, error_feedback=False, **_path(path)) for r in range(ranks)]
    agreed, lanes, agg = run_round(codecs, [x] * ranks)
    mean = codecs[0].decode(agg, agreed, meta=lanes[0].meta).double()
    _ran(codecs[0], path)
    signs = random_signs(codecs[0].states[0].rotation_seed, d, torch.float64)
    y = fwht(x.double() * signs, d)
    s = math.sqrt(d) / y.norm().item()
    expected = fwht((y * s).clamp(-DEFAULT_T, DEFAULT_T) / s, d) * signs
    assert ((y * s).abs() > DEFAULT_T).any()
    gap = max(b - a for a, b in zip(DEFAULT_TABLE, DEFAULT_TABLE[1:]))
    sd = (gap / 2) * (2 * DEFAULT_T / (30 * s)) / math.sqrt(ranks)
    assert (mean - expected).abs().max().item() <= Z_BOUND * sd


@pytest.mark.parametrize("path", PATHS)
def test_nmse_matches_theory(path):
    """vNMSE = (2T/g)^2 E[var] + E[(|X|-T)+^2] for one worker, no error feedback, D = d."""
    d = 1 << 14
    x = torch.randn(d, generator=torch.Generator().manual_seed(5))
    c = ThcCodec(1, error_feedback=False, **_path(path))
    agreed, lanes, agg = run_round([c], [x])
    err2 = (c.decode(agg, agreed, meta=lanes[0].meta) - x).double() ** 2
    _ran(c, path)
    nmse = err2.sum().item() / x.double().norm().item() ** 2
    theory = (2 * DEFAULT_T / 30) ** 2 * expected_variance(DEFAULT_TABLE) + clamp_error(DEFAULT_T)
    # sampling error: the sum of d roughly independent squared errors, plus the normalisation by
    # the empirical norm (relative sd 1/sqrt(2d)); both at Z_BOUND
    se = err2.std().item() * math.sqrt(d) / x.double().norm().item() ** 2
    assert abs(nmse - theory) <= Z_BOUND * (se + theory / math.sqrt(2 * d))


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
def test_decode_of_sum_is_mean_of_decodes(n):
    d = 3000  # not a multiple of the block: padding on the way
    grads = [torch.randn(d, generator=torch.Generator().manual_seed(i)) * (i + 1) for i in range(n)]
    codecs = [ThcCodec(n, rank=r, seed=9, error_feedback=False) for r in range(n)]
    agreed, lanes, agg = run_round(codecs, grads)
    mean = codecs[0].decode(agg, agreed, meta=lanes[0].meta)
    single = ThcCodec(1, seed=9)
    lut = torch.tensor(DEFAULT_TABLE, dtype=torch.int32)
    singles = [single.decode([lut[unpack_nibbles(l.streams[0].data, l.streams[0].count).long()]],
                             agreed, meta=l.meta) for l in lanes]
    expected = torch.stack(singles).mean(0)
    scale = expected.abs().max().item()
    # float32: a few roundings of values up to `scale` through a 1024-point orthonormal transform
    torch.testing.assert_close(mean, expected, rtol=0, atol=64 * EPS32 * scale * math.log2(1024))
    assert agg[0].max().item() <= n * 30 and lanes[0].streams[0].op is LaneOp.LUTSUM


def _decode_paths():
    """The implementations that can decode here: {path: (ThcCodec keyword arguments,
    HINA_THC_PRECISION while it runs)}."""
    paths = {"eager": ({"compiled": False, "triton": False}, None)}
    if _compiled_available():
        paths["compiled"] = ({"compiled": True, "triton": False}, None)
    from hina.worker.codecs import thc_triton
    if thc_triton.AVAILABLE and thc_triton.INTERPRET:
        paths["triton"] = ({"compiled": False, "triton": True}, None)
        paths["triton-butterfly"] = ({"compiled": False, "triton": True}, "butterfly")
    return paths


@contextlib.contextmanager
def _precision(value):
    """HINA_THC_PRECISION set to ``value`` (None: unset) while the block runs."""
    from hina.worker.codecs.thc_triton import PRECISION_ENV
    old = os.environ.pop(PRECISION_ENV, None)
    if value is not None:
        os.environ[PRECISION_ENV] = value
    try:
        yield
    finally:
        os.environ.pop(PRECISION_ENV, None)
        if old is not None:
            os.environ[PRECISION_ENV] = old


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 272), d=st.integers(1, 6000), block=st.sampled_from([256, 512, 1024, 2048]),
       seed=st.integers(0, 1 << 16), top=st.booleans())
@example(n=272, d=6000, block=2048, seed=0, top=True)  # 2048 * 30 * 272: just below 2**24
def test_every_implementation_decodes_the_same_bits(n, d, block, seed, top):
    """Eager, native and Triton decodes (its products and its butterfly) of the same sums are
    the same float32 bits, not only close: each transforms the integer sums exactly
    (``block * g * n < 2**24``: here up to 272 workers at 2048-value blocks), then takes the
    same two float32 steps, so workers on different implementations (a CPU and a GPU worker,
    one with a compiler and one without) keep DDP's replicas identical. Sums anywhere in
    [0, g n], or all at the top (the transform's largest value)."""
    paths = _decode_paths()
    g = 30
    x = torch.randn(d, generator=torch.Generator().manual_seed(seed))
    codecs = {p: ThcCodec(n, rank=0, seed=seed, block=block, error_feedback=False, **kw)
              for p, (kw, _) in paths.items()}
    agreed = reference_agree([codecs["eager"].agreement(x)])
    metas = {}
    for p, c in codecs.items():
        with _precision(paths[p][1]):
            if p != "eager":
                c.agreement(x)
            metas[p] = c.encode(x, agreed).meta
    padded = metas["eager"]["padded"]
    assert all(m["padded"] == padded and m["block"] == metas["eager"]["block"] for m in metas.values())
    gen = torch.Generator().manual_seed(seed + 1)
    sums = (torch.full((padded,), g * n, dtype=torch.int32) if top
            else torch.randint(0, g * n + 1, (padded,), generator=gen, dtype=torch.int32))
    outs = {}
    for p, c in codecs.items():
        with _precision(paths[p][1]):
            outs[p] = c.decode([sums.clone()], agreed, meta=metas[p]).clone()
        want = {"eager": "eager", "compiled": "native"}.get(p, "triton")
        if not p.startswith("triton") or metas[p]["block"] >= 256:  # smaller blocks stay eager
            assert c.last_kernels["decode"] == want, (p, c.last_kernels)
    bits = {p: o.view(torch.int32) for p, o in outs.items()}
    for p in bits:
        assert torch.equal(bits[p], bits["eager"]), (
            f"{p} decodes {int((bits[p] != bits['eager']).sum())} of {d} values to other bits than eager")


@pytest.mark.parametrize("precision", ["high", "medium"])
def test_decode_stays_exact_when_float32_matmuls_may_round(precision):
    """A training script that allows faster float32 matmuls (TF32, or bfloat16 in oneDNN on
    CPUs that have it) must not change the eager decode's bits: its GEMMs then run in float64
    (still exact on the integer sums), and it decodes as the native path does."""
    if not _compiled_available():
        pytest.skip("compiled THC unavailable (no C++ compiler)")
    n, block = 200, 1024
    x = torch.randn(5000, generator=torch.Generator().manual_seed(2))
    eager = ThcCodec(n, seed=1, block=block, error_feedback=False, compiled=False, triton=False)
    native = ThcCodec(n, seed=1, block=block, error_feedback=False, compiled=True, triton=False)
    agreed = reference_agree([eager.agreement(x)])
    native.agreement(x)
    metas = [c.encode(x, agreed).meta for c in (eager, native)]
    sums = torch.randint(0, 30 * n + 1, (metas[0]["padded"],), generator=torch.Generator().manual_seed(3),
                         dtype=torch.int32)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        got = eager.decode([sums], agreed, meta=metas[0]).clone()
    finally:
        torch.set_float32_matmul_precision(before)
    want = native.decode([sums], agreed, meta=metas[1])
    assert eager.last_kernels["decode"] == "eager" and native.last_kernels["decode"] == "native"
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


def test_a_job_too_large_for_exact_decodes_is_warned_about(caplog):
    """Past ``block * g * n = 2**24`` the decode's transform leaves float32's integers: the
    codec still works, and says once that workers must then run one implementation."""
    from hina.worker.codecs.thc import DECODE_EXACT_BELOW
    with caplog.at_level("WARNING", logger="hina.worker.codecs.thc"):
        ThcCodec(546, block=1024)  # 1024 * 30 * 546 < 2**24
        assert not caplog.records
        ThcCodec(547, block=1024)
    assert 1024 * 30 * 547 >= DECODE_EXACT_BELOW > 1024 * 30 * 546
    assert len(caplog.records) == 1 and "no longer decode to the same bits" in caplog.text


@pytest.mark.parametrize("path", PATHS)
def test_error_feedback_telescopes(path):
    """n = 1: sum of K decodes = K x - R^-1 e_K exactly (up to float32)."""
    d, steps = 2048, 6
    x = torch.randn(d, generator=torch.Generator().manual_seed(2))
    c = ThcCodec(1, **_path(path))
    total = torch.zeros(d)
    for _ in range(steps):
        agreed, lanes, agg = run_round([c], [x])
        total += c.decode(agg, agreed, meta=lanes[0].meta)
    _ran(c, path)
    state = c.states[0]
    residual = fwht(state.residual, 1024) * random_signs(state.rotation_seed, d)
    torch.testing.assert_close(total + residual, steps * x, rtol=0, atol=steps * 1e3 * EPS32 * x.abs().max().item())
    assert (total / steps - x).norm() < (c.decode(agg, agreed, meta=lanes[0].meta) - x).norm()


# ----------------------------------------------------------------------- scalar codes
_EDGES = [0.0, -0.0, 1.0, 5e-324, 1e-45, 1.2e-38, 3.4028234663852886e38, 3.4028235677973366e38, 3.5e38, 1e300,
          float("inf"), float("nan"), -float("nan")]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.sampled_from(_EDGES), st.floats(min_value=0.0, allow_infinity=True),
                 st.floats(allow_infinity=False).map(abs)))
def test_the_scalar_codes_are_the_tensor_codes(value):
    """The codec's host-side codes (no tensor ops) give the bits the tensor functions give: the
    float32 rounding, +Inf beyond float32's range, the canonical NaN; and read back the same."""
    tensor32 = torch.tensor([value], dtype=torch.float32)
    assert math.isnan(float32_of(value)) if math.isnan(value) else float32_of(value) == float(tensor32)
    code = max_code_of(value)
    assert code.dtype == torch.uint32 and code.shape == (1,)
    assert code.view(torch.int32).tolist() == float_to_max_code(tensor32).view(torch.int32).tolist()
    back = max_code_value(code)
    want = float(float_from_max_code(code)[0])
    assert (math.isnan(back) and math.isnan(want)) or back == want
    assert max_code_value(code.to(torch.int64) & 0xFFFFFFFF) == back or math.isnan(back)
    if value == 0:  # -0.0 too: its sign bit would win MAX against every finite norm
        assert code.view(torch.int32).tolist() == [0]


def test_the_scalar_codes_refuse_what_the_tensor_codes_refuse():
    with pytest.raises(ValueError, match=">= 0"):
        max_code_of(-1.0)
    with pytest.raises(CodecError, match="uint32 or int64"):
        max_code_value(torch.tensor([1.0]))


# ----------------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_refused(bad):
    c = ThcCodec(2)
    g = torch.randn(100)
    g[17] = bad
    with pytest.raises(NonFiniteGradientError, match="non-finite"):
        c.agreement(g, key="b0")
    poisoned = float_to_max_code(torch.tensor([bad]).abs())
    with pytest.raises(NonFiniteGradientError, match="agreed"):
        c.encode(torch.randn(100), poisoned, key="b1")


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("d", [0, 1, 3, 1025])
def test_empty_and_odd_sizes(d, path):
    x = torch.randn(d, dtype=torch.float64)
    c = ThcCodec(1, threshold=math.sqrt(max(d, 1) * 2), **_path(path))
    agreed, lanes, agg = run_round([c], [x])
    out = c.decode(agg, agreed, meta=lanes[0].meta)
    assert out.shape == x.shape and out.dtype == x.dtype and torch.isfinite(out).all()
    if d > 128:  # smaller buckets take blocks the fused kernels do not (eager for every path)
        _ran(c, path)
    if d == 0:
        assert lanes[0].nbytes == 0


def test_wrong_table_and_shape_refused():
    with pytest.raises(ValueError, match="table"):
        ThcCodec(2, table=(0, 1, 2))
    with pytest.raises(ValueError, match="lut_lane_bits"):
        ThcCodec(1093, lut_lane_bits=16)
    with pytest.raises(ValueError, match="rank"):
        ThcCodec(2, rank=2)
    c = ThcCodec(1)
    agreed, lanes, agg = run_round([c], [torch.randn(100)])
    with pytest.raises(CodecError, match="expected 128"):
        c.decode([agg[0][:-1]], agreed, meta=lanes[0].meta)
    with pytest.raises(CodecError, match="reset"):
        c.agreement(torch.randn(5000))


# ----------------------------------------------------------------------- fast path (scratch reuse)
def test_levels_and_ends_are_exact():
    """u on a table level (p = 0) never moves: the 16-bit uniforms stay below 1."""
    codec = ThcCodec(1)
    state = codec._state(0)
    levels = torch.tensor(DEFAULT_TABLE, dtype=torch.float32).repeat(4096)
    got = codec._quantise(levels, state).long()
    assert torch.equal(got, torch.arange(len(DEFAULT_TABLE)).repeat(4096))


def test_uniforms_have_16_bits():
    """The rounding draw r = (m + 1/2) / 2**16: P(up) is p within 2**-17 (documented bias bound)."""
    codec = ThcCodec(1)
    state = codec._state(0)
    a, b = DEFAULT_TABLE[0], DEFAULT_TABLE[1]
    trials = 1 << 18
    for p in [2.0 ** -18, 0.25, 1 - 2.0 ** -18]:
        u = torch.full((trials,), a + p * (b - a))
        up = (codec._quantise(u, state).long() == 1).double().mean().item()
        se = math.sqrt(max(p * (1 - p), 2.0 ** -18) / trials)
        assert abs(up - p) <= 2.0 ** -17 + Z_BOUND * se


def test_interleaved_buckets_and_fresh_outputs():
    """Buckets share scratch buffers: interleaving agreement/encode/decode over buckets of
    different sizes gives the same lanes and decodes as running them one by one."""
    grads = {0: torch.randn(5000), "b": torch.randn(1 << 12), 2: torch.randn(7)}

    def run(interleaved):
        c = ThcCodec(1, seed=4)
        out = {}
        for _ in range(3):  # steps, with error feedback
            if interleaved:
                agreed = {k: c.agreement(g, k) for k, g in grads.items()}
                lanes = {k: c.encode(g, agreed[k], k) for k, g in grads.items()}
            else:
                agreed, lanes = {}, {}
                for k, g in grads.items():
                    agreed[k] = c.agreement(g, k)
                    lanes[k] = c.encode(g, agreed[k], k)
            dec = {k: c.decode(reference_aggregate([lanes[k]]), agreed[k], k, lanes[k].meta) for k in grads}
            out = {k: (lanes[k].streams[0].data.clone(), dec[k]) for k in grads}
        return out

    one, two = run(False), run(True)
    for k in grads:
        assert torch.equal(one[k][0], two[k][0]) and torch.equal(one[k][1], two[k][1])
    c = ThcCodec(1)
    agreed, lanes, agg = run_round([c], [grads[0]])
    first = c.decode(agg, agreed, meta=lanes[0].meta)
    kept = first.clone()
    second = c.decode(agg, agreed, meta=lanes[0].meta)
    assert first.data_ptr() != second.data_ptr() and torch.equal(first, kept)
    # a dropped result's memory is reused; one still referenced (even through a view) never is
    del second
    third = c.decode(agg, agreed, meta=lanes[0].meta)
    assert torch.equal(third, kept)
    view, ptr = third[:10], third.data_ptr()
    del third
    fourth = c.decode(agg, agreed, meta=lanes[0].meta)
    assert fourth.data_ptr() != ptr and torch.equal(view, kept[:10]) and torch.equal(fourth, kept)


def test_output_buffer_is_counted_from_the_moment_it_is_handed_out():
    """Two lanes' threads decode buckets of one codec: the buffer one call has taken (and is
    still filling, or returning, outside the codec's lock) must never be handed to the other.
    It was: ``_output_buffer`` returned the codec's own tensor, which no use count sees, so the
    Triton decode (which returns after leaving the lock) could have its result overwritten by
    another bucket's decode; two buckets then held the same mean (seen on an H100)."""
    c = ThcCodec(1)
    taken = c._output_buffer(64, torch.device("cpu"))
    other = c._output_buffer(64, torch.device("cpu"))
    assert taken.data_ptr() != other.data_ptr()
    ptr = other.data_ptr()
    del other                                  # dropped: the memory is reused
    assert c._output_buffer(64, torch.device("cpu")).data_ptr() == ptr


# ----------------------------------------------------------------------- opt-in compiled path
@pytest.mark.parametrize("n", [1, 2, 37, 4096 + 6])
def test_native_quantiser_is_bit_identical(n):
    """Same rotated values and RNG stream: the same packed bytes and error-feedback residual,
    through the vector body and the scalar tail, with clamped values and values on the levels."""
    _path(True)
    gen = torch.Generator().manual_seed(n)
    y = torch.randn(n, generator=gen) * 3
    y[: min(n, 16)] = torch.tensor([float(l) for l in DEFAULT_TABLE])[: min(n, 16)] - 15.0  # on levels (a = 1)
    if n > 20:
        y[17], y[18] = 1e3, -1e3  # clamped
    out = []
    for compiled in (False, True):
        c = ThcCodec(1, seed=1, threshold=15.0, compiled=compiled)
        state = c._state(0)
        yy, packed = y.clone(), torch.empty((n + 1) // 2, dtype=torch.uint8)
        scale = 1.0  # a = s g / 2T = 1: u = y + 15
        (c._native_encode if compiled else c._eager_encode)(yy, packed, state, scale)
        out.append((packed, yy))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])
    assert unpack_nibbles(out[1][0], n).max() <= 15


@pytest.mark.parametrize("d", [5, 3000, 1 << 16])
def test_compiled_matches_eager(d):
    """Compiled vs eager over error-feedback steps: the transforms differ only in rounding (a few
    ulps), so the indices agree except at exact float boundaries and the decodes are close."""
    _path("compiled")
    x = torch.randn(d, generator=torch.Generator().manual_seed(d))
    runs = []
    for compiled in (False, True):
        c = ThcCodec(1, seed=7, compiled=compiled)
        steps = []
        for _ in range(3):
            agreed, lanes, agg = run_round([c], [x])
            steps.append((unpack_nibbles(lanes[0].streams[0].data, lanes[0].streams[0].count),
                          c.decode(agg, agreed, meta=lanes[0].meta).clone()))
        runs.append((steps, c.states[0].residual.clone()))
    mismatch = sum((a[0] != b[0]).sum().item() for a, b in zip(runs[0][0], runs[1][0]))
    assert mismatch / (3 * d) < 1e-5
    if mismatch == 0:
        scale = x.abs().max().item()
        for a, b in zip(runs[0][0], runs[1][0]):
            torch.testing.assert_close(a[1], b[1], rtol=0, atol=1e3 * EPS32 * scale)
        torch.testing.assert_close(runs[0][1], runs[1][1], rtol=0, atol=1e3 * EPS32 * scale)


def test_compiled_switch_env_and_fallback(monkeypatch, tmp_path, caplog):
    """Off by default; HINA_THC_COMPILE=1 turns it on; no compiler: one warning, eager path."""
    import hina.worker.codecs.hadamard as hadamard
    monkeypatch.delenv("HINA_THC_COMPILE", raising=False)
    assert not ThcCodec(1).compiled
    monkeypatch.setenv("HINA_THC_COMPILE", "1")
    assert ThcCodec(1).compiled == _compiled_available()
    monkeypatch.setattr(hadamard, "_NATIVE_LIBS", {})
    monkeypatch.setenv("HINA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CXX", str(tmp_path / "no-such-compiler"))
    with caplog.at_level("WARNING"):
        c = ThcCodec(1, compiled=True)
        ThcCodec(1, compiled=True)
    assert not c.compiled
    assert sum("unavailable" in r.getMessage() for r in caplog.records) == 2  # once per kernel
    agreed, lanes, agg = run_round([c], [torch.randn(100)])
    assert c.decode(agg, agreed, meta=lanes[0].meta).shape == (100,)


def test_the_host_profile_says_where_a_round_trip_spends_the_host():
    """``bench_codecs.py --host-profile`` (what docs/codecs.md's host figures come from) runs and
    prints the top functions of the round trip, the codec's own among them."""
    import subprocess
    import sys
    from pathlib import Path
    tool = Path(__file__).resolve().parents[2] / "bench" / "bench_codecs.py"
    out = subprocess.run([sys.executable, str(tool), "--host-profile", "--sizes", "4K", "--repeats", "5"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    assert "THC round trip on the host, d = 4096" in out and "ms wall per round trip" in out
    rows = out.split("function\n", 1)[1].splitlines()
    assert len(rows) == 25
    names = " ".join(rows)
    assert "(thc.py:" in names  # the codec's own functions are among them
    for row in rows:
        own, cum, calls = (float(v) for v in row.split()[:3])
        assert 0 <= own <= cum and calls > 0
