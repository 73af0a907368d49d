"""Fixtures of the dataplane tests: a ``target`` per kind of switch, and HINA jobs on it.

``target`` is parametrised over ``embedded`` (the in-process softswitch, always) and ``bmv2``
(real ``simple_switch_grpc``; skipped with the reason when the binaries are absent). Test bodies
are the same for both.
"""
from __future__ import annotations

import pytest

from hina.testing.targets import Bmv2Target, EmbeddedTarget, bmv2_missing, close_shared_bmv2

#: The program size the tests compile by default: small payloads keep the embedded target fast.
#: ``test_default_size.py`` runs the default HINA_WORDS as well.
TEST_WORDS = 64
TEST_DEFINES = {"HINA_WORDS": TEST_WORDS}


def _make_target(kind: str):
    if kind == "embedded":
        try:
            import hina.softswitch.compiler  # noqa: F401
        except ImportError as exc:
            pytest.skip(f"the embedded engine is not available: {exc}")
        return EmbeddedTarget()
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    return Bmv2Target()


@pytest.fixture(params=["embedded", "bmv2"])
def target_kind(request):
    return request.param


@pytest.fixture
def target(target_kind):
    """A switch running p4/hina.p4 compiled with ``TEST_DEFINES``, no jobs installed."""
    t = _make_target(target_kind)
    t.load(defines=TEST_DEFINES)
    yield t
    t.close()


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_bmv2():
    """The session's BMv2 switch (started by the first BMv2 case) goes with the session."""
    yield
    close_shared_bmv2()
