"""Shared fixtures for the softswitch tests: free TCP ports, a switch behind a P4Runtime server."""
from __future__ import annotations

import dataclasses
from typing import Iterator

import pytest
from softswitch_util import pick_free_port


@pytest.fixture
def free_port() -> int:
    return pick_free_port()


@dataclasses.dataclass
class RunningSwitch:
    """A :class:`Switch` served over P4Runtime on ``address`` (gRPC ``host:port``)."""
    switch: object
    server: object
    address: str

    @property
    def servicer(self):
        return self.server.servicer


@pytest.fixture
def running_switch(request) -> Iterator[RunningSwitch]:
    """A switch (device 0, CPU port 255 unless ``@pytest.mark.switch(cpu_port=...)``) with a
    P4Runtime server on a free local port; no pipeline is loaded. Shut down afterwards."""
    from hina.softswitch.p4runtime_server import serve
    from hina.softswitch.switch import Switch

    marker = request.node.get_closest_marker("switch")
    options = dict(device_id=0, cpu_port=255)
    if marker is not None:
        options.update(marker.kwargs)
    switch = Switch(**options)
    address = f"127.0.0.1:{pick_free_port()}"
    server = serve(switch, address)
    try:
        yield RunningSwitch(switch, server, address)
    finally:
        server.stop(grace=None).wait(5)
        server.servicer.close()
        switch.close()


def pytest_configure(config):
    config.addinivalue_line("markers", "switch(**kwargs): Switch options for running_switch")
