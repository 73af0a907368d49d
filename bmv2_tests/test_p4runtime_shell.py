"""p4runtime-shell, the operator's P4Runtime client, against real BMv2: pipeline push, entries
written and read back, a multicast group, and a clean teardown (its client is one per process)."""
from __future__ import annotations

from pathlib import Path

import pytest

from hina.testing.targets import bmv2_missing

ROOT = Path(__file__).resolve().parent.parent
BASIC = ROOT / "bench" / "programs" / "basic.p4"


@pytest.fixture
def shell_on_bmv2():
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    shell = pytest.importorskip("p4runtime_sh.shell")
    from hina.controller.bmv2 import Bmv2Process, compile_p4c
    build = compile_p4c(BASIC)
    with Bmv2Process({}) as switch:
        shell.setup(device_id=0, grpc_addr=switch.address, election_id=(0, 1),
                    config=shell.FwdPipeConfig(str(build.p4info), str(build.json)),
                    verbose=False)
        try:
            yield shell
        finally:
            shell.teardown()


def test_p4runtime_shell_drives_bmv2(shell_on_bmv2):
    sh = shell_on_bmv2
    entry = sh.TableEntry("MyIngress.ipv4_lpm")(action="MyIngress.ipv4_forward")
    entry.match["hdr.ipv4.dstAddr"] = "10.0.2.0/24"
    entry.action["dstAddr"] = "02:00:00:00:00:02"
    entry.action["port"] = "2"
    entry.insert()
    (got,) = sh.TableEntry("MyIngress.ipv4_lpm").read()
    assert got.match["hdr.ipv4.dstAddr"].lpm.prefix_len == 24
    assert got.action["port"].value == b"\x02"
    sh.MulticastGroupEntry(3).add(1, 1).add(2, 2).insert()
    (group,) = sh.MulticastGroupEntry(3).read()
    assert sorted((r.egress_port, r.instance) for r in group.replicas) == [(1, 1), (2, 2)]
    from p4runtime_sh.p4runtime import P4RuntimeWriteException
    with pytest.raises(P4RuntimeWriteException, match="ALREADY_EXISTS"):
        entry.insert()
    entry.delete()
    assert list(sh.TableEntry("MyIngress.ipv4_lpm").read()) == []
