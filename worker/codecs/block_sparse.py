"""Block-sparse fixed point: the ``fixed`` codec's int32 lanes, sent block-sparse.

Quantisation is exactly :class:`~worker.codecs.fixedpoint.FixedPointCodec`'s (block exponents
agreed by MAX, ``q = round(x * 2**s)``, the same overflow guarantee), so the decoded mean is
bit-equal to the ``fixed`` codec's for the same inputs. The difference is on the wire: the one
stream has lane op ``BLOCK_SUM``, which :mod:`worker.transport` sends in block-sparse rounds
(docs/protocol.md, "Block-sparse aggregation"): only blocks of ``HINA_WORDS`` lanes that are
nonzero at a worker travel with lanes; a zero block costs its worker an 8-byte announcement,
and a block zero at every worker costs nothing. Zero gradients (embedding rows not looked up,
pruned or masked weights, ReLU-dead units) quantise to zero lanes, so their blocks stay zero.

Example::
    >>> import torch
    >>> c = BlockSparseCodec(2)
    >>> x = torch.zeros(1000); x[:10] = 1.0
    >>> lanes = c.encode(x, c.agreement(x))
    >>> [s.op for s in lanes.streams], int((lanes.streams[0].data != 0).sum())
    ([<LaneOp.BLOCK_SUM: 'blocksum'>], 10)
"""
from __future__ import annotations

from typing import Hashable

import torch

from .base import EncodedLanes, LaneOp, LaneStream
from .fixedpoint import FixedPointCodec

__all__ = ["BlockSparseCodec"]


class BlockSparseCodec(FixedPointCodec):
    """:class:`FixedPointCodec` whose int32 stream is aggregated block-sparse (``BLOCK_SUM``).

    Args:
        n_workers: workers summed by the switch.
        block: values sharing one exponent (the fixed-point block, not the wire block: the wire
            block is the switch's ``HINA_WORDS`` lanes).
        stochastic: unbiased stochastic rounding (a value rounded up from near zero makes its
            block nonzero: round to nearest keeps more blocks zero).
        rank: seeds this worker's rounding noise.
    """

    name = "block_sparse"

    def encode(self, grad: torch.Tensor, agreed: torch.Tensor, key: Hashable = 0) -> EncodedLanes:
        """One int32 ``BLOCK_SUM`` stream of ``grad.numel()`` lanes (the ``fixed`` codec's)."""
        lanes = super().encode(grad, agreed, key)
        q = lanes.streams[0].data
        return EncodedLanes([LaneStream(LaneOp.BLOCK_SUM, q, count=q.numel(),
                                        name="block_sparse_values")], lanes.meta)
