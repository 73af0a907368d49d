"""The codec registry: every codec's one name, what the switch does with it, and where it lives.

Every entry point takes its codec names from here: ``hina-ctl job create --codec``, the job
service, ``hina-worker``, the demo (``--modes``), the Mininet workloads and the benchmarks. The
worker-side classes register their builders under the same names in
:mod:`hina.worker.codecs.registry` (which imports torch; this module does not, so the controller
can use it). A new codec (the sparse ones are coming) is one :func:`register` call here and one
builder there; ``tests/hina/test_codec_registry.py`` fails when the two disagree.

Names (docs/codecs.md has the details):

========== ========= ==============================================================
name       lane op   what it is
========== ========= ==============================================================
fp32       (none)    plain DDP all-reduce, not through the switch (the baseline)
thc        LUT_SUM   THC: randomized Hadamard + 4-bit table indices, summed by lookup
sparse_thc LUT_SUM   THC of the union of the workers' nonzero rows (an OR round first)
fixed      SUM       per-block fixed point in int32 lanes
block_sparse BLOCK_SUM fixed point, only nonzero blocks sent (OmniReduce-style rounds)
fetchsgd   SUM       count sketch with momentum and error feedback (FetchSGD)
sketched_sgd SUM     two rounds: a summed sketch picks candidates, then their exact sums
lossless   SUM       nonzero bitmap (OR) + count sketch with peeling: exact for sparse data
adaptive   (varies)  per bucket and step: the cheapest of block_sparse, lossless, sparse_thc, thc
sum        SUM       raw int32 lanes, no codec (the job carries integers)
max        MAX       raw lanes, element-wise maximum
or         OR        raw lanes, bitwise or
========== ========= ==============================================================
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

__all__ = ["CodecInfo", "UnknownCodecError", "register", "lookup", "names", "upgrade_stored_name",
           "REGISTRY"]


@dataclass(frozen=True)
class CodecInfo:
    """One registered codec.

    Attributes:
        name: its one name (lower case, ``[a-z0-9_]``).
        lane_op: the switch's lane operation of its main stream (``SUM``, ``LUT_SUM``, ``MAX``,
            ``OR``); ``""`` for a codec that does not go through the switch (``fp32``).
        summary: one line for ``--help`` and tables.
        kind: ``"codec"`` (a worker-side codec encodes and decodes gradients), ``"raw"`` (the
            job carries raw integers: no worker codec), or ``"baseline"`` (not through the
            switch at all).
        sketch: the job has a count sketch's shape (rows, columns, seed).
        lut: the job installs THC's table in the switch's LUT.
    """
    name: str
    lane_op: str
    summary: str
    kind: str = "codec"
    sketch: bool = False
    lut: bool = False

    @property
    def through_switch(self) -> bool:
        return self.kind != "baseline"


class UnknownCodecError(ValueError):
    """A codec name the registry does not know; ``str()`` is one line naming the known ones."""


#: name -> :class:`CodecInfo`, in the order of the table above
REGISTRY: dict[str, CodecInfo] = {}

#: Names that meant one codec in stored controller state of earlier versions (``hina-ctl``'s
#: ``--state`` file): they are read as the new name. ``sketch`` is not accepted anywhere else: it
#: meant FetchSGD to the controller and Sketched SGD to the demo.
_STORED_NAMES = {"fixedpoint": "fixed", "sketch": "fetchsgd"}
#: Old names a user may still type: the error says what to use instead.
_RENAMED = {"fixedpoint": "fixed",
            "sketch": "'fetchsgd' (count sketch with momentum, FetchSGD) or 'sketched_sgd' "
                      "(two-round Sketched SGD)"}


def register(info: CodecInfo) -> CodecInfo:
    """Add ``info`` to the registry (a name registers once)."""
    if info.name in REGISTRY:
        raise ValueError(f"codec {info.name!r} is already registered")
    if not info.name or not all(c.islower() or c.isdigit() or c == "_" for c in info.name):
        raise ValueError(f"codec name {info.name!r}: lower-case letters, digits and '_' only")
    if info.kind not in ("codec", "raw", "baseline"):
        raise ValueError(f"codec {info.name!r}: kind {info.kind!r}")
    if (info.lane_op == "") != (info.kind == "baseline"):
        raise ValueError(f"codec {info.name!r}: a lane op exactly when it goes through the switch")
    REGISTRY[info.name] = info
    return info


def lookup(name: str) -> CodecInfo:
    """The registered codec ``name``.

    Raises:
        UnknownCodecError: ``name`` is not registered (the message lists the known names, and
            says what a renamed codec is called now).
    """
    try:
        return REGISTRY[name]
    except (KeyError, TypeError):
        pass
    hint = f"; it is now called {_RENAMED[name]}" if name in _RENAMED else ""
    raise UnknownCodecError(f"unknown codec {name!r}{hint} (known: {', '.join(REGISTRY)})")


def names(*, kind: Optional[str] = None, through_switch: Optional[bool] = None) -> tuple[str, ...]:
    """Registered names, optionally only those of one ``kind`` or (not) through the switch."""
    return tuple(n for n, c in REGISTRY.items()
                 if (kind is None or c.kind == kind)
                 and (through_switch is None or c.through_switch == through_switch))


def upgrade_stored_name(name: str) -> str:
    """The current name of a codec name read from stored state (older names are mapped)."""
    return _STORED_NAMES.get(name, name)


register(CodecInfo("fp32", "", "plain fp32 all-reduce (gloo/NCCL), not through the switch",
                   kind="baseline"))
register(CodecInfo("thc", "LUT_SUM", "THC: randomized Hadamard, 4-bit table indices summed by "
                                     "the switch's lookup table", lut=True))
register(CodecInfo("sparse_thc", "LUT_SUM", "THC of the rows some worker touched: an OR round "
                                            "of the nonzero-row bitmap, then THC of those rows; "
                                            "the rest stays exactly zero", lut=True))
register(CodecInfo("fixed", "SUM", "per-block fixed point in int32 lanes (exact to its step)"))
register(CodecInfo("block_sparse", "BLOCK_SUM", "fixed point, block-sparse: only nonzero "
                                                "blocks are sent, the switch sums by block index"))
register(CodecInfo("fetchsgd", "SUM", "FetchSGD: count sketch with momentum and error "
                                      "feedback, top-k unsketched", sketch=True))
register(CodecInfo("sketched_sgd", "SUM", "Sketched SGD: a summed sketch picks k candidates, "
                                          "a second round sums them exactly", sketch=True))
register(CodecInfo("lossless", "SUM", "nonzero bitmap (OR) + count sketch with peeling: exact "
                                      "for sparse gradients", sketch=True))
register(CodecInfo("adaptive", "SUM", "per bucket: the cheapest of block_sparse, lossless (when "
                                       "sure to peel), sparse_thc and THC", sketch=True, lut=True))

#: the codecs ``adaptive`` chooses from per bucket; a job may declare a subset
#: (``JobConfig.adaptive_choices``), which must hold thc, sparse_thc or block_sparse for dense
#: buckets
ADAPTIVE_CHOICES = ("block_sparse", "lossless", "sparse_thc", "thc")


def check_adaptive_choices(choices) -> tuple:
    """``choices`` as a tuple if it is a valid set for ``adaptive`` (empty: all of
    :data:`ADAPTIVE_CHOICES`); ValueError otherwise."""
    choices = tuple(choices) or ADAPTIVE_CHOICES
    unknown = [c for c in choices if c not in ADAPTIVE_CHOICES]
    if unknown or len(set(choices)) != len(choices):
        raise ValueError(f"adaptive choices {list(choices)}: distinct names from "
                         f"{', '.join(ADAPTIVE_CHOICES)}")
    if not {"thc", "sparse_thc", "block_sparse"} & set(choices):
        raise ValueError(f"adaptive choices {list(choices)}: need thc, sparse_thc or block_sparse "
                         "for dense buckets")
    return choices
register(CodecInfo("sum", "SUM", "raw int32 lanes summed (no codec)", kind="raw"))
register(CodecInfo("max", "MAX", "raw lanes, element-wise maximum (no codec)", kind="raw"))
register(CodecInfo("or", "OR", "raw lanes, bitwise or (no codec)", kind="raw"))
