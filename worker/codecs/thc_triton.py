"""Fused Triton kernels for THC on the GPU: three memory passes per round trip instead of ~20.

The eager THC path runs every step of the codec as its own ATen kernel: sign flip, two GEMMs of
the factored transform, residual add, norm, then a dozen element-wise passes for the quantiser
and the packing, and as many again to decode. On a GPU each pass streams the whole bucket through
DRAM, so the codec is bound by passes, not by arithmetic. Here each phase is one kernel:

``rotate``
    per Hadamard block of ``B = R * C`` values: ``y = H_B (signs * x) + residual`` and the
    block's ``sum(y**2)``. ``H_B = H_R (x) H_C``, so with the block viewed as an ``R x C`` tile
    ``X``, ``H_B x = H_R X H_C``: two small ``tl.dot``s on a tile held in registers, with the
    Hadamard tiles built in registers too (no memory traffic beyond the data).
    Traffic: x, the signs (one bit each) and, with error feedback, the residual in; y out
    (8.125 or 12.125 bytes per coordinate).
``quantise``
    the THC rounding of :meth:`ThcCodec._rounded_levels` (same per-integer LUTs, same 16-bit
    draw), counter-based Philox noise generated in the kernel (no random buffer in memory; one
    call of four words per 8 coordinates), two indices packed per byte, and the error-feedback
    update ``y -= deq[index]`` in place.
    Traffic: y in, packed out and, with error feedback, y out (4.5 or 8.5 bytes per coordinate).
``rotate_quantise``
    encode without error feedback in one pass (``ThcCodec.encode_plan`` "fused"): the rotation
    of ``rotate`` straight into the rounding of ``quantise``, the same bytes as the two, y never
    in memory. Traffic: x and the signs in, packed out (4.625 bytes per coordinate), but the
    rotation is computed again (the agreement's ``rotate`` then only sums squares).
``inverse``
    decode: ``out = signs * (H_B sums * scale - off0 * e_0)`` per block, the int sums read as is.
    Traffic: sums and sign bits in; out out (8.125 bytes per coordinate).

The transform inside them is two small products per block (TF32 tensor cores, float32-accurate
by a split; plain float32 before sm_80) or, opted into with ``HINA_THC_PRECISION=butterfly``,
log2(B) stages of float32 additions on the block held flat (about half the registers; not
timed on a GPU yet, docs/codecs.md).

The kernels run on CUDA tensors; ``TRITON_INTERPRET=1`` (set before this module is imported)
runs them on CPU tensors with Triton's interpreter, which is how the tests check them against
the eager path on machines without a GPU. :func:`supported` says whether a layout qualifies
(``tl.dot`` needs both tile sides >= 16: blocks of 256 to 2048 values, up to 1024 before
sm_80); everything else stays on the eager path. ``bench/triton_aot.py`` compiles every kernel
for sm_75/80/90 with Triton and ptxas, no GPU needed, and reports registers and spills. Any
failure to import Triton makes :data:`AVAILABLE` false.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import threading
from typing import Dict, Optional, Tuple

import torch

try:
    import triton
    import triton.language as tl
except Exception:  # noqa: BLE001 - missing or broken Triton: the eager path is used
    triton = None
    tl = None

__all__ = ["AVAILABLE", "BLOCKS_PER_PROGRAM", "FUSED_WARPS", "INPUT_DTYPES", "INTERPRET", "LAUNCH_CONFIG",
           "MAX_BLOCK", "MIN_BLOCK", "PRECISION_ENV", "QUANT_OCTETS", "QUANT_WARPS", "SMALL_SUMS",
           "TENSOR_CORE_PRECISION",
           "inverse", "kernel_tile", "launch_config", "pack_sign_bits", "precision_for", "quantise", "rotate",
           "rotate_quantise", "self_check", "supported", "tile_sides"]

_log = logging.getLogger(__name__)

#: Triton imported
AVAILABLE = triton is not None
#: the kernels were defined under Triton's CPU interpreter (``TRITON_INTERPRET=1``)
INTERPRET = os.environ.get("TRITON_INTERPRET", "") == "1"
#: Triton's interpreter swaps module-level state while a kernel runs, so interpreted launches
#: from several threads (the tests' workers) take turns; compiled launches need no lock
_LAUNCH_GUARD = threading.Lock() if INTERPRET else contextlib.nullcontext()
#: gradient dtypes ``rotate`` reads as they are (converted to float32 in registers, not in memory)
INPUT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
#: smallest and largest Hadamard block the kernels take (tiles 16x16 to 32x64)
MIN_BLOCK, MAX_BLOCK = 256, 2048
#: the quantiser's seed is passed with this bit set: always a 64-bit argument (one compiled
#: variant), 62 bits of it random
_SEED_BIT = 1 << 62
#: integer sums below this magnitude are exact in TF32 (11 significant bits): :func:`inverse`'s
#: transform of them takes one product fewer and is exact
SMALL_SUMS = 1 << 11
#: rows of 8 coordinates per program of the quantiser, and its warps: timed on an H200 over 64 to
#: 1024 rows and 2 to 16 warps at 64M values (docs/codecs.md): 128 rows on 4 warps took 0.134 ms
#: against 0.164 for the 256 on 8 first chosen (8 coordinates per thread either way; 1024 rows
#: on 8 warps, 0.129 ms, needs 246 registers with error feedback); the rows' draws are keyed by
#: their index, so the bytes do not change
QUANT_OCTETS, QUANT_WARPS = 128, 4


#: (dot precision, warps) of the transform kernels per block size. "tf32x3" (sm_80+): timed on an
#: H100 with ``python bench/bench_thc_kernels.py`` (Triton 3.6; docs/codecs.md has the table): one
#: warp per tile (two for 2048-value blocks) was fastest by far, 80 % of the copy bandwidth for
#: the rotation and 70 % for the inverse at 1024-value blocks against 11 % and 8 % with the 16
#: warps first picked from register counts alone; several blocks per program
#: (BLOCKS_PER_PROGRAM) did not help. Three TF32 products keep fp32 accuracy on tensor cores.
#: "ieee" (plain fp32, sm_75) is still the register-count choice, untimed (no such GPU here):
#: it spills beyond 1024-value blocks, so older GPUs keep bigger blocks eager. 4096-value
#: blocks (64x64 tiles) spill at every warp count on sm_80, so they stay eager everywhere.
LAUNCH_CONFIG = {
    "tf32x3": {256: 1, 512: 1, 1024: 1, 2048: 2},
    "tf32x2": {256: 1, 512: 1, 1024: 1, 2048: 2},  # timed at 1024 (docs/codecs.md); else as tf32x3
    "ieee": {256: 4, 512: 8, 1024: 16},
    # float32 additions, no products (any GPU; opt in with HINA_THC_PRECISION=butterfly):
    # untimed, like "ieee". From sm_90 SASS (``bench/triton_aot.py --precisions butterfly
    # --sass``): the fewest instructions per block at <= 72 registers, one warp up to 1024
    # values (62-72 registers against the products' 136-168), two for 2048
    "butterfly": {256: 1, 512: 1, 1024: 1, 2048: 2},
}
#: warps of the fused rotate-and-quantise kernel per precision and block, where they differ from
#: the transform kernels' (LAUNCH_CONFIG); ``bench/bench_thc_kernels.py --fused`` times them
FUSED_WARPS: Dict[str, Dict[int, int]] = {"tf32x3": {}, "tf32x2": {1024: 2}, "ieee": {}, "butterfly": {}}
#: Hadamard blocks per program of the transform kernels (the ``G`` of their loop), per precision
#: and block; 1 where nothing was measured. ``bench/bench_thc_kernels.py`` times the choices.
BLOCKS_PER_PROGRAM: Dict[str, Dict[int, int]] = {"tf32x3": {}, "tf32x2": {}, "ieee": {}, "butterfly": {}}


#: environment variable naming the transforms' precision instead of :func:`precision_for`'s
#: choice: "tf32x3", "tf32x2" (sm_80 and later), "ieee" or "butterfly" (float32 additions)
PRECISION_ENV = "HINA_THC_PRECISION"
#: the transforms' precision on sm_80 and later (see LAUNCH_CONFIG)
TENSOR_CORE_PRECISION = "tf32x2"


def precision_for(capability: Tuple[int, int]) -> str:
    """The transforms' precision for a CUDA compute capability: float32 accuracy from TF32
    tensor-core products on sm_80 and later (``TENSOR_CORE_PRECISION``: "tf32x3", Triton's
    three-product split, or "tf32x2", two products, see ``_split_dot``), plain float32 ("ieee")
    before. ``HINA_THC_PRECISION`` overrides it where the GPU supports the choice; "butterfly"
    (the transform as float32 additions, no products: :func:`_butterfly_2d`) runs on any."""
    return _precision(tuple(capability), os.environ.get(PRECISION_ENV, ""))


@functools.lru_cache(maxsize=None)
def _precision(capability: Tuple[int, int], wanted: str) -> str:
    """:func:`precision_for` with the environment's choice ``wanted`` given (asked once per pair:
    every launch of a round trip asks, and the GPU waits for the host at each synchronisation;
    an invalid choice raises every time, exceptions are not cached)."""
    tensor_cores = capability >= (8, 0)
    if wanted:
        if wanted not in LAUNCH_CONFIG or (wanted.startswith("tf32") and not tensor_cores):
            raise ValueError(f"{PRECISION_ENV}={wanted!r}: one of {sorted(LAUNCH_CONFIG)} "
                             "(the tf32 ones need sm_80 or later)")
        return wanted
    return TENSOR_CORE_PRECISION if tensor_cores else "ieee"


@functools.lru_cache(maxsize=None)
def _capability(index: int) -> Tuple[int, int]:
    """A CUDA device's compute capability, asked once: torch's query costs microseconds, and
    every launch of a round trip asks (a host cost the GPU waits for at each synchronisation)."""
    return torch.cuda.get_device_capability(index)


def _config(device: torch.device, block: int) -> Optional[Tuple[str, int]]:
    """(precision, warps) for the transform kernels on ``device``, or None (block not taken)."""
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        prec = precision_for(_capability(index))
    else:
        prec = "ieee"
    warps = LAUNCH_CONFIG[prec].get(block)
    return None if warps is None else (prec, warps)


def supported(t: torch.Tensor, block: int) -> bool:
    """True when the kernels can run on ``t``'s device with Hadamard block ``block``."""
    if not AVAILABLE or not MIN_BLOCK <= block <= MAX_BLOCK:
        return False
    if not (t.is_cuda or (INTERPRET and t.device.type == "cpu")):
        return False
    return t.device.type == "cpu" or _config(t.device, block) is not None


