"""``allreduce`` over a codec: the codec's steps (agreement, encode, follow-up rounds, decode),
each lane stream reduced by the switch through a :class:`~worker.transport.Transport`.

The transport moves packets (windows, retransmission, result matching); this module owns what
a bucket's aggregation means: which streams go out, in what order, with which lane operation,
and how a worker whose gradient is not finite makes every other worker refuse the call at once.

Example::

    >>> link = FrameLink(me, switch, ("127.0.0.1", 0), ("127.0.0.1", 9001))   # doctest: +SKIP
    >>> t = Transport(link, JobParams(job_id=1, n_workers=4, n_slots=32))      # doctest: +SKIP
    >>> mean = allreduce(grad, ThcCodec(n_workers=4), t)                        # doctest: +SKIP
"""
from __future__ import annotations

from typing import Hashable, Optional

import numpy as np
import torch

from hina import protocol as P

from .codecs.base import MAX_ROUNDS, Codec, LaneOp, LaneStream
from .codecs.errors import CodecError, NonFiniteGradientError
from .transport import Transport, TransportError

__all__ = ["allreduce", "POISON_CODE"]

_OP_OF_LANE = {LaneOp.SUM: P.Op.SUM, LaneOp.LUTSUM: P.Op.LUT_SUM,
               LaneOp.MAX: P.Op.MAX, LaneOp.OR: P.Op.OR, LaneOp.BLOCK_SUM: P.Op.BLOCK_SUM}


def _reduce_stream(transport: Transport, stream: LaneStream) -> torch.Tensor:
    op = _OP_OF_LANE[stream.op]
    if op is P.Op.LUT_SUM:
        table = transport.job.thc_table
        if table is None or tuple(int(v) for v in stream.lut.tolist()) != tuple(table):
            raise TransportError(
                f"stream {stream.name!r}: the codec's THC table {stream.lut.tolist()} is not the "
                f"table installed for job {transport.job.job_id} ({table})")
    data = stream.data.detach().cpu().numpy()        # the packet buffer: the one host copy
    result = transport.reduce(op, data)
    if op is P.Op.LUT_SUM:
        result = result[:stream.count].astype(np.int32)
    elif op in (P.Op.MAX, P.Op.OR):
        result = result.astype(np.uint32)
    return torch.from_numpy(result).to(stream.data.device)


#: An agreement code above every other in the MAX, and non-finite to every codec (a NaN's bits
#: for float codes, the refused exponent code for fixed-point ones).
POISON_CODE = (1 << 32) - 1


def _announce_non_finite(transport: "Transport", codec: Codec, tensor: torch.Tensor,
                         key: Hashable) -> None:
    """This worker's gradient is not finite and its codec refused it: still send the agreement
    round, every code :data:`POISON_CODE`, so that every other worker's encode refuses the
    aggregated value at once (``NonFiniteGradientError``, "agreed") instead of waiting for this
    worker's lanes until it gives up; all then fall back together at the same call. The round's
    length is that of a zero gradient's agreement (the codec state this touches is restored by
    whoever handles the failure, as for any failed call)."""
    numel = codec.agreement(torch.zeros_like(tensor), key).numel()
    poison = torch.full((numel,), POISON_CODE, dtype=torch.int64).to(torch.uint32)
    _reduce_stream(transport, LaneStream(LaneOp.MAX, poison, numel, name="agreement"))


def allreduce(tensor: torch.Tensor, codec: Codec, transport: Transport,
              key: Hashable = 0, call_id: Optional[int] = None) -> torch.Tensor:
    """The mean over the job's workers of ``tensor``, aggregated by the switch through ``codec``.

    Every worker of the job calls this with a tensor of the same shape, in the same order.

    Steps:
        0. the call begins (:meth:`Transport.begin_call`: in a new generation, a check that
           every worker is at this call);
        1. the codec's agreement values (norms, exponents) are MAX-reduced by the switch;
        2. the tensor is encoded into lane streams with the agreed values;
        3. each stream is reduced by the switch with its lane operation; a multi-round codec
           (:meth:`~worker.codecs.base.Codec.followup`) then gives the next round's streams,
           computed from these results, which are reduced likewise, until it gives None;
        4. the codec decodes the aggregated streams into the mean.

    Args:
        tensor: this worker's tensor (any shape, floating point, CPU or CUDA).
        codec: the codec (its ``n_workers`` must be the job's).
        transport: this worker's transport.
        key: the codec state key (bucket index) for error feedback.
        call_id: the application's id of this call, the same on every worker (default: the
            transport's count of calls, :meth:`Transport.begin_call`).

    Returns:
        A tensor of ``tensor``'s shape, dtype and device.

    Raises:
        TransportError: the switch path failed; :class:`GenerationChanged` (the job was
            restarted in another generation: the message names both generations),
            :class:`CallMismatch` (the workers are at different calls) and
            :class:`TransportTimeout` say why.
        NonFiniteGradientError: this worker's ``tensor`` holds NaN/Inf ("local"; its poisoned
            agreement round still goes out), or another worker's does ("agreed"): every worker
            of the call raises it at once.
    """
    if codec.n_workers != transport.job.n_workers:
        raise ValueError(f"codec.n_workers={codec.n_workers} differs from the job's "
                         f"n_workers={transport.job.n_workers}")
    transport.begin_call(call_id)
    try:
        agreement = codec.agreement(tensor, key)
    except NonFiniteGradientError:
        _announce_non_finite(transport, codec, tensor, key)
        raise
    agreed = _reduce_stream(transport, LaneStream(LaneOp.MAX, agreement.reshape(-1),
                                                  agreement.numel(), name="agreement"))
    encoded = codec.encode(tensor, agreed, key)
    aggregated = [_reduce_stream(transport, s) for s in encoded.streams]
    for _ in range(MAX_ROUNDS):
        more = codec.followup(aggregated, agreed, key, encoded.meta)
        if more is None:
            break
        encoded = more
        aggregated = [_reduce_stream(transport, s) for s in encoded.streams]
    else:
        raise CodecError(f"codec {codec.name}: more than {MAX_ROUNDS} rounds for one bucket")
    return codec.decode(aggregated, agreed, key, encoded.meta)
