"""The codec interface shared by the transport and the DDP comm hook.

A codec turns one flat gradient bucket into *lane streams* whose element-wise switch operation
(SUM, LUT-SUM, MAX or OR over the ``n`` workers) decodes to the mean of the workers' gradients.
One step of one bucket, for every worker::

    agree = codec.agreement(grad, key)          # 1. small uint32 values, MAX over workers
    agreed = <switch MAX or any all-reduce MAX>(agree)
    lanes = codec.encode(grad, agreed, key)     # 2. EncodedLanes: streams with their op
    aggregated = [<switch op>(s.data) for s in lanes.streams]
    while (more := codec.followup(aggregated, agreed, key, lanes.meta)) is not None:
        lanes = more                            # 2b. multi-round codecs only (Sketched SGD):
        aggregated = [<switch op>(s.data) for s in lanes.streams]   # further rounds
    mean = codec.decode(aggregated, agreed, key, lanes.meta)   # 3. same shape/dtype as grad

A codec of one round never overrides :meth:`Codec.followup` (it returns None). A codec of several
rounds returns the next round's :class:`EncodedLanes` from it, computed from the previous round's
aggregated streams (which every worker receives identically, so every worker can derive the same
next round without sending anything else); ``decode`` gets the last round's streams and meta.

Wire dtypes (what the packetizer copies, element by element, into the packet):

============  ====================================  ==========================================
op            worker sends                          switch returns (what ``decode`` takes)
============  ====================================  ==========================================
``SUM``       int32 fixed point                     int32 sum (overflow is flagged by switch)
``BLOCKSUM``  int32 fixed point, nonzero blocks only  int32 sum (as SUM; worker.transport sends
              (block-sparse rounds)                 it block-sparse, docs/protocol.md)
``LUTSUM``    uint8, two 4-bit table indices/byte   int32 per coordinate: sum of ``lut[idx]``
              (see :mod:`worker.codecs.packing`)
``MAX``       uint32 (monotone codes)               uint32 max
``OR``        uint32 bitmap words                   uint32 or
============  ====================================  ==========================================

Codecs keep per-bucket state (error feedback, momentum, the work between ``agreement`` and
``encode``) in ``codec.states[key]``; ``key`` is the bucket index (as in torch's PowerSGD hook) or
any hashable tensor id. An all-reduce that fails part-way (the transport gave up, or the job
moved to a new generation) may already have changed it; :meth:`Codec.snapshot` before the call
and :meth:`Codec.restore` after the failure put back exactly what a call changes (residuals,
momentum, step counters, rounding RNGs), so a retry encodes as a single clean call would
(``worker.agent.allreduce_following``), and a bucket that falls back to fp32 leaves the codec as
it was (``worker.ddp_hook``). Everything stays on the gradient's device; the only host transfers are
the agreement values (a few words) and whatever the packetizer copies.

:func:`reference_aggregate` is the switch, in torch, for tests and loopback runs;
:func:`reference_allreduce` drives a list of codecs (one per worker) through every round with it.
"""
from __future__ import annotations

import abc
import copy
import enum
import logging
import math
import struct
from dataclasses import dataclass, field
from typing import Any, Dict, Hashable, List, Optional, Sequence

import torch

from .errors import CodecError, NonFiniteGradientError

_F32, _U32 = struct.Struct("<f"), struct.Struct("<I")  # one float32 and its bits, for the scalar codes

__all__ = [
    "Codec",
    "EncodedLanes",
    "LaneOp",
    "LaneOverflowError",
    "LaneStream",
    "float_from_max_code",
    "float_to_max_code",
    "MAX_ROUNDS",
    "reference_agree",
    "reference_aggregate",
    "reference_allreduce",
    "to_u32_lanes",
]

_log = logging.getLogger(__name__)
_INT32_MIN = -(1 << 31)
_INT32_MAX = (1 << 31) - 1
_U32_MASK = (1 << 32) - 1


class LaneOp(enum.Enum):
    """Element-wise operations the switch applies across workers."""

    SUM = "sum"        #: int32 two's complement sum, overflow flagged
    LUTSUM = "lutsum"  #: 4-bit index -> table value (controller-installed LUT), summed in int32
    MAX = "max"        #: unsigned 32-bit max
    OR = "or"          #: 32-bit bitwise or
    BLOCK_SUM = "blocksum"  #: int32 sum as SUM, sent block-sparse (only nonzero blocks travel)


