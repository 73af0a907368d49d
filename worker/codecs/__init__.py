"""Homomorphic gradient codecs: the switch's element-wise lane ops on the encodings sum them.

Public API (see :mod:`worker.codecs.base` for the contract)::

    codec = ThcCodec(n_workers, rank=rank, seed=job_seed)      # or SketchCodec, LosslessSketchCodec,
                                                               #    FixedPointCodec, BlockSparseCodec
    agree = codec.agreement(grad, key)          # uint32, MAX-reduced by the switch / all-reduce
    lanes = codec.encode(grad, agreed, key)     # EncodedLanes: [LaneStream(op, data, count, lut)]
    mean = codec.decode(aggregated, agreed, key, lanes.meta)
"""
from .base import (Codec, EncodedLanes, LaneOp, LaneOverflowError, LaneStream, float_from_max_code,
                   float_to_max_code, reference_aggregate, reference_agree,
                   reference_allreduce)
from .errors import CodecError, NonFiniteGradientError
from .fixedpoint import FixedPointCodec
from .block_sparse import BlockSparseCodec
from .packing import EVEN_COORD_IN_HIGH_NIBBLE, pack_nibbles, unpack_nibbles
from .lossless import LosslessSketchCodec, SparsePairs, encode_sparse_pairs
from .sketch import CountSketch, SketchCodec
from .sketched_sgd import SketchedSgdCodec
from .thc import ThcCodec
from .sparse_thc import SparseThcCodec
from .adaptive import AdaptiveCodec
from .thc_table import DEFAULT_TABLE, PUBLISHED_TABLE, optimise_table

__all__ = [
    "AdaptiveCodec", "BlockSparseCodec", "Codec", "CodecError", "CountSketch", "DEFAULT_TABLE", "EVEN_COORD_IN_HIGH_NIBBLE", "EncodedLanes",
    "FixedPointCodec", "LaneOp", "LaneOverflowError", "LaneStream", "LosslessSketchCodec",
    "NonFiniteGradientError", "PUBLISHED_TABLE", "SketchCodec", "SketchedSgdCodec", "SparseThcCodec", "SparsePairs", "ThcCodec",
    "encode_sparse_pairs", "float_from_max_code", "float_to_max_code", "optimise_table", "pack_nibbles",
    "reference_aggregate", "reference_agree", "reference_allreduce", "unpack_nibbles",
]
