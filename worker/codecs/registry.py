"""Worker-side builders of the registered codecs: one place maps a codec's name
(:mod:`hina.codecs`) to its class, and a job's codec parameters to the class's arguments.

Example::

    >>> from hina.worker.codecs import registry
    >>> type(registry.build("fixed", n_workers=4, rank=1)).__name__
    'FixedPointCodec'
    >>> registry.build("sketch", n_workers=4)
    Traceback (most recent call last):
    ...
    hina.codecs.UnknownCodecError: unknown codec 'sketch'; it is now called 'fetchsgd' ...

Entry points with their own presets (the demo's sketch sizes, the Mininet workloads') pass them
as keyword arguments of the codec's class; the job service's parameters go through
:func:`from_job`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional

from hina import codecs as names

from .adaptive import AdaptiveCodec
from .base import Codec
from .block_sparse import BlockSparseCodec
from .fixedpoint import FixedPointCodec
from .lossless import LosslessSketchCodec
from .sketch import SketchCodec
from .sketched_sgd import SketchedSgdCodec
from .sparse_thc import SparseThcCodec
from .thc import ThcCodec

__all__ = ["Builder", "build", "from_job", "builders"]


@dataclass(frozen=True)
class Builder:
    """How to make a registered codec.

    Attributes:
        make: ``make(n_workers, rank, **kwargs)`` -> the codec.
        job_kwargs: the codec's keyword arguments from a job's codec parameters (an object with
            the fields of :class:`hina.worker.jobclient.CodecParams`).
    """
    make: Callable[..., Codec]
    job_kwargs: Callable[[Any], dict]
    #: the codec takes the job's words per packet (``words=``): its byte model counts blocks
    takes_words: bool = False


def _sketched_sgd_k(c) -> float:
    if bool(c.sketch_k) == bool(c.sketch_k_fraction):
        raise ValueError(f"the job sets k={c.sketch_k} and k_fraction={c.sketch_k_fraction}; "
                         "exactly one must be set")
    return c.sketch_k or float(c.sketch_k_fraction)


_BUILDERS: dict[str, Builder] = {
    "thc": Builder(
        lambda n, rank, **kw: ThcCodec(n, rank=rank, **kw),
        lambda c: dict(seed=c.rht_seed, table=c.thc_table, granularity=c.thc_granularity)),
    # THC's rows of the union of the workers' nonzero rows (no error feedback)
    "sparse_thc": Builder(
        lambda n, rank, **kw: SparseThcCodec(n, rank=rank, **kw),
        lambda c: dict(seed=c.rht_seed, table=c.thc_table, granularity=c.thc_granularity)),
    "fixed": Builder(
        lambda n, rank, **kw: FixedPointCodec(n, rank=rank, **kw),
        lambda c: {}),
    # FetchSGD's momentum and error feedback live in the codec (sketch space)
    # the fixed codec's quantisation; the transport sends its stream block-sparse
    "block_sparse": Builder(
        lambda n, rank, **kw: BlockSparseCodec(n, rank=rank, **kw),
        lambda c: {}),
    "fetchsgd": Builder(
        lambda n, rank, **kw: SketchCodec(n, **kw),
        lambda c: dict(rows=c.sketch_rows, columns=c.sketch_columns, seed=c.sketch_seed)),
    # without codec momentum: the optimiser's momentum runs on the decoded update
    "sketched_sgd": Builder(
        lambda n, rank, **kw: SketchedSgdCodec(n, **kw),
        lambda c: dict(rows=c.sketch_rows, columns=c.sketch_columns, k=_sketched_sgd_k(c),
                       seed=c.sketch_seed, rotate=c.sketch_rotate, sketch_bits=c.sketch_bits,
                       value_bits=c.value_bits, value_blocks=c.value_blocks)),
    "lossless": Builder(
        lambda n, rank, **kw: LosslessSketchCodec(n, **kw),
        lambda c: dict(columns=c.sketch_columns, seed=c.sketch_seed)),
    "adaptive": Builder(
        lambda n, rank, **kw: AdaptiveCodec(n, rank=rank, **kw),
        lambda c: dict(seed=c.rht_seed, table=c.thc_table, granularity=c.thc_granularity,
                       columns=c.sketch_columns, sketch_seed=c.sketch_seed,
                       **({"choices": tuple(c.adaptive_choices)}
                          if getattr(c, "adaptive_choices", ()) else {})),
        takes_words=True),
}


def builders() -> Mapping[str, Builder]:
    """Name -> :class:`Builder` of every worker-side codec (read-only view)."""
    return dict(_BUILDERS)


def _builder(name: str) -> Builder:
    info = names.lookup(name)          # UnknownCodecError for a name nobody registered
    if info.kind != "codec":
        what = ("is not aggregated through the switch" if info.kind == "baseline"
                else f"is a raw {info.lane_op} lane op: the job carries integers, no codec")
        raise ValueError(f"codec {name!r} {what}")
    if name not in _BUILDERS:          # registered in hina.codecs, no builder here: a bug
        raise NotImplementedError(f"codec {name!r} has no worker-side builder")
    return _BUILDERS[name]


def build(name: str, n_workers: int, rank: int = 0, **kwargs) -> Codec:
    """The codec ``name`` for worker ``rank`` of ``n_workers``; ``kwargs`` go to its class.

    Raises:
        hina.codecs.UnknownCodecError: no codec has that name.
        ValueError: ``name`` has no worker codec (``fp32``, raw lane ops), or bad ``kwargs``.
    """
    return _builder(name).make(n_workers, rank, **kwargs)


def from_job(params, n_workers: int, rank: int, words: Optional[int] = None) -> Codec:
    """The codec of a job's codec parameters (``params.name`` and its fields) for ``rank``;
    ``words``: the job's words per packet (its block-sparse blocks), for a codec that counts
    them (``adaptive``'s byte model); None: the codec's default."""
    b = _builder(params.name)
    kwargs = b.job_kwargs(params)
    if b.takes_words and words is not None:
        kwargs["words"] = words
    return b.make(n_workers, rank, **kwargs)
