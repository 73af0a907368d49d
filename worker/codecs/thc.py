"""THC: randomized-Hadamard, table-quantised gradients that the switch sums through a lookup table.

Encode, per bucket (all steps on the gradient's device):

1. ``y = H D x`` -- blockwise randomized Hadamard transform with signs ``D`` from the shared seed
   (same on every worker), after padding ``x`` to a whole number of blocks; plus the error-feedback
   residual, kept in this rotated domain (the rotation of a bucket never changes, so
   ``R(x + e) = R x + R e`` and the residual needs no inverse transform).
2. Agreement: ``||y||`` as a MAX code; every worker uses ``N = max_i ||y_i||`` and the scale
   ``s = sqrt(D) / N`` so a coordinate of ``s * y`` is close to N(0, 1).
3. ``u = (clamp(s y, -T, T) + T) g / (2T)`` in [0, g], rounded without bias to one of the ``2**b``
   integer table levels (two-stage THC rounding; see :mod:`worker.codecs.thc_table` for why one
   draw reproduces it exactly), giving 4-bit indices, packed two per byte
   (:mod:`worker.codecs.packing`).
4. Error feedback: ``e = y - dequantised(own indices)`` (clamping error included).

The switch (LUT-SUM) maps each index to its table value and sums the values over the ``n``
workers. Decode: ``y_mean = (sum / n - g/2) * (2T/g) / s``, then ``x_mean = D H y_mean``.

Unbiased: given the rotation, ``E[decode] = R^-1 clamp(R x)``; with no clamping it is the mean
(up to the 16-bit resolution of the rounding draw: at most ``2**-17`` of a gap, see
:meth:`ThcCodec._rounded_levels`).

Speed (CPU, see docs/codecs.md "THC performance"): on CPU a fresh large tensor costs its page
faults, about as much as the arithmetic, so every step writes into reused buffers: scratch shared by
the codec's buckets (grown to the largest: ~26 bytes per coordinate), one rotated-gradient buffer
per bucket (plus the residual with error feedback), and decode's result, reused only once nobody
references it. The 4-bit indices are packed from whole floats (``16 a + b``), never
materialised as a byte per coordinate.

Decode is the same float32 operations in every implementation (eager, native, Triton), so
workers that run different ones (a GPU worker and a CPU worker, one with a compiler and one
without) decode the switch's sums to the same bits and DDP's replicas stay identical: the
unnormalised transform of the integer sums, exact while ``block * g * n < 2**24``
(:data:`DECODE_EXACT_BELOW`; every product and partial sum is then an integer float32 holds,
whatever order an implementation sums in), then one product by the float32 factor
``step / n / sqrt(B)``, then, on each block's first value, one difference with the float32
offset ``(g/2) step sqrt(B)`` (``H 1 = sqrt(B) e_0``), then the sign flips. Encode differs
between implementations by float rounding, which only changes which indices a worker sends.

``ThcCodec(compiled=True)`` (or ``HINA_THC_COMPILE=1``) swaps in native kernels built with g++:
a butterfly transform in cache with the sign flips, residual add and decode's affine map fused
in, and a one-pass quantiser; ~3x the eager throughput.

On CUDA tensors the codec uses the fused Triton kernels of :mod:`worker.codecs.thc_triton` when
Triton imports (it ships with CUDA builds of torch): one kernel per phase (rotate + norm,
quantise + pack + error feedback, inverse), three memory passes in place of the eager path's ~20.
``ThcCodec(triton=False)`` or ``HINA_THC_TRITON=0`` keeps the eager path; a kernel that fails to
build, or its self-check against the eager math at first use, logs one warning and the codec goes
on eagerly.
"""
from __future__ import annotations

import functools
import logging
import math
import os
import threading
import zlib
from typing import Any, Dict, Hashable, Optional, Sequence

import torch

from .base import (Codec, EncodedLanes, LaneOp, LaneStream, check_aggregated, check_finite_scalar,
                   check_gradient, float32_of, max_code_of, max_code_value)
from .errors import CodecError
from .hadamard import fwht_into, native_fwht_into, native_kernel, random_signs
from .thc_rounding import (native_quantiser, pack_floats_into, quantise_two_stage,
                           rounding_luts)
from .thc_table import DEFAULT_GRANULARITY, DEFAULT_T, DEFAULT_TABLE, check_table

__all__ = ["DECODE_EXACT_BELOW", "DEFAULT_BLOCK", "ThcCodec", "ThcState", "quantise_two_stage"]

#: Hadamard block size (THC's public code uses 2**10).
DEFAULT_BLOCK = 1 << 10
_BITS = 4
_U32_MASK = (1 << 32) - 1
_SEED_MIX = 0x9E3779B1  # odd 32-bit constant (golden ratio) to spread (seed, key, rank)
#: decode is exact, and the same bits in every implementation, while ``block * g * n`` (the
#: largest value the transform of a block of sums can reach) is below this: float32's integers
DECODE_EXACT_BELOW = 1 << 24
#: environment switch for the opt-in compiled (native) transform, see ``ThcCodec(compiled=...)``
COMPILE_ENV = "HINA_THC_COMPILE"
#: environment switch of the fused Triton kernels on CUDA ("0" turns them off), see ``ThcCodec(triton=...)``
TRITON_ENV = "HINA_THC_TRITON"
_log = logging.getLogger(__name__)


