"""Errors raised by the worker codecs."""
from __future__ import annotations

__all__ = ["CodecError", "NonFiniteGradientError"]


class CodecError(ValueError):
    """A codec refused its input (wrong shape, table, lane count, ...)."""


class NonFiniteGradientError(CodecError):
    """A gradient holds NaN or Inf: it is refused instead of being sent to the switch.

    Detected from the agreement value (a norm or max that any NaN/Inf poisons), so the check
    costs no extra pass; a poisoned agreed value (another worker's NaN won the MAX) is refused
    at decode too.

    Attributes:
        key: the bucket/tensor id.
        where: ``"local"`` (this worker's gradient) or ``"agreed"`` (the aggregated value).
    """

    def __init__(self, key, where: str, detail: str = "") -> None:
        self.key = key
        self.where = where
        super().__init__(f"non-finite gradient (NaN or Inf) in bucket {key!r} ({where}); "
                         f"refusing to send it{': ' + detail if detail else ''}")
