"""What a veth (a BMv2 port of the harness) carries, as ``hina.testing.p4smith.veth_carries``
says and the BMv2 harness's reader (``controller.bmv2_dataplane._PortIO``) sees it.

The kernel takes the 802.1Q/802.1ad tag off a received frame (VLAN offload) and drops a frame
too short to hold the tag and the next type; the reader puts the tag back from
``PACKET_AUXDATA``, as libpcap does for BMv2. Frames written on the switch's end of a veth, read
on ours: each arrives, byte for byte, exactly when ``veth_carries`` says so.
"""
from __future__ import annotations

import os
import shutil
import socket
import time

import pytest

from hina.testing.p4smith import MIN_FRAME, MIN_VLAN_FRAME, VLAN_ETHER_TYPES, veth_carries

pytestmark = pytest.mark.root
HEAD = bytes.fromhex("0000000000fe" "000000000101")


def _frames() -> list[bytes]:
    frames = []
    for ether_type in VLAN_ETHER_TYPES + (0x9100, 0x0800):
        for n in range(MIN_FRAME, MIN_VLAN_FRAME + 3):   # (a shorter one cannot be sent)
            frames.append((HEAD + ether_type.to_bytes(2, "big") + bytes(range(1, 64)))[:n])
    tagged = {"VID 0, priority 5": "8100a000" "0800", "VID 5": "81000005" "0800",
              "QinQ": "88a80007" "81000009" "0800", "QinQ, VIDs 0": "88a80000" "81000000" "86dd"}
    frames += [HEAD + bytes.fromhex(tags) + bytes(30) for tags in tagged.values()]
    return frames


def test_a_veth_carries_what_veth_carries_says_and_the_reader_restores_tags():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 ('ip') to make a veth pair and open raw sockets")
    from hina.controller.bmv2_dataplane import VethPorts, _PortIO
    veths = VethPorts([1])
    io = sender = None
    try:
        io = _PortIO(veths)
        sender = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)
        sender.bind((veths.switch(1), 0))
        time.sleep(0.1)
        io.receive(0.1)                          # whatever the kernel sent when the link came up
        for frame in _frames():
            sender.send(frame)
            got, deadline = [], time.monotonic() + (1.0 if veth_carries(frame) else 0.2)
            while time.monotonic() < deadline and not got:
                got = [f for _, f in io.receive(0.05)]
            want = [frame] if veth_carries(frame) else []
            assert got == want, (frame.hex(), [g.hex() for g in got])
    finally:
        if sender is not None:
            sender.close()
        if io is not None:
            io.close()
        veths.close()