_WIRE_DTYPE = {LaneOp.SUM: torch.int32, LaneOp.LUTSUM: torch.uint8,
               LaneOp.MAX: torch.uint32, LaneOp.OR: torch.uint32, LaneOp.BLOCK_SUM: torch.int32}


class LaneOverflowError(CodecError):
    """The emulated switch saw an int32 SUM leave [-2**31, 2**31 - 1]."""


@dataclass
class LaneStream:
    """One stream of lanes with the switch operation that combines it across workers.

    Attributes:
        op: the switch operation.
        data: flat wire tensor: int32 (SUM), packed uint8 nibbles (LUTSUM), uint32 (MAX, OR).
        count: logical lanes: coordinates for LUTSUM (two per byte), ``data.numel()`` otherwise.
        lut: LUTSUM only: int32 table of the values the switch maps each index to.
        name: what the stream carries (for logs and packet headers).
    """

    op: LaneOp
    data: torch.Tensor
    count: int
    lut: Optional[torch.Tensor] = None
    name: str = ""

    def __post_init__(self) -> None:
        want = _WIRE_DTYPE[self.op]
        if self.data.dtype != want or self.data.dim() != 1:
            raise CodecError(f"{self.op.name} stream {self.name!r}: data must be a flat {want} "
                             f"tensor, got {self.data.dtype} with shape {tuple(self.data.shape)}")
        if (self.op is LaneOp.LUTSUM) != (self.lut is not None):
            raise CodecError(f"stream {self.name!r}: a lut is given exactly for LUTSUM streams")

    @property
    def nbytes(self) -> int:
        """Bytes this worker puts on the wire for this stream."""
        return self.data.numel() * self.data.element_size()


@dataclass
class EncodedLanes:
    """What one worker sends for one bucket.

    Attributes:
        streams: the lane streams, in wire order.
        meta: what ``decode`` needs besides the aggregated lanes (shape, dtype, numel, ...);
            identical on every worker for the same bucket, never sent.
    """

    streams: List[LaneStream]
    meta: Dict[str, Any] = field(default_factory=dict)

    @property
    def nbytes(self) -> int:
        """Total wire bytes (without headers)."""
        return sum(s.nbytes for s in self.streams)


def float_to_max_code(values: torch.Tensor) -> torch.Tensor:
    """Encode non-negative floats as uint32 codes whose unsigned order is the float order.

    The code is the IEEE-754 float32 bit pattern, monotone for non-negative floats; +Inf and
    NaN (any sign bit cleared) get codes above every finite value, so a poisoned value wins MAX;
    -0.0 is coded as +0.0.

    Args:
        values: float tensor of values >= 0 (or NaN/Inf).

    Returns:
        uint32 tensor of the same shape.

    Example::
        >>> float_to_max_code(torch.tensor([1.0])).tolist()
        [1065353216]
    """
    v = values.to(torch.float32)
    v = torch.where(torch.isnan(v), torch.full_like(v, float("nan")).abs(), v)  # canonical +NaN
    v = v + 0.0  # -0.0 as +0.0: its sign bit would make it the largest code
    if bool((v < 0).any()):
        raise ValueError("values: must be >= 0 (a norm or magnitude) to encode for MAX")
    return v.contiguous().view(torch.int32).view(torch.uint32)