class ThcState:
    """Per-bucket THC state.

    Attributes:
        residual: error-feedback residual in the rotated domain (padded length), or None.
        signs: cached rotation signs (padded length, on the gradient's device).
        sign_bits: the same signs packed one bit each, for the Triton kernels (1/32 of the bytes).
        rotation_seed: seed of this bucket's rotation (same on every worker).
        pending: rotated, compensated gradient between ``agreement`` and ``encode``.
        meta: layout of the last encoded gradient.
        generator: this worker's quantisation RNG (independent across workers).
        spare: a free buffer of the padded length, reused for the next ``pending`` (saves the
            allocation and its page faults, which cost more than the arithmetic on CPU).
        pinned: the residual a :meth:`ThcCodec.snapshot` refers to: never recycled as ``spare``
            until the snapshot is released.
    """

    __slots__ = ("residual", "signs", "sign_bits", "rotation_seed", "pending", "meta", "generator", "spare",
                 "pinned")

    def __init__(self, rotation_seed: int) -> None:
        self.residual: Optional[torch.Tensor] = None
        self.signs: Optional[torch.Tensor] = None
        self.sign_bits: Optional[torch.Tensor] = None
        self.rotation_seed = rotation_seed
        self.pending: Optional[torch.Tensor] = None
        self.meta: Dict[str, Any] = {}
        self.generator: Optional[torch.Generator] = None
        self.spare: Optional[torch.Tensor] = None
        self.pinned: Optional[torch.Tensor] = None


class _ThcSnapshot:
    """What :meth:`ThcCodec.snapshot` keeps: the residual (by reference: pinned, never written
    while the snapshot lives) and the rounding RNG's state."""

    __slots__ = ("existed", "residual", "generator_device", "generator_state")

    def __init__(self, state: Optional[ThcState]) -> None:
        self.existed = state is not None
        self.residual = state.residual if state is not None else None
        gen = state.generator if state is not None else None
        self.generator_device = gen.device if gen is not None else None
        self.generator_state = gen.get_state() if gen is not None else None


def _mix(*values: int) -> int:
    h = 0
    for v in values:
        h = ((h ^ (v & _U32_MASK)) * _SEED_MIX + 1) & _U32_MASK
    return h


def _key_id(key: Hashable) -> int:
    return key if isinstance(key, int) else zlib.crc32(repr(key).encode())


