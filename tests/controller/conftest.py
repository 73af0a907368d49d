"""Fixtures of the controller tests (helpers in ``ctlutil.py``).

Switches: ``embedded_switch`` (always), ``bmv2_switch`` (real ``simple_switch_grpc`` without
ports: control-plane tests), ``bmv2_port_switch`` (real BMv2 on veth pairs: traffic; root) and
``traffic_switch``, parametrised over the embedded target and BMv2 on veths, for tests whose body
is the same on both. BMv2 cases skip with the reason (:func:`controller.bmv2.missing`, or no
root) where they cannot run. Every fixture stops its switch and deletes its interfaces when the
test ends, whatever its outcome.

TLS: ``pki`` is a throwaway PKI (:mod:`pkiutil`: a CA, a server certificate for 127.0.0.1 and
localhost, a client certificate, and a stranger's CA and certificate), made once per session.

Pipelines are compiled once and cached on disk (``$HINA_CACHE_DIR``, default
``~/.cache/hina/pipelines``): the embedded target's P4Info by :class:`PipelineConfig`, BMv2's JSON
by :func:`controller.bmv2.compile_p4c`; ``hina-ctl`` subprocesses find them there too.
"""
from __future__ import annotations

from typing import Iterator

import pytest

from hina.controller.target import PipelineConfig
from ctlutil import TEST_DEFINES, Bmv2PortSwitch, EmbeddedSwitch, bmv2_ports_missing
from pkiutil import Pki, make_pki


@pytest.fixture(scope="session")
def embedded_pipeline() -> PipelineConfig:
    """The HINA program for the embedded target, built once (the compile cache of
    :mod:`softswitch.compiler` then also spares the in-process switch its compile)."""
    config = PipelineConfig(target="embedded", defines=TEST_DEFINES)
    config.build()
    return config


@pytest.fixture(scope="session")
def bmv2_pipeline() -> PipelineConfig:
    """The HINA program for BMv2, compiled by p4c-bm2-ss once (then from the cache)."""
    from hina.controller.bmv2 import missing
    reason = missing()
    if reason:
        pytest.skip(reason)
    config = PipelineConfig(target="bmv2", defines=TEST_DEFINES)
    config.build()
    return config


@pytest.fixture
def embedded_switch() -> Iterator[EmbeddedSwitch]:
    sw = EmbeddedSwitch()
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture
def bmv2_switch():
    """``simple_switch_grpc --no-p4`` without ports (:class:`controller.bmv2.Bmv2Process`:
    free gRPC and Thrift ports, both answering when this yields)."""
    from hina.controller.bmv2 import Bmv2Process, missing
    reason = missing()
    if reason:
        pytest.skip(reason)
    with Bmv2Process({}) as sw:
        yield sw


@pytest.fixture
def bmv2_port_switch() -> Iterator[Bmv2PortSwitch]:
    """BMv2 with two veth ports (root)."""
    reason = bmv2_ports_missing()
    if reason:
        pytest.skip(reason)
    sw = Bmv2PortSwitch(n_ports=2)
    try:
        yield sw
    finally:
        sw.stop()


@pytest.fixture(params=["embedded", "bmv2"])
def traffic_switch(request):
    """A switch with worker ports, on each target (``.kind``), with ``.pipeline`` set to the
    program for it (built)."""
    if request.param == "bmv2" and bmv2_ports_missing():
        pytest.skip(bmv2_ports_missing())
    pipeline = request.getfixturevalue(f"{request.param}_pipeline")
    sw = request.getfixturevalue("embedded_switch" if request.param == "embedded"
                                 else "bmv2_port_switch")
    sw.pipeline = pipeline
    return sw


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    """The throwaway PKI of the TLS tests (:func:`pkiutil.make_pki`)."""
    return make_pki(tmp_path_factory.mktemp("pki"))