def tile_sides(block: int) -> Tuple[int, int]:
    """Tile ``R x C`` of a block: C = 2**ceil(m/2), R = 2**floor(m/2)."""
    m = block.bit_length() - 1
    return 1 << (m // 2), 1 << (m - m // 2)


def kernel_tile(prec: str, block: int) -> Tuple[int, int]:
    """The tile ``R x C`` the transform kernels hold a block in for precision ``prec``: the
    products' :func:`tile_sides`; the butterfly's ``1 x block``, a flat vector, for which
    Triton lays the stages out in far fewer registers (sm_90, 1024 values on one warp: 62-72
    against 136-168 for the products' 32 x 32 tile; ``bench/triton_aot.py --precisions
    codec,butterfly``)."""
    return (1, block) if prec == "butterfly" else tile_sides(block)


#: (precision, warps, blocks per program) of one launch of a transform kernel
Launch = Tuple[str, int, int]


def launch_config(device: torch.device, block: int) -> Launch:
    """How the transform kernels are launched for ``block`` on ``device``."""
    if INTERPRET and device.type == "cpu":  # plain float32 unless the environment names a precision
        wanted = os.environ.get(PRECISION_ENV, "")
        return (_precision((9, 0), wanted) if wanted else "ieee"), 4, 1
    config = _config(device, block)
    if config is None:
        raise ValueError(f"block={block}: not taken by the kernels on {device} (see LAUNCH_CONFIG)")
    prec, warps = config
    return prec, warps, BLOCKS_PER_PROGRAM[prec].get(block, 1)


if AVAILABLE:
    @triton.jit
    def _hadamard_tile(N: tl.constexpr, PREC: tl.constexpr):
        """The unnormalised Sylvester matrix H_N (N <= 64) built in registers: entry (i, j) is
        (-1)**popcount(i & j). Its +-1 entries are exact in TF32, so the products' error is only
        the data's. Built as float bits (1.0 with the parity as its sign bit): an int-to-float
        conversion per entry ran at a quarter of the other instructions' rate and was a sixth
        of the kernel's instructions (sm_90 SASS, ``bench/triton_aot.py --sass``). The
        butterfly transform takes no tile: a placeholder then (a ``1 x B`` tile's ``B x B``
        matrix would not even be a valid Triton tensor for B = 2048)."""
        if PREC == "butterfly":
            tile = 0.0
        else:
            i = tl.arange(0, N)
            bits = i[:, None] & i[None, :]
            bits ^= bits >> 4
            bits ^= bits >> 2
            bits ^= bits >> 1
            tile = (((bits & 1) << 31) | 0x3F800000).to(tl.float32, bitcast=True)
        return tile

    @triton.jit
    def _split_dot(a, b, SPLIT_B: tl.constexpr):
        """``a @ b`` in float32 accuracy from two TF32 products, where the other operand is a
        Hadamard tile (+-1, exact in TF32): the data operand splits into its TF32 head (the
        top 10 mantissa bits, cut off by a mask) and the rest. Triton's "tf32x3" also multiplies
        the Hadamard tile's (zero) tail: a third product that adds nothing."""
        x = b if SPLIT_B else a
        head = (x.to(tl.uint32, bitcast=True) & 0xFFFFE000).to(tl.float32, bitcast=True)
        tail = x - head
        # (one return at the end: Triton compiles the code after a return inside an if)
        if SPLIT_B:
            out = tl.dot(a, tail, acc=tl.dot(a, head, input_precision="tf32"), input_precision="tf32")
        else:
            out = tl.dot(tail, b, acc=tl.dot(head, b, input_precision="tf32"), input_precision="tf32")
        return out

    @triton.jit
    def _butterfly_stage(x, N: tl.constexpr, S: tl.constexpr):
        """One radix-2 stage of the Walsh-Hadamard transform of a flat ``N``-vector: each pair
        ``(a, b)`` of values ``S`` apart becomes ``(a + b, a - b)``. The pair's axis is moved
        last so that ``tl.split`` takes it apart; the compiler keeps pairs within a thread in
        registers and exchanges the others with warp shuffles (sm_90 SASS: ``bench/triton_aot.py
        --sass``)."""
        a, b = tl.split(tl.permute(tl.reshape(x, (N // (2 * S), 2, S)), (0, 2, 1)))
        return tl.reshape(tl.permute(tl.join(a + b, a - b), (0, 2, 1)), (N,))

    @triton.jit
    def _butterfly_2d(x, R: tl.constexpr, C: tl.constexpr):
        """``H_R X H_C`` of an ``R x C`` tile as the fast Walsh-Hadamard transform of its
        row-major ``R C`` values (``H_RC = H_R (x) H_C`` in Sylvester order): log2(R C) stages of
        float32 additions, no products, no tensor cores. The stages commute, so their order is
        free; each rounds once, so the error is a few float32 ulps of the block's scale, and
        integers whose transform stays below 2**24 in magnitude are transformed exactly."""
        N: tl.constexpr = R * C
        y = tl.reshape(x, (N,))
        for k in tl.static_range(12):  # blocks of up to 4096 values
            if (1 << k) < N:
                y = _butterfly_stage(y, N, 1 << k)
        return tl.reshape(y, (R, C))

    @triton.jit
    def _hadamard_2d(h_r, x, h_c, PREC: tl.constexpr, SMALL_INTS: tl.constexpr = False):
        """``H_R X H_C`` for a tile ``X``: two products, each in ``PREC`` ("tf32x2": the split
        of :func:`_split_dot`; else ``tl.dot``'s own precision), or ("butterfly") the additions
        of :func:`_butterfly_2d`, which take no Hadamard tiles (:func:`_hadamard_tile` gives
        placeholders). ``SMALL_INTS``: X holds integers below 2**11 in magnitude, exact in TF32, so the
        first product needs no split (one TF32 product, exact); its result, integers below
        2**16, splits exactly into head and tail, so the transform of such a tile is exact (the
        butterfly's is exact for them anyway)."""
        R: tl.constexpr = x.shape[0]
        C: tl.constexpr = x.shape[1]
        if PREC == "butterfly":
            y = _butterfly_2d(x, R, C)
        elif SMALL_INTS and PREC != "ieee":
            y = _split_dot(tl.dot(h_r, x, input_precision="tf32"), h_c, False)
        elif PREC == "tf32x2":
            y = _split_dot(_split_dot(h_r, x, True), h_c, False)
        else:
            y = tl.dot(tl.dot(h_r, x, input_precision=PREC), h_c, input_precision=PREC)
        return y

    @triton.jit
    def _flip(x, SIGN_WORDS, blk, R: tl.constexpr, C: tl.constexpr):
        """``x * signs`` for block ``blk``'s ``R x C`` tile, as a flip of each value's sign bit.
        The signs are read as the block's 32-bit words (bit k of word w: coordinate 32w + k is
        negative; the little-endian view of :func:`pack_sign_bits`' bytes), ``R * C / 32`` loads
        per tile where a byte per coordinate took one each, and moved into each value's bit 31
        without a conversion: together a fifth of the rotation's instructions on sm_90."""
        W: tl.constexpr = R * C // 32
        words = tl.load(SIGN_WORDS + blk * W + tl.arange(0, W)).to(tl.uint32, bitcast=True)
        sign = (words[:, None] << (31 - tl.arange(0, 32)).to(tl.uint32)[None, :]) & 0x80000000
        sign = tl.reshape(sign, (R, C))
        return (x.to(tl.uint32, bitcast=True) ^ sign).to(tl.float32, bitcast=True)

    @triton.jit
    def _rotate_kernel(X, SIGN_WORDS, RES, Y, PARTIAL, numel, nblocks, norm,
                       R: tl.constexpr, C: tl.constexpr, G: tl.constexpr, HAS_RES: tl.constexpr,
                       PREC: tl.constexpr, STORE_Y: tl.constexpr):
        # G consecutive blocks per program (an unrolled loop): the Hadamard tiles are built
        # once per program and G tiles' loads are in flight together
        pid = tl.program_id(0)
        rows = tl.arange(0, R)
        cols = tl.arange(0, C)
        h_r = _hadamard_tile(R, PREC)
        h_c = _hadamard_tile(C, PREC)
        for k in tl.static_range(G):
            blk = pid.to(tl.int64) * G + k
            if blk < nblocks:  # the last program's group may reach past the last block
                offs = blk * (R * C) + (rows[:, None] * C + cols[None, :])
                x = tl.load(X + offs, mask=offs < numel, other=0.0).to(tl.float32)  # padding: zeros
                x = _flip(x, SIGN_WORDS, blk, R, C)
                y = _hadamard_2d(h_r, x, h_c, PREC)
                y = y * norm  # 1 / sqrt(R C): orthonormal
                if HAS_RES:
                    y += tl.load(RES + offs)
                if STORE_Y:  # False: the norm alone (the fused encode rotates again)
                    tl.store(Y + offs, y)
                tl.store(PARTIAL + blk, tl.sum(tl.sum(y * y, axis=1), axis=0))

    @triton.jit
    def _round_to_index(y, r16, OFFSET, SLOPE, a, half_g, g, top):
        """THC's one-draw rounding of rotated values to table indices (see _rounded_levels)."""
        u = tl.minimum(tl.maximum(y * a + half_g, 0.0), g)
        j = u.to(tl.int32)  # truncation == floor for u >= 0
        v = tl.load(OFFSET + j) + tl.load(SLOPE + j) * u
        v = tl.minimum(v + r16.to(tl.float32) * 1.52587890625e-05, top)  # r16 = m - 2**15, m ~ U{0..2**16-1}
        return tl.floor(v).to(tl.int32)

    @triton.jit
    def _noise16(seed, octet, N: tl.constexpr):
        """The 16-bit draws ``m - 2**15`` of N rows of 8 coordinates, one Philox call (four
        32-bit words) per row: word k's low half for coordinate 2k of the row, its high half for
        coordinate 2k + 1. Both encode kernels draw through here, so they round alike."""
        w0, w1, w2, w3 = tl.randint4x(seed, octet)
        # words in order (join stacks along a new last axis), then each word's two halves
        w = tl.reshape(tl.join(tl.join(w0, w2), tl.join(w1, w3)), (N, 4))
        return tl.reshape(tl.join(w & 0xFFFF, w >> 16), (N, 8)).to(tl.int32) - 32768

    @triton.jit
    def _store_indices(PACKED, octet, q, n_pairs, N: tl.constexpr):
        """Rows of 8 indices, two per byte (even coordinate in the high nibble)."""
        q_hi, q_lo = tl.split(tl.reshape(q, (N, 4, 2)))
        pair = octet[:, None] * 4 + tl.arange(0, 4)[None, :]
        tl.store(PACKED + pair, (q_hi * 16 + q_lo).to(tl.uint8), mask=pair < n_pairs)

    @triton.jit(do_not_specialize=["seed"])  # a fresh seed per call must not mean a fresh compile
    def _quantise_kernel(Y, PACKED, OFFSET, SLOPE, DEQ, RAND, seed, n_pairs, a, half_g, g, top,
                         OCTETS: tl.constexpr, HAS_DEQ: tl.constexpr, HAS_RAND: tl.constexpr):
        # a tile of OCTETS x 8 consecutive coordinates: one Philox call (four 32-bit words) per
        # row gives its 8 coordinates 16 bits each
        pid = tl.program_id(0)
        octet = pid.to(tl.int64) * OCTETS + tl.arange(0, OCTETS)
        offs = octet[:, None] * 8 + tl.arange(0, 8)[None, :]
        mask = offs < 2 * n_pairs
        y = tl.load(Y + offs, mask=mask, other=0.0)
        if HAS_RAND:  # explicit int16 draws (the tests' comparison with the eager path)
            r = tl.load(RAND + offs, mask=mask, other=0).to(tl.int32)
        else:
            r = _noise16(seed, octet, OCTETS)
        q = _round_to_index(y, r, OFFSET, SLOPE, a, half_g, g, top)
        _store_indices(PACKED, octet, q, n_pairs, OCTETS)
        if HAS_DEQ:  # error feedback: the residual is what the indices do not carry
            tl.store(Y + offs, y - tl.load(DEQ + q), mask=mask)

    @triton.jit(do_not_specialize=["seed"])
    def _rotate_quantise_kernel(X, SIGN_WORDS, PACKED, OFFSET, SLOPE, seed, numel, n_pairs, norm,
                                a, half_g, g, top, R: tl.constexpr, C: tl.constexpr,
                                PREC: tl.constexpr):
        # encode without error feedback in one pass: the rotation of _rotate_kernel (the same
        # products, so the same float32 values) straight into the rounding of _quantise_kernel
        # (the same draws per coordinate); y never goes to memory. 4.625 bytes per coordinate
        # against 8.125 + 4.5 for the two kernels.
        blk = tl.program_id(0).to(tl.int64)
        rows = tl.arange(0, R)
        cols = tl.arange(0, C)
        offs = blk * (R * C) + (rows[:, None] * C + cols[None, :])
        x = tl.load(X + offs, mask=offs < numel, other=0.0).to(tl.float32)
        x = _flip(x, SIGN_WORDS, blk, R, C)
        y = _hadamard_2d(_hadamard_tile(R, PREC), x, _hadamard_tile(C, PREC), PREC)
        y = tl.reshape(y * norm, (R * C // 8, 8))  # row-major: rows of 8 consecutive coordinates
        octet = blk * (R * C // 8) + tl.arange(0, R * C // 8)
        q = _round_to_index(y, _noise16(seed, octet, R * C // 8), OFFSET, SLOPE, a, half_g, g, top)
        _store_indices(PACKED, octet, q, n_pairs, R * C // 8)

    @triton.jit
    def _inverse_kernel(SUMS, SIGN_WORDS, OUT, numel, nblocks, scale, off0,
                        R: tl.constexpr, C: tl.constexpr, G: tl.constexpr, PREC: tl.constexpr,
                        SMALL_SUMS: tl.constexpr):
        pid = tl.program_id(0)
        rows = tl.arange(0, R)
        cols = tl.arange(0, C)
        local = rows[:, None] * C + cols[None, :]
        h_r = _hadamard_tile(R, PREC)
        h_c = _hadamard_tile(C, PREC)
        for k in tl.static_range(G):
            blk = pid.to(tl.int64) * G + k
            if blk < nblocks:  # the last program's group may reach past the last block
                offs = blk * (R * C) + local
                s = tl.load(SUMS + offs).to(tl.float32)
                y = _hadamard_2d(h_r, s, h_c, PREC, SMALL_SUMS)
                y = y * scale  # includes 1 / sqrt(R C)
                y = tl.where(local == 0, y - off0, y)  # H 1 = sqrt(B) e_0: decode's offset on one value
                y = _flip(y, SIGN_WORDS, blk, R, C)
                tl.store(OUT + offs, y, mask=offs < numel)


def _seed_arg(seed: int) -> int:
    """The encode kernels' Philox seed argument: the low 62 bits of ``seed`` with _SEED_BIT set."""
    return _SEED_BIT | (int(seed) & (_SEED_BIT - 1))


def _check(name: str, t: torch.Tensor, n: int, dtypes: Tuple[torch.dtype, ...], device: torch.device) -> None:
    if t.device != device or t.dtype not in dtypes or not t.is_contiguous() or t.numel() < n:
        raise ValueError(f"{name}: expected a contiguous {'/'.join(map(str, dtypes))} tensor of >= {n} "
                         f"values on {device}, got {t.dtype} x {t.numel()} on {t.device}")


def _sign_words(signs: torch.Tensor, padded: int) -> torch.Tensor:
    """The first ``padded / 8`` sign bytes as int32 words, the kernels' view (``padded`` is whole
    blocks of >= 256 values: whole words); bytes at an offset not a multiple of 4 are copied."""
    head = signs[: padded // 8]
    if head.storage_offset() % 4:
        head = head.clone()
    return head.view(torch.int32)


def pack_sign_bits(signs: torch.Tensor) -> torch.Tensor:
    """+-1 signs (any dtype, numel a multiple of 8) as the kernels' bits: uint8, bit k of byte j
    set when coordinate 8j + k is negative."""
    if signs.numel() % 8:
        raise ValueError(f"signs: {signs.numel()} values, not a multiple of 8")
    neg = (signs.reshape(-1, 8) < 0).to(torch.uint8)
    weights = torch.tensor([1 << k for k in range(8)], dtype=torch.uint8, device=signs.device)
    return (neg * weights).sum(1, dtype=torch.uint8)


def rotate(x: torch.Tensor, signs: torch.Tensor, residual: Optional[torch.Tensor], y: Optional[torch.Tensor],
           block: int, partial: torch.Tensor, config: Optional[Launch] = None,
           padded: Optional[int] = None) -> torch.Tensor:
    """``y = fwht(signs * pad(x), block) + residual`` (orthonormal, blockwise) in one pass.

    Args:
        x: flat gradient, float32, float16 or bfloat16 (``numel`` values, padded with zeros up
            to ``y.numel()``).
        signs: the padded length's sign bits (:func:`pack_sign_bits`).
        residual: float32 of the padded length, or None.
        y: float32 output, padded length (a multiple of ``block``); None: only the norm is
            wanted (x is read, nothing but ``partial`` is written), ``padded`` gives the length.
        block: Hadamard block, see :func:`supported`.
        partial: float32 scratch of >= ``padded / block`` values: each block's ``sum(y**2)``.
        config: (precision, warps, blocks per program) instead of :func:`launch_config`'s (for
            ``bench/bench_thc_kernels.py``).

    Returns:
        The first ``padded / block`` values of ``partial`` (sum them for ``||y||**2``).
    """
    device = x.device
    if y is not None:
        padded = y.numel()
        _check("y", y, padded, (torch.float32,), device)
    elif padded is None or padded % block:
        raise ValueError(f"padded={padded!r}: without y, the padded length (a multiple of {block})")
    nblocks = padded // block
    _check("x", x, 0, INPUT_DTYPES, device)
    _check("signs", signs, padded // 8, (torch.uint8,), device)
    _check("partial", partial, nblocks, (torch.float32,), device)
    if residual is not None:
        _check("residual", residual, padded, (torch.float32,), device)
    if nblocks:
        prec, warps, group = config or launch_config(device, block)
        r, c = kernel_tile(prec, block)
        with _LAUNCH_GUARD:
            out = y if y is not None else partial  # never written when y is None
            _rotate_kernel[(triton.cdiv(nblocks, group),)](
                x, _sign_words(signs, padded), residual if residual is not None else out, out, partial,
                x.numel(), nblocks,
                1.0 / math.sqrt(block), R=r, C=c, G=group, HAS_RES=residual is not None, PREC=prec,
                STORE_Y=y is not None, num_warps=warps)
    return partial[:nblocks]


def rotate_quantise(x: torch.Tensor, signs: torch.Tensor, packed: torch.Tensor, block: int,
                    offset: torch.Tensor, slope: torch.Tensor, seed: int, a: float, half_g: float,
                    g: float, top: float, config: Optional[Launch] = None) -> None:
    """Encode without error feedback in one pass: :func:`quantise` of :func:`rotate`'s ``y``
    (no residual), the same float32 values and the same draws, so the same ``packed`` as the two
    kernels, without ``y`` in memory.

    Args:
        x: as :func:`rotate`'s.
        signs: the padded length's sign bits; the padded length is ``2 * packed.numel()``, a
            multiple of ``block``.
        packed: uint8 output, two indices per byte.
        offset, slope, seed, a, half_g, g, top: as :func:`quantise`'s.
        config: (precision, warps, _) instead of :func:`launch_config`'s; one block per program.
    """
    device = x.device
    padded = 2 * packed.numel()
    if padded % block:
        raise ValueError(f"packed: {packed.numel()} bytes are not whole blocks of {block} values")
    _check("x", x, 0, INPUT_DTYPES, device)
    _check("signs", signs, padded // 8, (torch.uint8,), device)
    _check("packed", packed, padded // 2, (torch.uint8,), device)
    _check("offset", offset, int(g) + 1, (torch.float32,), device)
    _check("slope", slope, int(g) + 1, (torch.float32,), device)
    if padded:
        prec, warps, _ = config or launch_config(device, block)
        r, c = kernel_tile(prec, block)
        if config is None:
            warps = FUSED_WARPS[prec].get(block, warps)
        with _LAUNCH_GUARD:
            _rotate_quantise_kernel[(padded // block,)](
                x, _sign_words(signs, padded), packed, offset, slope, _seed_arg(seed), x.numel(),
                padded // 2, 1.0 / math.sqrt(block), a, half_g, g, top, R=r, C=c, PREC=prec,
                num_warps=warps)


def quantise(y: torch.Tensor, packed: torch.Tensor, offset: torch.Tensor, slope: torch.Tensor,
             deq: Optional[torch.Tensor], seed: int, a: float, half_g: float, g: float, top: float,
             rand: Optional[torch.Tensor] = None) -> None:
    """THC rounding of ``u = clamp(a y + half_g, 0, g)`` to 4-bit table indices packed two per
    byte into ``packed`` (even coordinate in the high nibble); with ``deq`` (float32, one value
    per index), ``y -= deq[index]`` in place.

    ``y.numel()`` must be even. The noise is Philox keyed by the low 62 bits of ``seed`` and the
    position (one call, four 32-bit words, per 8 coordinates); ``rand`` (int16 ``m - 2**15`` per
    coordinate) replaces it, for tests.
    """
    n, device = y.numel(), y.device
    if n % 2:
        raise ValueError(f"y has {n} values: the kernel packs whole pairs")
    _check("y", y, n, (torch.float32,), device)
    _check("packed", packed, n // 2, (torch.uint8,), device)
    _check("offset", offset, int(g) + 1, (torch.float32,), device)
    _check("slope", slope, int(g) + 1, (torch.float32,), device)
    if deq is not None:
        _check("deq", deq, 16, (torch.float32,), device)
    if rand is not None:
        _check("rand", rand, n, (torch.int16,), device)
    pairs = n // 2
    if pairs:
        with _LAUNCH_GUARD:
            _quantise_kernel[(triton.cdiv(pairs, 4 * QUANT_OCTETS),)](
                y, packed, offset, slope, deq if deq is not None else y, rand if rand is not None else y,
                _seed_arg(seed), pairs, a, half_g, g, top,
                OCTETS=QUANT_OCTETS, HAS_DEQ=deq is not None, HAS_RAND=rand is not None, num_warps=QUANT_WARPS)


def inverse(sums: torch.Tensor, signs: torch.Tensor, out: torch.Tensor, block: int, scale: float,
            offset0: float, config: Optional[Launch] = None, sums_bound: Optional[int] = None) -> torch.Tensor:
    """``out = (signs * (fwht(sums, block) * scale - offset0 * e_0 per block))[:out.numel()]``.

    Args:
        sums: integer lanes (int16/32/64) of the padded length, a multiple of ``block``.
        signs: the padded length's sign bits (:func:`pack_sign_bits`).
        out: float32 result, ``numel <= padded``.
        config: as :func:`rotate`'s.
        sums_bound: the largest ``|sum|`` the caller expects (THC: the table's top value times
            the workers). Below :data:`SMALL_SUMS` the TF32 transform takes one product fewer and
            is exact (see ``_hadamard_2d``); a sum beyond the bound is then rounded to TF32's 11
            significant bits in the first product, not refused.

    Every transform here is exact on integer sums while ``block * max|sum| < 2**24`` and the
    sums keep to ``sums_bound`` (products of integers with the Hadamard tiles' +-1, the TF32
    splits' heads and tails of such integers exact, partial sums that float32 holds), and the kernel
    is launched without fused multiply-adds, so ``* scale`` and ``- offset0`` round once each:
    the same bits as the eager and native decodes (``thc.DECODE_EXACT_BELOW``).
    """
    padded, device = sums.numel(), sums.device
    _check("sums", sums, padded, (torch.int16, torch.int32, torch.int64), device)
    _check("signs", signs, padded // 8, (torch.uint8,), device)
    _check("out", out, 0, (torch.float32,), device)
    if padded % block or out.numel() > padded:
        raise ValueError(f"sums: {padded} values for block {block} and {out.numel()} outputs")
    if padded:
        prec, warps, group = config or launch_config(device, block)
        r, c = kernel_tile(prec, block)
        nblocks = padded // block
        with _LAUNCH_GUARD:
            _inverse_kernel[(triton.cdiv(nblocks, group),)](
                sums, _sign_words(signs, padded), out, out.numel(), nblocks, scale / math.sqrt(block), offset0,
                R=r, C=c, G=group, PREC=prec, SMALL_SUMS=sums_bound is not None and abs(sums_bound) < SMALL_SUMS,
                num_warps=warps, enable_fp_fusion=False)
    return out



# ------------------------------------------------------------------------------- self-check
#: relative error the self-check allows the transforms (float32 through a 2-factor transform)
_SELF_CHECK_RTOL = 1e-5


def self_check(device: torch.device, block: int, luts: Dict[str, torch.Tensor], g: float,
               top: float) -> Optional[str]:
    """Run the three kernels on two blocks of random data against the eager math, and the fused
    encode against two of them; None when they agree, else what differed (or the build or
    launch error).

    A guard for GPUs the kernels never ran on: a kernel that builds but computes wrongly (a
    compiler or driver problem) must turn the codec eager rather than train on wrong values.

    Args:
        device: where to run them.
        block: Hadamard block size (a supported one).
        luts: the codec's rounding tables (``offset``, ``slope``, ``levels``; see
            ``thc_rounding.rounding_luts``).
        g: the table's largest level; top: the largest index.
    """
    from .hadamard import random_signs  # local: the eager helpers only matter here
    where = f"self-check on {device}, block {block}"
    try:
        gen = torch.Generator().manual_seed(block)
        signs = random_signs(7, 2 * block, torch.int8)
        bits = pack_sign_bits(signs).to(device)
        problem = (_check_rotate(device, block, signs, bits, gen)
                   or _check_quantise(device, 2 * block, luts, g, top, gen)
                   or _check_inverse(device, block, signs, bits, g, gen)
                   or _check_fused(device, block, bits, luts, g, top, gen))
        drift = None if problem else _check_inverse_bits(device, block, signs, bits, g, gen)
    except Exception as exc:  # noqa: BLE001 - a build or launch failure is a failed check
        problem = f"{type(exc).__name__}: {exc}"
    if not problem and drift:
        # right to float32 rounding, so the kernels stay; but workers decoding on other
        # implementations (a CPU worker) no longer get the same bits: DDP replicas drift
        _log.warning("%s: %s; workers of one job should then all decode on this GPU's kernels", where, drift)
    return problem and f"{where}: {problem}"


def _check_rotate(device: torch.device, block: int, signs: torch.Tensor, bits: torch.Tensor,
                  gen: torch.Generator) -> Optional[str]:
    from .hadamard import fwht
    padded = signs.numel()
    x = torch.randn(padded - 3, generator=gen)  # a padded tail
    res = torch.randn(padded, generator=gen)
    y = torch.empty(padded, device=device)
    parts = rotate(x.to(device), bits, res.to(device), y, block, torch.empty(2, device=device))
    ref = fwht(torch.cat([x, x.new_zeros(3)]).double() * signs.double(), block) + res.double()
    err = float((y.cpu().double() - ref).abs().max())
    if not err <= _SELF_CHECK_RTOL * float(ref.abs().max()):
        return f"rotate differs from the eager transform by {err:.3g}"
    if not torch.allclose(parts.cpu().double().sum(), (ref ** 2).sum(), rtol=_SELF_CHECK_RTOL):
        return "rotate's sums of squares differ from the eager norm"
    return None


def _check_quantise(device: torch.device, n: int, luts: Dict[str, torch.Tensor], g: float, top: float,
                    gen: torch.Generator) -> Optional[str]:
    from .packing import unpack_nibbles
    y = torch.randn(n, generator=gen) * 6  # a = 2: some clamp on both sides
    rand = torch.randint(-(1 << 15), 1 << 15, (n,), generator=gen, dtype=torch.int16)
    deq = (luts["levels"] - g / 2.0) * 0.25
    yk = y.to(device, copy=True)  # the kernel updates it in place
    packed = torch.empty(n // 2, dtype=torch.uint8, device=device)
    quantise(yk, packed, luts["offset"].to(device), luts["slope"].to(device), deq.to(device), 0,
             2.0, g / 2.0, g, top, rand=rand.to(device))
    got = unpack_nibbles(packed.cpu(), n).long()
    u = (y * 2.0 + g / 2.0).clamp(0.0, g)
    j = u.long()
    want = (luts["offset"][j] + luts["slope"][j] * u + rand.float() * 2.0 ** -16).clamp(max=top).floor().long()
    # float contraction may move a value across a rounding boundary: one level, rarely
    if (got - want).abs().max() > 1 or (got != want).sum() > max(1, n // 1000):
        return f"quantise differs from the eager rounding ({int((got != want).sum())} of {n} indices)"
    if not torch.equal(yk.cpu(), y - deq[got]):
        return "quantise differs from its own indices in the error-feedback update (y - deq[index])"
    return None


def _check_inverse(device: torch.device, block: int, signs: torch.Tensor, bits: torch.Tensor, g: float,
                   gen: torch.Generator) -> Optional[str]:
    from .hadamard import fwht
    padded = signs.numel()
    sums = torch.randint(0, int(g) * 4 + 1, (padded,), generator=gen, dtype=torch.int32)
    out = torch.empty(padded - 3, device=device)
    inverse(sums.to(device), bits, out, block, 0.125, 3.0, sums_bound=int(g) * 4)  # as decode calls it
    z = fwht(sums.double(), block) * 0.125
    z.view(-1, block)[:, 0] -= 3.0
    ref = (z * signs.double())[: padded - 3]
    err = float((out.cpu().double() - ref).abs().max())
    if not err <= _SELF_CHECK_RTOL * float(ref.abs().max()):
        return f"inverse differs from the eager decode by {err:.3g}"
    return None


def _check_inverse_bits(device: torch.device, block: int, signs: torch.Tensor, bits: torch.Tensor, g: float,
                        gen: torch.Generator) -> Optional[str]:
    """The inverse against decode's float32 recipe, bit for bit (``thc.DECODE_EXACT_BELOW``:
    the exact transform of the integer sums, one product, one difference on each block's first
    value, the signs), with sums at THC's bound for 68 and for 200 workers (one TF32 product
    and the split); None when every bit agrees, else how many values differ."""
    from .hadamard import hadamard_matrix
    padded = signs.numel()
    for workers in (68, 200):
        bound = int(g) * workers
        sums = torch.randint(0, bound + 1, (padded,), generator=gen, dtype=torch.int32)
        scale, off0 = 0.375 / workers, 7.0
        out = torch.empty(padded, device=device)
        inverse(sums.to(device), bits, out, block, scale, off0, sums_bound=bound)
        h = hadamard_matrix(block, torch.float64, normalized=False)
        exact = sums.view(-1, block).double() @ h.T  # integers below 2**24: exact
        want = exact.float() * (scale / math.sqrt(block))
        want[:, 0] -= off0
        want = want.reshape(-1) * signs.float()
        differ = int((out.cpu().view(torch.int32) != want.view(torch.int32)).sum())
        if differ:
            return (f"its decode differs from the CPU implementations' by float32 rounding "
                    f"({differ} of {padded} values at {workers} workers' sums)")
    return None


def _check_fused(device: torch.device, block: int, bits: torch.Tensor, luts: Dict[str, torch.Tensor],
                 g: float, top: float, gen: torch.Generator) -> Optional[str]:
    """:func:`rotate_quantise` against :func:`rotate` then :func:`quantise` with the same seed."""
    from .packing import unpack_nibbles
    padded = 2 * block
    x = (torch.randn(padded - 3, generator=gen) * 4).to(device)
    offset, slope = luts["offset"].to(device), luts["slope"].to(device)
    y = torch.empty(padded, device=device)
    rotate(x, bits, None, y, block, torch.empty(2, device=device))
    two = torch.empty(block, dtype=torch.uint8, device=device)
    quantise(y, two, offset, slope, None, 12345, 2.0, g / 2.0, g, top)
    one = torch.empty(block, dtype=torch.uint8, device=device)
    rotate_quantise(x, bits, one, block, offset, slope, 12345, 2.0, g / 2.0, g, top)
    # the same float operations on the same values and the same draws: the same bytes
    if not torch.equal(one, two):
        got, want = unpack_nibbles(one.cpu(), padded), unpack_nibbles(two.cpu(), padded)
        return (f"rotate_quantise differs from rotate + quantise ({int((got != want).sum())} of {padded} "
                "indices)")
    return None
