"""The golden vectors of tests/golden/ (frames real BMv2 sent) replayed on the BMv2 installed
here, through the same harness the differential tests use: checks the harness (ports, ordering,
multicast, no frame lost or invented) against recorded truth, and that today's BMv2 still sends
those frames. tests/softswitch/test_golden.py holds the embedded target to the same vectors."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from hina.softswitch.api import Replica

from hina.testing.targets import bmv2_missing, compile_embedded, shared_bmv2

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"


@pytest.mark.parametrize("name", ["ops", "tables"])
def test_bmv2_sends_the_golden_frames(name):
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    data = json.loads((GOLDEN / f"{name}_vectors.json").read_text())
    program = GOLDEN / f"{name}.p4"
    dp = shared_bmv2()
    dp.load(program, {}, info=compile_embedded(str(program), ()).info)
    for group in data.get("mcast", []):
        dp.mcast_group_set(group["group"], [Replica(p, rid) for p, rid in group["replicas"]])
    for i, vec in enumerate(data["vectors"]):
        port = vec.get("port", data.get("port"))
        expected = [(o[0], o[1]) if isinstance(o, list) else (port, o) for o in vec["out"]]
        result = dp.process(port, bytes.fromhex(vec["in"]), expected=len(expected))
        got = [(p, frame.hex()) for p, frame in result.outputs]
        assert sorted(got) == sorted(expected), f"{name} vector {i} (in {vec['in']})"
        assert not dp.late, f"{name} vector {i}: frames after the send ended: {dp.late}"