class ThcCodec(Codec):
    """THC codec (randomized Hadamard + table quantisation + LUT-SUM lanes + error feedback).

    Args:
        n_workers: workers summed by the switch.
        rank: this worker's rank (only seeds its private rounding noise).
        seed: job seed shared by all workers (rotations).
        table: ``2**4`` increasing integer levels from 0 to ``granularity``; the switch's LUT.
        granularity: g, the largest level.
        threshold: clamp threshold T (normalised units).
        block: Hadamard block size, a power of two.
        error_feedback: keep the quantisation error and add it to the next gradient.
        lut_lane_bits: width of the switch's signed LUT-SUM lanes; ``n_workers * g`` must fit.
        compiled: opt-in native CPU kernels, built once with g++ (~1 s, then cached on disk): the
            transform (:func:`~worker.codecs.hadamard.native_fwht_into`, with the sign flips, the
            residual add and decode's affine map fused into it) and a one-pass quantiser
            (bit-identical to the eager one for the same rotated values). None (the default)
            reads ``HINA_THC_COMPILE=1``. When the kernels cannot be built, one warning is logged
            and the eager path is used. The transform sums in another order than the eager one
            (results within float32 rounding), so indices can differ from the eager path's at
            exact rounding boundaries; same statistics. Other devices use the eager path.
        triton: the fused Triton kernels (:mod:`~worker.codecs.thc_triton`). None (the default):
            on CUDA tensors whenever Triton imports, unless ``HINA_THC_TRITON=0``; False: never;
            True: also on CPU tensors when Triton's interpreter is on (``TRITON_INTERPRET=1``,
            for tests). Blocks outside 256..2048 values (buckets of <= 128 values, blocks of 4096)
            stay eager. Rotations and statistics are the eager path's; the rounding noise comes
            from in-kernel Philox instead of the torch generator. The first use per device and
            block checks the kernels against the eager math
            (:func:`~worker.codecs.thc_triton.self_check`). Implementations may be mixed within
            a job (``last_kernels`` says which ran): they decode to the same bits (see the
            module docstring) while ``block * g * n < DECODE_EXACT_BELOW``.

    .. warning::
        DDP rebuilds its buckets after the first iteration; a bucket key whose size changes while
        error feedback holds a residual is refused (``CodecError``): call ``reset(key)`` (or
        ``reset()``) after the rebuild, as stateful hooks such as PowerSGD do.

    Example::
        >>> from worker.codecs import ThcCodec, reference_agree, reference_aggregate
        >>> codecs = [ThcCodec(2, rank=r) for r in range(2)]
        >>> grads = [torch.randn(3000) for _ in range(2)]
        >>> agreed = reference_agree([c.agreement(g) for c, g in zip(codecs, grads)])
        >>> lanes = [c.encode(g, agreed) for c, g in zip(codecs, grads)]
        >>> mean = codecs[0].decode(reference_aggregate(lanes), agreed, meta=lanes[0].meta)
        >>> mean.shape
        torch.Size([3000])
    """

    name = "thc"
    #: How the Triton kernels encode without error feedback (with it, always "two-pass"):
    #: "two-pass": the agreement's rotation writes y, encode's quantiser reads it (8.125 + 4.5
    #: bytes per coordinate); "fused": the agreement's rotation only sums squares and encode
    #: rotates again into the rounding (:func:`~worker.codecs.thc_triton.rotate_quantise`;
    #: 4.125 + 4.625 bytes, the rotation computed twice, no y buffer); "fused-xnorm": as
    #: "fused", with the norm taken from x itself (``||H D x|| = ||x||``, a plain reduction,
    #: no rotation). Chosen by ``python bench/bench_codecs.py --device cuda`` (docs/codecs.md).
    ENCODE_PLANS = ("two-pass", "fused", "fused-xnorm")
    encode_plan = "two-pass"
    #: Per-bucket state only (residual, rotation, rounding RNG: ``states[key]``); the scratch
    #: buffers shared by the buckets are used under ``_lock`` and hold nothing between calls.
    concurrent_keys = True

    def __init__(self, n_workers: int, rank: int = 0, seed: int = 0,
                 table: Sequence[int] = DEFAULT_TABLE, granularity: int = DEFAULT_GRANULARITY,
                 threshold: float = DEFAULT_T, block: int = DEFAULT_BLOCK,
                 error_feedback: bool = True, lut_lane_bits: int = 32,
                 compiled: Optional[bool] = None, triton: Optional[bool] = None) -> None:
        super().__init__(n_workers)
        if not isinstance(rank, int) or not 0 <= rank < n_workers:
            raise ValueError(f"rank={rank!r}: must be an int in [0, n_workers={n_workers})")
        self.table = check_table(table, _BITS, granularity)
        if not threshold > 0 or not math.isfinite(threshold):
            raise ValueError(f"threshold={threshold!r}: must be a finite float > 0")
        if not isinstance(block, int) or block < 1 or block & (block - 1):
            raise ValueError(f"block={block!r}: must be a power of two")
        if n_workers * granularity >= 1 << (lut_lane_bits - 1):
            raise ValueError(f"n_workers * granularity = {n_workers * granularity}: must be < "
                             f"2**(lut_lane_bits - 1) = {1 << (lut_lane_bits - 1)} so LUT sums fit "
                             "the switch's signed lanes")
        if block * granularity * n_workers >= DECODE_EXACT_BELOW:
            _log.warning("THC with %d workers, g = %d and %d-value blocks: the decode's transform can reach "
                         "%d >= 2**24, beyond float32's integers, so implementations (eager, native, "
                         "Triton) no longer decode to the same bits; run one implementation on every worker",
                         n_workers, granularity, block, block * granularity * n_workers)
        self.rank, self.seed = rank, seed
        self.granularity, self.threshold, self.block = granularity, float(threshold), block
        self.error_feedback = error_feedback
        if compiled is None:
            compiled = os.environ.get(COMPILE_ENV, "") == "1"
        self._native_quantise = native_quantiser() if compiled else None
        self.compiled = bool(compiled) and native_kernel() is not None and self._native_quantise is not None
        if triton is None:
            triton = None if os.environ.get(TRITON_ENV, "") != "0" else False
        #: "auto" (CUDA tensors), "on" (also interpreted CPU tensors) or "off"
        self.triton = {None: "auto", True: "on", False: "off"}[triton]
        #: which implementation ran last, per phase ("eager", "native" or "triton")
        self.last_kernels: Dict[str, str] = {}
        self._luts: Dict[torch.device, Dict[str, torch.Tensor]] = {}
        # (device, block, HINA_THC_PRECISION) the Triton kernels were checked for, see _kernels
        self._kernels_taken: set = set()
        # scratch buffers shared by all buckets (grown to the largest), see _buf
        self._scratch: Dict[tuple, torch.Tensor] = {}
        self._lock = threading.Lock()
        self._last_output: Optional[torch.Tensor] = None
        self.log_config()

    # ----------------------------------------------------------------- helpers
    def lut(self) -> torch.Tensor:
        """The int32 table the controller installs in the switch's LUT-SUM stage."""
        return torch.tensor(self.table, dtype=torch.int32)

    def _device_luts(self, device: torch.device) -> Dict[str, torch.Tensor]:
        luts = self._luts.get(device)
        if luts is None:
            luts = {name: t.to(device) for name, t in rounding_luts(self.table).items()}
            luts["offset_slope"] = torch.stack([luts["offset"], luts["slope"]], 1).view(torch.int64).view(-1)
            luts["int_levels"] = self.lut().to(device)
            luts["half_g"] = torch.tensor(self.granularity / 2.0, dtype=torch.float32, device=device)
            self._luts[device] = luts
        return luts

    def _state(self, key: Hashable) -> ThcState:
        state = self.states.get(key)
        if state is None:
            state = ThcState(_mix(self.seed, _key_id(key)))
            self.states[key] = state
        return state

    def _layout(self, numel: int) -> tuple:
        block = min(self.block, 1 << max(0, (numel - 1).bit_length())) if numel else 1
        padded = -(-numel // block) * block
        return block, padded

    def _signs(self, state: ThcState, padded: int, device: torch.device) -> torch.Tensor:
        s = state.signs
        if s is None or s.numel() != padded or s.device != device:
            s = random_signs(state.rotation_seed, padded, torch.float32, device)
            state.signs = s
        return s

    @staticmethod
    def _sign_bits(kernels: Any, state: ThcState, padded: int, device: torch.device) -> torch.Tensor:
        s = state.sign_bits
        if s is None or s.numel() * 8 != padded or s.device != device:
            s = kernels.pack_sign_bits(random_signs(state.rotation_seed, padded, torch.int8, device))
            state.sign_bits = s
        return s

    def _kernels(self, t: torch.Tensor, block: int) -> Optional[Any]:
        """The Triton kernel module when this call should use it, else None."""
        if self.triton == "off" or (self.triton == "auto" and not t.is_cuda):
            return None
        kernels = _triton_kernels()
        # asked at every phase of every round trip: a device, block and precision taken once
        # is taken from then on (a failure turns the kernels off, so only success is kept)
        key = (t.device, block, os.environ.get(kernels.PRECISION_ENV, "")) if kernels is not None else None
        if key in self._kernels_taken:
            return kernels
        try:
            if kernels is None or not kernels.supported(t, block):
                return None
        except ValueError as exc:  # e.g. HINA_THC_PRECISION names a precision the GPU lacks
            self._kernel_failed(exc)
            return None
        problem = _verify_kernels(kernels, t.device, block, self.table)
        if problem is not None:
            self._kernel_failed(RuntimeError(problem))
            return None
        self._kernels_taken.add(key)
        return kernels

    def _kernel_failed(self, exc: Exception) -> None:
        """A Triton kernel failed to build, launch or its self-check: warn once, use the eager
        path from now on."""
        self.triton = "off"
        _log.warning("THC Triton kernels failed (%s: %s); using the eager path", type(exc).__name__,
                     str(exc)[:400])

    def _buf(self, name: str, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """First ``n`` elements of a reusable scratch buffer (call with ``self._lock`` held)."""
        key = (name, dtype, device)
        buf = self._scratch.get(key)
        if buf is None or buf.numel() < n:
            buf = torch.empty(n, dtype=dtype, device=device)
            self._scratch[key] = buf
        return buf[:n]

    def _output_buffer(self, numel: int, device: torch.device) -> torch.Tensor:
        """A flat float32 tensor for decode's result: the previous one when nothing outside this
        codec still references its storage (the caller dropped the result, e.g. after copying it
        into the gradients), else a new one. Reuse saves the page faults of a fresh allocation,
        which cost about as much as the whole transform for large buckets on CPU. The caller only
        ever gets views, so a held result always shows in the storage's use count."""
        buf = self._last_output
        if not (buf is not None and buf.numel() == numel and buf.device == device
                and _storage_unshared(buf)):
            buf = torch.empty(numel, dtype=torch.float32, device=device)
            self._last_output = buf
        # a view, never ``buf`` itself: the caller's reference counts in the storage's use count
        # from this moment, so a decode of another bucket (another lane's thread, once this
        # call has left the lock) cannot take the buffer while this result is still being made
        return buf.view(numel)

    @staticmethod
    def _take_spare(state: ThcState, padded: int, device: torch.device) -> torch.Tensor:
        buf = state.spare
        state.spare = None
        if buf is None or buf.numel() != padded or buf.device != device:
            buf = torch.empty(padded, dtype=torch.float32, device=device)
        return buf

    def _scale(self, agreed: torch.Tensor, key: Hashable, padded: int) -> float:
        max_norm = max_code_value(agreed)
        check_finite_scalar(max_norm, key, "agreed")
        return math.sqrt(padded) / max_norm if max_norm > 0 else 1.0

    # ----------------------------------------------------------------- Codec API
    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """Rotate (and compensate) ``grad``; return ``[code(||y||)]`` for the MAX round."""
        flat = check_gradient(grad, float32=False)
        numel = flat.numel()
        block, padded = self._layout(numel)
        state = self._state(key)
        if (self.error_feedback and state.residual is not None
                and state.residual.numel() != padded):
            raise CodecError(f"bucket {key!r}: gradient has {numel} values but its error-feedback "
                             f"state has {state.residual.numel()} (padded); call reset({key!r})")
        if state.pending is not None:  # agreement again without encode: recycle the buffer
            if not state.meta.get("fused"):  # (a fused agreement holds the caller's gradient)
                state.spare = state.pending
            state.pending = None
        residual = state.residual if self.error_feedback else None
        norm = y = None
        fused = False
        if self.encode_plan not in self.ENCODE_PLANS:
            raise ValueError(f"encode_plan={self.encode_plan!r}: one of {self.ENCODE_PLANS}")
        kernels = self._kernels(flat, block)
        if kernels is not None:  # one pass: y = H (D pad(x)) + e and per-block sums of squares
            try:
                # float16/bfloat16 gradients are read as they are (no float32 copy in memory)
                x = flat.contiguous() if flat.dtype in kernels.INPUT_DTYPES else flat.to(torch.float32)
                # without error feedback a fused plan keeps no y: encode rotates x again, into
                # its rounding, so y never goes through memory (see ENCODE_PLANS)
                fused = not self.error_feedback and self.encode_plan != "two-pass"
                y = None if fused else self._take_spare(state, padded, flat.device)
                if fused and self.encode_plan == "fused-xnorm":  # ||H D x|| = ||x||
                    norm = float(torch.linalg.vector_norm(x, dtype=torch.float32))
                    self.last_kernels["agreement"] = "torch"
                else:
                    with self._lock:
                        partial = self._buf("partial", padded // block, torch.float32, flat.device)
                        parts = kernels.rotate(x, self._sign_bits(kernels, state, padded, flat.device), residual,
                                               y, block, partial, padded=padded)
                        # ||y|| in float64 on the host: the sum is the one value read back
                        norm = math.sqrt(float(parts.sum(dtype=torch.float64)))
                    self.last_kernels["agreement"] = "triton"
                if fused:
                    y = x
            except Exception as exc:  # noqa: BLE001 - build/launch failure: eager from now on
                self._kernel_failed(exc)
                norm, fused = None, False
        if norm is None:
            y = self._take_spare(state, padded, flat.device)
            norm = float(self._eager_rotate(flat.to(torch.float32), y, state, residual, block, padded))
        # the one host synchronisation of the round trip (the value goes into a packet anyway);
        # the code is made on the CPU, so encode and decode read it without another
        norm32 = float32_of(norm)
        check_finite_scalar(norm32, key, "local")
        state.pending = y
        state.meta = {"numel": numel, "shape": tuple(grad.shape), "dtype": grad.dtype,
                      "block": block, "padded": padded, "fused": fused}
        return max_code_of(norm32)

    def _eager_rotate(self, x: torch.Tensor, y: torch.Tensor, state: ThcState, residual: Optional[torch.Tensor],
                      block: int, padded: int) -> torch.Tensor:
        """``y = H (D pad(x)) + residual`` (native or eager transform); returns ``[||y||]``."""
        numel = x.numel()
        signs = self._signs(state, padded, x.device)
        fused = False  # the native transform also applied the signs and added the residual
        with self._lock:
            if self.compiled and numel == padded:  # one pass: y = H (D x) + e
                fused = native_fwht_into(x, block, y, pre=signs, add=residual) is not None
            if not fused:
                a = self._buf("f0", padded, torch.float32, x.device)
                torch.mul(x, signs[:numel], out=a[:numel])
                a[numel:].zero_()
                fused = self.compiled and native_fwht_into(a, block, y, add=residual) is not None
                if not fused:
                    fwht_into(a, block, y, self._buf("f1", padded, torch.float32, x.device))
        if residual is not None and not fused:
            y += residual
        self.last_kernels["agreement"] = "native" if self.compiled and fused else "eager"
        # the eager norm on both paths (a norm summed otherwise moves the scale by ulps, and with
        # it ~1e-5 of the indices)
        return torch.linalg.vector_norm(y).reshape(1)

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """Quantise the pending rotated gradient with the agreed norm: one LUT-SUM stream."""
        state = self._state(key)
        if state.pending is None or state.meta.get("numel") != grad.numel():
            self.agreement(grad, key)
        y, meta = state.pending, dict(state.meta)
        state.pending = None
        scale = self._scale(agreed, key, meta["padded"])
        padded, device = meta["padded"], y.device
        packed = torch.empty((padded + 1) // 2, dtype=torch.uint8, device=device)
        if meta.pop("fused", False):
            # y is the gradient agreement() read: rotate it again, straight into the rounding
            kernels = self._kernels(y, meta["block"])
            if kernels is not None:
                try:
                    self._triton_encode(kernels, y, packed, state, scale, fused_block=meta["block"])
                    self.last_kernels["encode"] = "triton"
                    return self._lanes(packed, padded, meta)
                except Exception as exc:  # noqa: BLE001 - build/launch failure: eager from now on
                    self._kernel_failed(exc)
            x, y = y, self._take_spare(state, padded, device)
            self._eager_rotate(x.to(torch.float32), y, state, None, meta["block"], padded)
        self.last_kernels["encode"] = self._quantise_into(y, packed, state, scale, meta["block"])
        if self.error_feedback:
            old, state.residual = state.residual, y
            # the old residual is the next pending buffer, unless a snapshot still refers to it
            state.spare = old if old is not state.pinned else None
        else:
            state.spare = y
        return self._lanes(packed, padded, meta)

    def _lanes(self, packed: torch.Tensor, padded: int, meta: Dict[str, Any]) -> EncodedLanes:
        stream = LaneStream(LaneOp.LUTSUM, packed, count=padded,
                            lut=self._device_luts(packed.device)["int_levels"], name="thc_indices")
        return EncodedLanes([stream], meta)

    def _quantise_into(self, y: torch.Tensor, packed: torch.Tensor, state: ThcState, scale: float,
                       block: int) -> str:
        """Quantise ``y`` into ``packed`` (and update it for error feedback) with the fastest
        implementation that applies; returns its name."""
        kernels = self._kernels(y, block)
        if kernels is not None:
            try:
                self._triton_encode(kernels, y, packed, state, scale)
                return "triton"
            except Exception as exc:  # noqa: BLE001 - build/launch failure: eager from now on
                self._kernel_failed(exc)
        if self.compiled and y.device.type == "cpu" and y.is_contiguous():
            self._native_encode(y, packed, state, scale)
            return "native"
        self._eager_encode(y, packed, state, scale)
        return "eager"

    def _dequantised_levels(self, device: torch.device, scale: float) -> torch.Tensor:
        """Each index's value in rotated units, ``(level - g/2) 2T / (g s)`` (error feedback)."""
        g, T = self.granularity, self.threshold
        return ((self._device_luts(device)["levels"] - g / 2.0) * ((2.0 * T) / (g * scale))).contiguous()

    def _triton_encode(self, kernels: Any, y: torch.Tensor, packed: torch.Tensor, state: ThcState,
                       scale: float, fused_block: int = 0) -> None:
        """:meth:`_eager_encode` as one Triton kernel; the noise is Philox keyed by a seed drawn
        from this bucket's (CPU) generator, so a run is reproducible and workers independent.
        ``fused_block``: ``y`` is the gradient itself, rotated in the same kernel (no error
        feedback; the same indices as the rotation kernel's ``y`` would give)."""
        g, T = self.granularity, self.threshold
        luts = self._device_luts(y.device)
        seed = int(torch.randint(0, 1 << 62, (1,), generator=self._generator(state, torch.device("cpu"))))
        args = (luts["offset"], luts["slope"], seed, scale * g / (2.0 * T), g / 2.0, float(g),
                float(len(self.table) - 1))
        if fused_block:
            bits = self._sign_bits(kernels, state, 2 * packed.numel(), y.device)
            kernels.rotate_quantise(y, bits, packed, fused_block, *args)
            return
        deq = self._dequantised_levels(y.device, scale) if self.error_feedback else None
        kernels.quantise(y, packed, args[0], args[1], deq, *args[2:])

    def _native_encode(self, y: torch.Tensor, packed: torch.Tensor, state: ThcState, scale: float) -> None:
        """The opt-in quantiser: :meth:`_eager_encode` in one pass, bit-identical (same RNG words,
        same float operations): writes ``packed`` and, with error feedback, subtracts the
        dequantised values from ``y``."""
        g, T, n = self.granularity, self.threshold, y.numel()
        luts = self._device_luts(y.device)
        deq = self._dequantised_levels(y.device, scale) if self.error_feedback else None
        with self._lock:
            words = self._buf("i64", -(-n // 4), torch.int64, y.device)
            words.random_(-(1 << 63), None, generator=self._generator(state, y.device))
            self._native_quantise(y.data_ptr(), words.data_ptr(), n, scale * g / (2.0 * T), g / 2.0, float(g),
                                  float(len(self.table) - 1), luts["offset"].data_ptr(),
                                  luts["slope"].data_ptr(), luts["offset"].numel(),
                                  deq.data_ptr() if deq is not None else None, packed.data_ptr())

    def _eager_encode(self, y: torch.Tensor, packed: torch.Tensor, state: ThcState, scale: float) -> None:
        """Quantise ``y`` (rotated, compensated) into ``packed``; error feedback: ``y -= deq``."""
        g, T = self.granularity, self.threshold
        padded, device = y.numel(), y.device
        with self._lock:
            u = self._buf("f0", padded, torch.float32, device)
            torch.add(self._device_luts(device)["half_g"], y, alpha=scale * g / (2.0 * T), out=u)
            u.clamp_(0.0, float(g))
            v = self._rounded_levels(u, state)
            pack_floats_into(v, packed, self._buf("f1", (padded + 1) // 2, torch.float32, device))
            if self.error_feedback:
                # dequantised value of each index, straight in y units
                deq_levels = self._dequantised_levels(device, scale)
                j = self._buf("i0", padded, torch.int32, device).copy_(v)
                deq = torch.index_select(deq_levels, 0, j, out=self._buf("f1", padded, torch.float32, device))
                y.sub_(deq)

    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        """Mean gradient from the per-coordinate sums of table values (int lanes)."""
        meta = meta if meta is not None else self._state(key).meta
        if not meta:
            raise CodecError(f"bucket {key!r}: no layout; pass the meta returned with encode()")
        int_dtypes = (torch.int16, torch.int32, torch.int64)
        check_aggregated(aggregated, [(meta["padded"], int_dtypes)], self.name)
        sums = aggregated[0]
        scale = self._scale(agreed, key, meta["padded"])
        g, T, n = self.granularity, self.threshold, self.n_workers
        step = (2.0 * T) / (g * scale)
        padded, numel, block = meta["padded"], meta["numel"], meta["block"]
        # decode's two constants, the same doubles for every implementation (each rounds them
        # to float32 once; the native and Triton wrappers divide per_sum by sqrt(B) as below)
        per_sum, offset0 = step / n, (g / 2.0) * step * math.sqrt(block)
        device = sums.device
        state = self._state(key)
        kernels = self._kernels(sums, block)
        if kernels is not None:  # one pass: out = D (H sums * step/n - (g/2) step sqrt(B) e_0)
            try:
                with self._lock:
                    out = self._output_buffer(numel, device)
                    bits = self._sign_bits(kernels, state, padded, device)
                    # each worker's table value is in [0, g]: a sum is at most g n
                    kernels.inverse(sums.contiguous(), bits, out, block, per_sum, offset0,
                                    sums_bound=int(g) * n)
                    self.last_kernels["decode"] = "triton"
                    return out.view(meta["shape"]).to(meta["dtype"])
            except Exception as exc:  # noqa: BLE001
                self._kernel_failed(exc)
        signs = self._signs(state, padded, device)
        self.last_kernels["decode"] = "eager"
        with self._lock:
            out = self._output_buffer(numel, device)
            # y = sums * step/n - (g/2) step. H is linear and H 1 = sqrt(B) e_0 per block, so the
            # offset goes onto one value per block. Every implementation (this one, the native
            # kernel, the Triton kernel) computes the same float32 operations on the same
            # values (the module docstring): so that workers decode alike.
            if self.compiled and padded:
                # one pass: out = D (H sums * step/n - (g/2) step sqrt(B) e_0), int32 read as is
                src = sums if sums.dtype == torch.int32 and sums.is_contiguous() else \
                    self._buf("f0", padded, torch.float32, device).copy_(sums)
                z = out if padded == numel else self._buf("f2", padded, torch.float32, device)
                if native_fwht_into(src, block, z, scale=per_sum, post=signs, offset0=offset0) is not None:
                    self.last_kernels["decode"] = "native"
                    if z is not out:
                        out.copy_(z[:numel])
                    return out.view(meta["shape"]).to(meta["dtype"])
            # unpadded: transform straight into the result (less memory touched)
            z = out if padded == numel else self._buf("f2", padded, torch.float32, device)
            # the unnormalised transform of the integer sums: exact (DECODE_EXACT_BELOW); the
            # factor is one float32 product after it, not folded into the transform's matrix
            # (that rounds every partial sum, and differently from the other implementations)
            if _float32_matmuls_exact(device):
                s = self._buf("f0", padded, torch.float32, device).copy_(sums)
                fwht_into(s, block, z, self._buf("f1", padded, torch.float32, device), normalized=False)
            else:  # TF32 or bfloat16 products allowed for float32: float64 GEMMs stay exact
                s = self._buf("d0", padded, torch.float64, device).copy_(sums)
                t = self._buf("d1", padded, torch.float64, device)
                fwht_into(s, block, t, self._buf("d2", padded, torch.float64, device), normalized=False)
                z.copy_(t)  # integers below 2**24: exact in float32
            z.mul_(per_sum / math.sqrt(block))
            if padded:
                z.view(-1, block)[:, 0] -= offset0
            torch.mul(z[:numel], signs[:numel], out=out)
        return out.view(meta["shape"]).to(meta["dtype"])

    # ----------------------------------------------------------------- snapshots
    def snapshot(self, key: Hashable = 0) -> _ThcSnapshot:
        """Bucket ``key``'s residual (kept by reference, no copy: it is pinned) and rounding RNG,
        for :meth:`restore` (see :meth:`Codec.snapshot`)."""
        state = self.states.get(key)
        if state is not None:
            state.pinned = state.residual
        return _ThcSnapshot(state)

    def restore(self, key: Hashable, snapshot: _ThcSnapshot) -> None:
        """Bucket ``key`` as :meth:`snapshot` found it: residual, RNG, nothing pending."""
        if not snapshot.existed:
            self.states.pop(key, None)
            return
        state = self._state(key)
        state.residual = state.pinned = snapshot.residual
        state.pending = None
        if snapshot.generator_state is None:
            state.generator = None           # drawn again from its seed, as it first was
        else:
            gen = state.generator
            if gen is None or gen.device != snapshot.generator_device:
                gen = state.generator = torch.Generator(device=snapshot.generator_device)
            gen.set_state(snapshot.generator_state)

    def release(self, key: Hashable, snapshot: _ThcSnapshot) -> None:
        """Unpin the snapshot's residual; it becomes the next pending buffer when it is free."""
        state = self.states.get(key)
        if state is None or state.pinned is not snapshot.residual:
            return
        state.pinned = None
        old = snapshot.residual
        if old is not None and old is not state.residual and state.spare is None:
            state.spare = old

    # ----------------------------------------------------------------- quantiser
    def _generator(self, state: ThcState, device: torch.device) -> torch.Generator:
        gen = state.generator
        if gen is None or gen.device != device:
            gen = torch.Generator(device=device)
            gen.manual_seed(_mix(state.rotation_seed, self.rank, 1))
            state.generator = gen
        return gen

    def _quantise(self, u: torch.Tensor, state: ThcState) -> torch.Tensor:
        """Unbiased rounding of ``u`` in [0, g] to table indices (a new uint8 tensor)."""
        with self._lock:
            return self._rounded_levels(u.reshape(-1), state).to(torch.uint8).view(u.shape)

    def _rounded_levels(self, u: torch.Tensor, state: ThcState) -> torch.Tensor:
        """Unbiased rounding of flat ``u`` in [0, g] to table indices, one draw per value.

        With ``j = floor(u)`` and ``table[k] <= j < j + 1 <= table[k + 1]``, the index is
        ``floor(k + p + r)`` for ``p = (u - table[k]) / gap`` and ``r ~ U[0, 1)``: ``k + 1`` with
        probability ``p``. ``k + p = u * slope[j] + offset[j]`` from two tiny per-integer LUTs.

        ``r`` has 16 random bits: ``r = (m + 1/2) / 2**16`` with ``m`` uniform on 0..2**16-1 (four
        per 64-bit draw, read as int16 ``m - 2**15``; the ``1/2 + 2**-17`` is in the offsets), so
        ``P(k + 1) = p`` within ``2**-17`` and the bias of a coordinate is at most ``2**-17`` of the
        gap between its two levels (``3 * 2**-17`` table units for the default table, against a
        quantisation noise of ~0.63 table units^2).

        Returns the indices as whole float32 values in a scratch buffer (call with ``self._lock``
        held).
        """
        n, device = u.numel(), u.device
        luts = self._device_luts(device)
        j = self._buf("i0", n, torch.int32, device).copy_(u)  # truncation == floor for u >= 0
        # one gather of (offset, slope) float32 pairs stored as int64: cheaper than two gathers
        pairs = torch.index_select(luts["offset_slope"], 0, j, out=self._buf("pairs", n, torch.int64, device))
        pairs = pairs.view(torch.float32).view(n, 2)
        v = torch.addcmul(pairs[:, 0], pairs[:, 1], u, out=self._buf("f2", n, torch.float32, device))
        words = self._buf("i64", -(-n // 4), torch.int64, device)
        words.random_(-(1 << 63), None, generator=self._generator(state, device))
        r = self._buf("f1", n, torch.float32, device).copy_(words.view(torch.int16)[:n])  # m - 2**15
        v.add_(r, alpha=2.0 ** -16)
        v.clamp_(max=len(self.table) - 1)  # k + 1 + r may round up to k + 2 in float32
        return v.floor_()


_TRITON_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def _triton_kernels() -> Optional[Any]:
    """:mod:`worker.codecs.thc_triton` (imported on first use: Triton's import takes a second),
    or None when Triton is not installed."""
    from . import thc_triton
    return thc_triton if thc_triton.AVAILABLE else None


#: (device, block, table) -> None (the kernels agree with the eager math there) or what differed
_KERNELS_VERIFIED: Dict[tuple, Optional[str]] = {}


def _float32_matmuls_exact(device: torch.device) -> bool:
    """Whether float32 GEMMs on ``device`` multiply in float32: not when the process allowed
    faster internal precision (``torch.set_float32_matmul_precision("high"/"medium")``, common
    in GPU training scripts: TF32 on CUDA, bfloat16 in oneDNN on CPUs that have it; or
    ``torch.backends.cuda.matmul.allow_tf32``), where a sum of integers is no longer exact."""
    if torch.get_float32_matmul_precision() != "highest":
        return False
    return not (device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32)


def _verify_kernels(kernels: Any, device: torch.device, block: int, table: Sequence[int]) -> Optional[str]:
    """:func:`~worker.codecs.thc_triton.self_check`, once per (device, block, table) and process:
    None when the kernels agree with the eager math, else what differed."""
    key = (device, block, tuple(table), kernels.launch_config(device, block)[0])
    with _TRITON_LOCK:
        if key in _KERNELS_VERIFIED:
            return _KERNELS_VERIFIED[key]
    problem = kernels.self_check(device, block, rounding_luts(table), float(table[-1]), float(len(table) - 1))
    with _TRITON_LOCK:
        _KERNELS_VERIFIED[key] = problem
    return problem


def _storage_use_count(t: torch.Tensor) -> int:
    return torch._C._storage_Use_Count(t.untyped_storage()._cdata)


try:  # use count of a storage nobody else references (the query itself may hold one)
    _ALONE_USE_COUNT: Optional[int] = _storage_use_count(torch.empty(1))
except Exception:  # noqa: BLE001 - private API missing or changed: never reuse
    _ALONE_USE_COUNT = None


def _storage_unshared(t: torch.Tensor) -> bool:
    """True when only ``t`` (held by this codec) references its storage."""
    if _ALONE_USE_COUNT is None:
        return False
    try:
        return _storage_use_count(t) == _ALONE_USE_COUNT
    except Exception:  # noqa: BLE001
        return False