def float_from_max_code(codes: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`float_to_max_code` (uint32 or int64 codes)."""
    return to_u32_lanes(codes).view(torch.int32).view(torch.float32)


def max_code_of(value: float) -> torch.Tensor:
    """:func:`float_to_max_code` of one float as a ``[1]`` uint32 tensor, without tensor ops (a
    codec's agreement makes its code on the host once per round trip, and a GPU waits for the
    host's time: ``bench/bench_codecs.py --host-profile``). The value is rounded to float32 as ``torch.tensor(..., float32)``
    does: to nearest, beyond float32's range to +Inf; NaN is the canonical +NaN."""
    if math.isnan(value):
        value = math.nan
    elif value == 0:
        value = 0.0  # -0.0 as +0.0, as float_to_max_code
    elif value < 0:
        raise ValueError("values: must be >= 0 (a norm or magnitude) to encode for MAX")
    bits = _F32.pack(float32_of(value))  # beyond float32's range: +Inf, as the cast
    return torch.tensor([_U32.unpack(bits)[0]], dtype=torch.uint32)


def float32_of(value: float) -> float:
    """``value`` rounded to float32 (to nearest; +-Inf beyond float32's range), as a Python float."""
    try:
        return _F32.unpack(_F32.pack(value))[0]
    except OverflowError:
        return math.copysign(math.inf, value)


def max_code_value(codes: torch.Tensor) -> float:
    """The float of the first code of ``codes`` (uint32 or int64, any device), as
    ``float(float_from_max_code(codes.reshape(-1)[:1].cpu())[0])`` without the tensor arithmetic."""
    if codes.dtype not in (torch.uint32, torch.int64):
        raise CodecError(f"values.dtype={codes.dtype}: unsigned lanes must be uint32 or int64")
    return _F32.unpack(_U32.pack(int(codes.reshape(-1)[0]) & _U32_MASK))[0]


def to_u32_lanes(values: torch.Tensor) -> torch.Tensor:
    """Normalise unsigned 32-bit lane values given as uint32 or int64 to a uint32 tensor."""
    if values.dtype == torch.uint32:
        return values
    if values.dtype == torch.int64:
        return values.to(torch.uint32)
    raise CodecError(f"values.dtype={values.dtype}: unsigned lanes must be uint32 or int64")


def _u32_as_int64(values: torch.Tensor) -> torch.Tensor:
    return to_u32_lanes(values).view(torch.int32).to(torch.int64) & _U32_MASK


def reference_agree(agreements: Sequence[torch.Tensor]) -> torch.Tensor:
    """Emulate the switch MAX round over the workers' agreement values (uint32)."""
    stacked = torch.stack([_u32_as_int64(a) for a in agreements])
    return stacked.max(dim=0).values.to(torch.uint32)


def reference_aggregate(encoded: Sequence[EncodedLanes]) -> List[torch.Tensor]:
    """Emulate the switch: combine the workers' streams element-wise with each stream's op.

    Args:
        encoded: one :class:`EncodedLanes` per worker, same layout.

    Returns:
        One tensor per stream: int32 for SUM and LUTSUM (per coordinate), uint32 for MAX/OR.

    Raises:
        LaneOverflowError: an int32 SUM (or LUT-SUM) overflowed.
        CodecError: the workers' layouts differ.
    """
    from .packing import unpack_nibbles  # local: packing is a leaf module

    if not encoded:
        raise CodecError("encoded: need at least one worker's lanes")
    layout = [(s.op, s.count) for s in encoded[0].streams]
    for worker, enc in enumerate(encoded):
        if [(s.op, s.count) for s in enc.streams] != layout:
            raise CodecError(f"worker {worker}: stream layout differs from worker 0's")
    out = []
    for j, (op, count) in enumerate(layout):
        streams = [enc.streams[j] for enc in encoded]
        if op in (LaneOp.SUM, LaneOp.BLOCK_SUM, LaneOp.LUTSUM):
            total = torch.zeros(count, dtype=torch.int64, device=streams[0].data.device)
            for s in streams:
                if op is not LaneOp.LUTSUM:
                    total += s.data.to(torch.int64)
                else:
                    total += s.lut.to(torch.int64)[unpack_nibbles(s.data, count).long()]
            if count and (int(total.min()) < _INT32_MIN or int(total.max()) > _INT32_MAX):
                raise LaneOverflowError(f"stream {j} ({streams[0].name!r}): int32 sum overflowed")
            out.append(total.to(torch.int32))
        elif op is LaneOp.MAX:
            out.append(reference_agree([s.data for s in streams]))
        else:
            acc = torch.zeros(count, dtype=torch.int64, device=streams[0].data.device)
            for s in streams:
                acc |= _u32_as_int64(s.data)
            out.append(acc.to(torch.uint32))
    return out


#: Most rounds (encode + followups) one all-reduce may take: a guard against a codec that never
#: finishes.
MAX_ROUNDS = 8


def reference_allreduce(codecs: Sequence["Codec"], grads: Sequence[torch.Tensor],
                        key: Hashable = 0) -> List[torch.Tensor]:
    """Emulate one all-reduce of ``grads`` (one per worker) through the switch, every round.

    Drives each worker's codec exactly as :func:`worker.collective.allreduce` does: agreement
    (MAX), encode, then :meth:`Codec.followup` rounds until it returns None, then decode.

    Args:
        codecs: one codec per worker (each with its own state).
        grads: one gradient per worker, same shape.
        key: bucket id.

    Returns:
        Each worker's decoded mean (identical on all workers for a deterministic codec).

    Raises:
        CodecError: the workers disagree on the number of rounds, or a codec exceeds MAX_ROUNDS.
    """
    if len(codecs) != len(grads) or not codecs:
        raise CodecError(f"need one codec per gradient: {len(codecs)} codecs, {len(grads)} grads")
    agreed = reference_agree([c.agreement(g, key) for c, g in zip(codecs, grads)])
    lanes = [c.encode(g, agreed, key) for c, g in zip(codecs, grads)]
    aggregated = reference_aggregate(lanes)
    for _ in range(MAX_ROUNDS):
        more = [c.followup(aggregated, agreed, key, l.meta) for c, l in zip(codecs, lanes)]
        if all(m is None for m in more):
            break
        if any(m is None for m in more):
            raise CodecError("workers disagree on whether another round follows")
        lanes = more
        aggregated = reference_aggregate(lanes)
    else:
        raise CodecError(f"more than {MAX_ROUNDS} rounds")
    return [c.decode(aggregated, agreed, key, l.meta) for c, l in zip(codecs, lanes)]


class Codec(abc.ABC):
    """A homomorphic gradient codec: the switch's lane ops on the encodings give the sum.

    Subclasses implement :meth:`agreement`, :meth:`encode` and :meth:`decode`; per-bucket state
    lives in ``self.states[key]``.

    Args:
        n_workers: number of workers whose lanes the switch combines (fixes the headroom that
            keeps integer sums from overflowing).
    """

    #: short name used by the bench and logs
    name = "codec"
    #: Calls for different keys may run at once, from different threads, and give what they
    #: give one key after the other: the codec keeps no state shared by its keys (or guards
    #: it, without letting one key's call change what another's gives). The aggregation engine
    #: puts several buckets on the wire at once only for such codecs (``worker.engine``).
    concurrent_keys = False

    def __init__(self, n_workers: int) -> None:
        if not isinstance(n_workers, int) or n_workers < 1:
            raise ValueError(f"n_workers={n_workers!r}: must be an int >= 1")
        self.n_workers = n_workers
        self.states: Dict[Hashable, Any] = {}

    def log_config(self) -> None:
        """Log the configuration once (subclasses call it at the end of ``__init__``)."""
        config = {k: v for k, v in vars(self).items() if not k.startswith("_") and k != "states"}
        _log.info("%s codec: %s", self.name, config)

    @abc.abstractmethod
    def agreement(self, grad: torch.Tensor, key: Hashable = 0) -> torch.Tensor:
        """Values this worker contributes to the MAX agreement round for bucket ``key``.

        Args:
            grad: the bucket's gradient (any shape, floating point).
            key: bucket/tensor id.

        Returns:
            A small uint32 tensor; the transport MAX-reduces it over the workers.

        Raises:
            NonFiniteGradientError: ``grad`` holds NaN or Inf.
        """

    @abc.abstractmethod
    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """Encode ``grad`` into lane streams, given the agreed (MAX-reduced) values.

        Args:
            grad: the same gradient that was passed to :meth:`agreement`.
            agreed: the MAX over the workers of their :meth:`agreement` values.
            key: bucket/tensor id.

        Returns:
            The :class:`EncodedLanes` to send.
        """

    @abc.abstractmethod
    def decode(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
               meta: Optional[Dict[str, Any]] = None) -> torch.Tensor:
        """Decode the switch's combined streams to the MEAN of the workers' gradients.

        Args:
            aggregated: one tensor per stream, as :func:`reference_aggregate` returns.
            agreed: the agreed values used at encode.
            key: bucket/tensor id.
            meta: the ``meta`` of this worker's :class:`EncodedLanes` for the same step.

        Returns:
            Tensor with the gradient's shape and dtype, on the device of ``aggregated``.
        """

    def followup(self, aggregated: Sequence[torch.Tensor], agreed: torch.Tensor, key: Hashable = 0,
                 meta: Optional[Dict[str, Any]] = None) -> Optional[EncodedLanes]:
        """The next round's lanes, computed from the previous round's aggregated streams.

        One-round codecs (the default) return None: ``decode`` follows. A multi-round codec
        returns the next :class:`EncodedLanes`; the transport reduces its streams and calls
        ``followup`` again with them, until None; ``decode`` then gets the last round's
        aggregated streams and meta. Every worker must return a round of the same layout (it
        may depend only on aggregated values, agreed values and the codec's configuration).

        Args:
            aggregated: the previous round's aggregated streams.
            agreed: the agreed values of the agreement round.
            key: bucket/tensor id.
            meta: the previous round's ``meta``.
        """
        return None

    def snapshot(self, key: Hashable = 0) -> Any:
        """What an all-reduce of bucket ``key`` may change in this codec, for :meth:`restore`.

        Take it before the call (agreement); after a call that failed part-way (or whose result
        is thrown away), :meth:`restore` puts the codec back as it was, so the next call of the
        bucket encodes exactly what it would have without the failed one: same residuals and
        momentum, same step counters, same rounding noise. Until :meth:`release`, the codec
        changes nothing the snapshot refers to (codecs avoid copies that way: THC keeps its old
        residual instead of recycling it as a buffer). The snapshot can be restored any number of
        times. It covers bucket ``key`` and the codec-wide state the call draws from (e.g. a
        rounding RNG shared by the buckets): take and restore it around one call at a time.

        The default deep-copies ``states[key]``; codecs with state elsewhere, or with large
        state they can keep by reference, override it (with :meth:`restore` and
        :meth:`release`).
        """
        return copy.deepcopy(self.states.get(key))

    def restore(self, key: Hashable, snapshot: Any) -> None:
        """Put bucket ``key``'s state back as :meth:`snapshot` took it (the snapshot stays
        valid)."""
        if snapshot is None:
            self.states.pop(key, None)
        else:
            self.states[key] = copy.deepcopy(snapshot)

    def release(self, key: Hashable, snapshot: Any) -> None:
        """Done with ``snapshot`` (the call succeeded, or was restored for the last time): the
        codec may reuse what it refers to. Optional; a snapshot never released only costs
        memory until the next one."""

    def reset(self, key: Optional[Hashable] = None) -> None:
        """Forget the state of bucket ``key`` (all buckets when None)."""
        if key is None:
            self.states.clear()
        else:
            self.states.pop(key, None)


def nonzero_groups(nonzero: torch.Tensor, size: int) -> torch.Tensor:
    """Per group of ``size`` consecutive values of a flat bool mask (the last group padded with
    False), whether any is set: a bool tensor of ``ceil(numel / size)`` entries, on the mask's
    device. The block-sparse blocks and the sparse-THC rows of a bucket."""
    pad = nonzero.new_zeros(-nonzero.numel() % size)
    return torch.cat([nonzero, pad]).view(-1, size).any(dim=1)


def check_gradient(grad: torch.Tensor, name: str = "grad", float32: bool = True) -> torch.Tensor:
    """Check ``grad`` is a floating tensor and return it flattened (a view where it can be),
    converted to float32 unless ``float32`` is False."""
    if not isinstance(grad, torch.Tensor) or not grad.is_floating_point():
        raise ValueError(f"{name}: must be a floating-point torch.Tensor, got "
                         f"{getattr(grad, 'dtype', type(grad).__name__)}")
    flat = grad.reshape(-1)
    return flat.to(torch.float32) if float32 else flat


def check_finite_scalar(value: float, key: Hashable, where: str) -> None:
    """Raise :class:`NonFiniteGradientError` when an agreement value is NaN or Inf."""
    if not math.isfinite(value):
        raise NonFiniteGradientError(key, where, f"agreement value is {value}")


def check_aggregated(aggregated: Sequence[torch.Tensor], expected: Sequence[tuple], codec: str) -> None:
    """Refuse aggregated streams whose count or dtype differ from ``expected`` [(numel, dtypes)]."""
    if len(aggregated) != len(expected):
        raise CodecError(f"{codec}: got {len(aggregated)} aggregated streams, expected {len(expected)}")
    for j, (t, (numel, dtypes)) in enumerate(zip(aggregated, expected)):
        if t.numel() != numel or t.dtype not in dtypes:
            raise CodecError(f"{codec}: aggregated stream {j} has {t.numel()} x {t.dtype}; "
                             f"expected {numel} x one of {[str(d) for d in dtypes]}")
