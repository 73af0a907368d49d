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

Unbiased: given the rotation, ``E[decode] = R^-1 clamp(R x)``; with no clamping it is the mean.
"""
from __future__ import annotations

import math
import zlib
from typing import Any, Dict, Hashable, Optional, Sequence

import torch

from .base import (Codec, EncodedLanes, LaneOp, LaneStream, check_aggregated, check_finite_scalar,
                   check_gradient, float_from_max_code, float_to_max_code)
from .errors import CodecError
from .hadamard import fwht, random_signs
from .packing import pack_nibbles
from .thc_table import DEFAULT_GRANULARITY, DEFAULT_T, DEFAULT_TABLE, check_table

__all__ = ["DEFAULT_BLOCK", "ThcCodec", "ThcState", "quantise_two_stage"]

#: Hadamard block size (THC's public code uses 2**10).
DEFAULT_BLOCK = 1 << 10
_BITS = 4
_U32_MASK = (1 << 32) - 1
_SEED_MIX = 0x9E3779B1  # odd 32-bit constant (golden ratio) to spread (seed, key, rank)


class ThcState:
    """Per-bucket THC state.

    Attributes:
        residual: error-feedback residual in the rotated domain (padded length), or None.
        signs: cached rotation signs (padded length, on the gradient's device).
        rotation_seed: seed of this bucket's rotation (same on every worker).
        pending: rotated, compensated gradient between ``agreement`` and ``encode``.
        meta: layout of the last encoded gradient.
        generator: this worker's quantisation RNG (independent across workers).
    """

    __slots__ = ("residual", "signs", "rotation_seed", "pending", "meta", "generator")

    def __init__(self, rotation_seed: int) -> None:
        self.residual: Optional[torch.Tensor] = None
        self.signs: Optional[torch.Tensor] = None
        self.rotation_seed = rotation_seed
        self.pending: Optional[torch.Tensor] = None
        self.meta: Dict[str, Any] = {}
        self.generator: Optional[torch.Generator] = None


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

    def __init__(self, n_workers: int, rank: int = 0, seed: int = 0,
                 table: Sequence[int] = DEFAULT_TABLE, granularity: int = DEFAULT_GRANULARITY,
                 threshold: float = DEFAULT_T, block: int = DEFAULT_BLOCK,
                 error_feedback: bool = True, lut_lane_bits: int = 32) -> None:
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
        self.rank, self.seed = rank, seed
        self.granularity, self.threshold, self.block = granularity, float(threshold), block
        self.error_feedback = error_feedback
        self._luts: Dict[torch.device, Dict[str, torch.Tensor]] = {}
        self.log_config()

    # ----------------------------------------------------------------- helpers
    def lut(self) -> torch.Tensor:
        """The int32 table the controller installs in the switch's LUT-SUM stage."""
        return torch.tensor(self.table, dtype=torch.int32)

    def _device_luts(self, device: torch.device) -> Dict[str, torch.Tensor]:
        luts = self._luts.get(device)
        if luts is None:
            luts = {name: t.to(device) for name, t in _rounding_luts(self.table).items()}
            luts["int_levels"] = self.lut().to(device)
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

    def _scale(self, agreed: torch.Tensor, key: Hashable, padded: int) -> float:
        max_norm = float(float_from_max_code(agreed.reshape(-1)[:1].cpu())[0])
        check_finite_scalar(max_norm, key, "agreed")
        return math.sqrt(padded) / max_norm if max_norm > 0 else 1.0

    # ----------------------------------------------------------------- Codec API
    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """Rotate (and compensate) ``grad``; return ``[code(||y||)]`` for the MAX round."""
        x = check_gradient(grad)
        numel = x.numel()
        block, padded = self._layout(numel)
        state = self._state(key)
        if padded != numel:
            x = torch.cat([x, x.new_zeros(padded - numel)])
        y = fwht(x * self._signs(state, padded, x.device), block)
        if self.error_feedback and state.residual is not None:
            if state.residual.shape != y.shape:
                raise CodecError(f"bucket {key!r}: gradient has {numel} values but its error-feedback "
                                 f"state has {state.residual.numel()} (padded); call reset({key!r})")
            y += state.residual
        norm = torch.linalg.vector_norm(y).reshape(1)
        check_finite_scalar(float(norm), key, "local")
        state.pending = y
        state.meta = {"numel": numel, "shape": tuple(grad.shape), "dtype": grad.dtype,
                      "block": block, "padded": padded}
        return float_to_max_code(norm)

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """Quantise the pending rotated gradient with the agreed norm: one LUT-SUM stream."""
        state = self._state(key)
        if state.pending is None or state.meta.get("numel") != grad.numel():
            self.agreement(grad, key)
        y, meta = state.pending, dict(state.meta)
        state.pending = None
        scale = self._scale(agreed, key, meta["padded"])
        g, T = self.granularity, self.threshold
        u = y * (scale * g / (2.0 * T))
        u += g / 2.0
        u.clamp_(0.0, float(g))
        idx = self._quantise(u, state)
        if self.error_feedback:
            luts = self._device_luts(y.device)
            deq = torch.index_select(luts["levels"], 0, idx.to(torch.int32))
            deq -= g / 2.0
            deq *= (2.0 * T) / (g * scale)
            state.residual = y.sub_(deq)
        stream = LaneStream(LaneOp.LUTSUM, pack_nibbles(idx), count=meta["padded"],
                            lut=self._device_luts(y.device)["int_levels"], name="thc_indices")
        return EncodedLanes([stream], meta)

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
        y = sums.to(torch.float32) * (step / n)
        y -= (g / 2.0) * step
        state = self._state(key)
        x = fwht(y, meta["block"])
        x *= self._signs(state, meta["padded"], x.device)
        return x[:meta["numel"]].reshape(meta["shape"]).to(meta["dtype"])

    # ----------------------------------------------------------------- quantiser
    def _generator(self, state: ThcState, device: torch.device) -> torch.Generator:
        gen = state.generator
        if gen is None or gen.device != device:
            gen = torch.Generator(device=device)
            gen.manual_seed(_mix(state.rotation_seed, self.rank, 1))
            state.generator = gen
        return gen

    def _quantise(self, u: torch.Tensor, state: ThcState) -> torch.Tensor:
        """Unbiased rounding of ``u`` in [0, g] to table indices (uint8), one draw per value.

        With ``j = floor(u)`` and ``table[k] <= j < j + 1 <= table[k + 1]``, the index is
        ``floor(k + p + r)`` for ``p = (u - table[k]) / gap`` and ``r ~ U[0, 1)``: ``k + 1`` with
        probability ``p``. ``k + p = u * slope[j] + offset[j]`` from two tiny per-integer LUTs.
        """
        luts = self._device_luts(u.device)
        j = u.to(torch.int32)  # truncation == floor for u >= 0; j == g uses the last interval
        v = torch.index_select(luts["slope"], 0, j).mul_(u)
        v += torch.index_select(luts["offset"], 0, j)
        v += torch.rand(u.shape, generator=self._generator(state, u.device), device=u.device)
        v.clamp_(max=len(self.table) - 1)  # k + 1 + r may round up to k + 2 in float32
        return v.to(torch.uint8)  # truncation == floor for v >= 0


def _rounding_luts(table: Sequence[int]) -> Dict[str, torch.Tensor]:
    """Per-integer j in 0..g: ``slope = 1/gap``, ``offset = k - table[k]/gap`` of j's interval, and
    the float levels. For j == g the last interval is used (u == g gives index 2**b - 1)."""
    levels = torch.tensor(table, dtype=torch.float64)
    ints = torch.arange(int(table[-1]) + 1, dtype=torch.float64)
    k = (torch.searchsorted(levels, ints, right=True) - 1).clamp_(max=len(table) - 2)
    gap = levels[k + 1] - levels[k]
    return {"slope": (1.0 / gap).float(), "offset": (k - levels[k] / gap).float(),
            "levels": levels.float()}


def quantise_two_stage(u: torch.Tensor, table: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """THC's literal two-stage rounding (reference for tests): integer, then table level.

    Args:
        u: values in [0, table[-1]].
        table: increasing integer levels.
        generator: RNG for the two draws.

    Returns:
        int64 table indices.
    """
    levels = torch.tensor(table, dtype=torch.float32, device=u.device)
    low = u.floor()
    z = low + (torch.rand(u.shape, generator=generator, device=u.device) < (u - low))
    k = (torch.searchsorted(levels, z, right=True) - 1).clamp_(max=len(table) - 2)
    a, b = levels[k], levels[k + 1]
    up = torch.rand(u.shape, generator=generator, device=u.device) < (z - a) / (b - a)
    return k + up
