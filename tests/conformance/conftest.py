"""The conformance corpus shares the session's one BMv2 switch (``bmv2_tests.target``)."""
from __future__ import annotations

import pytest

from bmv2_tests.target import close_shared_bmv2


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_bmv2():
    """The BMv2 switch the first BMv2 case starts goes with the session."""
    yield
    close_shared_bmv2()
