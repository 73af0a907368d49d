"""Errors: the one place where failures become gRPC statuses."""
from __future__ import annotations

import logging
import grpc

from ..api import ControlError

log = logging.getLogger("softswitch.p4runtime")


class P4RuntimeError(Exception):
    """A request the server refuses; ``code`` is the ``grpc.StatusCode`` to answer with."""

    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code, self.message = code, message

    @classmethod
    def from_control_error(cls, exc: ControlError) -> "P4RuntimeError":
        return cls(getattr(grpc.StatusCode, exc.code, grpc.StatusCode.UNKNOWN), exc.message)

    @property
    def rpc_code(self) -> int:
        """The ``google.rpc.Code`` number of ``code``."""
        return self.code.value[0]


def invalid(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.INVALID_ARGUMENT, message)


def not_found(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.NOT_FOUND, message)


def unimplemented(message: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.UNIMPLEMENTED, message)


def as_p4runtime_error(exc: BaseException, what: str) -> P4RuntimeError:
    """Map any exception raised while serving ``what`` to a P4RuntimeError (INTERNAL if a bug)."""
    if isinstance(exc, P4RuntimeError):
        return exc
    if isinstance(exc, ControlError):
        return P4RuntimeError.from_control_error(exc)
    log.exception("internal error while serving %s", what)
    return P4RuntimeError(grpc.StatusCode.INTERNAL, f"internal error while serving {what}: {exc}")


def abort(context: grpc.ServicerContext, exc: BaseException, what: str):
    err = as_p4runtime_error(exc, what)
    context.abort(err.code, err.message)


