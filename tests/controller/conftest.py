"""Fixtures of the controller tests (helpers in ``ctlutil.py``)."""
from __future__ import annotations

import socket
import subprocess
import time
from typing import Iterator

import pytest

from controller.target import CACHE_ENV, PipelineConfig
from ctlutil import TEST_DEFINES, Bmv2Switch, EmbeddedSwitch, bmv2_missing, free_port


@pytest.fixture(scope="session")
def embedded_pipeline(tmp_path_factory) -> Iterator[PipelineConfig]:
    """The HINA program for the embedded target, compiled once per session: the compile cache
    of :mod:`softswitch.compiler` makes the in-process switch's own compile free, and the
    controller's pipeline cache (a session directory, ``$HINA_CACHE_DIR``, inherited by
    ``hina-ctl`` subprocesses) spares the CLI runs the compile."""
    mp = pytest.MonkeyPatch()
    mp.setenv(CACHE_ENV, str(tmp_path_factory.mktemp("pipeline-cache")))
    config = PipelineConfig(target="embedded", defines=TEST_DEFINES)
    config.build()
    yield config
    mp.undo()


@pytest.fixture
def embedded_switch() -> Iterator[EmbeddedSwitch]:
    sw = EmbeddedSwitch()
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture
def bmv2_switch() -> Iterator[Bmv2Switch]:
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    grpc_port, thrift_port = free_port(), free_port()
    proc = subprocess.Popen(["simple_switch_grpc", "--no-p4", "--thrift-port", str(thrift_port),
                             "--", "--grpc-server-addr", f"127.0.0.1:{grpc_port}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    sw = Bmv2Switch(f"127.0.0.1:{grpc_port}", thrift_port, proc)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", grpc_port)) == 0:
                break
        time.sleep(0.1)
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture(scope="session")
def bmv2_pipeline(tmp_path_factory) -> PipelineConfig:
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    return PipelineConfig(target="bmv2", defines=TEST_DEFINES)
