"""The P4Runtime server's parser value sets (ValueSetEntry) over real gRPC, on the conformance
corpus's programs, with the P4Info the embedded target derives (equal to p4c's:
``test_p4info_parity.py``): writes that replace a set, reads, and the errors of bad requests."""
from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from test_p4runtime import pipeline_request, write_errors

from hina.softswitch.compiler import compile_file
from hina.softswitch.p4info import build_p4info
from hina.softswitch.p4runtime_server import make_device_config
from hina.softswitch.ports import InProcessPort

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "programs"
Update = p4runtime_pb2.Update
FRAME = bytes.fromhex("0500A0A1A2A3")


@pytest.fixture
def pushed(running_switch):
    """``push(program)``: the program's pipeline on the running switch (no client is primary:
    requests with election id 0 are served); returns (stub, P4Info)."""
    channel = grpc.insecure_channel(running_switch.address)
    stub = p4runtime_pb2_grpc.P4RuntimeStub(channel)

    def push(name: str):
        program = compile_file(str(CORPUS / name))
        p4info = build_p4info(program.info)
        stub.SetForwardingPipelineConfig(
            pipeline_request(p4info, make_device_config(program), election_low=0), timeout=30)
        return stub, p4info

    yield push
    channel.close()


def write(stub, *updates):
    stub.Write(p4runtime_pb2.WriteRequest(device_id=0, updates=updates), timeout=10)


def refused(stub, *updates) -> list[int]:
    with pytest.raises(grpc.RpcError) as info:
        write(stub, *updates)
    return [e.canonical_code for e in write_errors(info.value)]


def value_set_update(vs, members, kind=Update.MODIFY, field_id=None):
    entity = p4runtime_pb2.Entity()
    entity.value_set_entry.value_set_id = vs.preamble.id
    for member in members:
        msg = entity.value_set_entry.members.add()
        for mf, value in zip(vs.match, member):
            msg.match.add(field_id=field_id or mf.id).exact.value = value
    return Update(type=kind, entity=entity)


def test_value_set_writes_replace_the_set_and_read_back(pushed, running_switch):
    stub, p4info = pushed("parser_value_set.p4")
    (vs,) = p4info.value_sets
    running_switch.switch.add_port(InProcessPort(1))
    assert running_switch.switch.receive(0, FRAME)[0][1][1] == 0x00      # no members
    write(stub, value_set_update(vs, [[b"\x05"], [b"\x00\x07"]]))        # padded is accepted
    assert running_switch.switch.receive(0, FRAME)[0][1][1] == 0xEE
    read = p4runtime_pb2.Entity()
    read.value_set_entry.value_set_id = vs.preamble.id
    (answer,) = stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[read]))
    members = answer.entities[0].value_set_entry.members
    assert [[m.exact.value for m in member.match] for member in members] == [[b"\x05"], [b"\x07"]]
    write(stub, value_set_update(vs, [[b"\x07"]]))                       # replaces 5
    assert running_switch.switch.receive(0, FRAME)[0][1][1] == 0x00


def test_bad_value_set_writes_are_refused(pushed):
    stub, p4info = pushed("parser_value_set.p4")
    (vs,) = p4info.value_sets
    assert refused(stub, value_set_update(vs, [[b"\x01"]], kind=Update.INSERT)) == [
        code_pb2.INVALID_ARGUMENT]                                       # MODIFY only
    assert refused(stub, value_set_update(vs, [[bytes([n])] for n in range(5)])) == [
        code_pb2.RESOURCE_EXHAUSTED]                                     # size 4
    assert refused(stub, value_set_update(vs, [[b"\x01\x00"]])) == [code_pb2.OUT_OF_RANGE]
    assert refused(stub, value_set_update(vs, [[b"\x01"], [b"\x01"]])) == [
        code_pb2.ALREADY_EXISTS]
    assert refused(stub, value_set_update(vs, [[b"\x01"]], field_id=9)) == [
        code_pb2.INVALID_ARGUMENT]
    ternary = value_set_update(vs, [])
    member = ternary.entity.value_set_entry.members.add()
    member.match.add(field_id=1).ternary.value = b"\x01"
    assert refused(stub, ternary) == [code_pb2.INVALID_ARGUMENT]
    unknown = value_set_update(vs, [])
    unknown.entity.value_set_entry.value_set_id = vs.preamble.id + 1
    assert refused(stub, unknown) == [code_pb2.NOT_FOUND]


def test_struct_value_set_members_have_a_value_per_field(pushed):
    stub, p4info = pushed("parser_value_set_struct.p4")
    (vs,) = p4info.value_sets
    assert [(m.name, m.bitwidth) for m in vs.match] == [("first", 8), ("second", 16)]
    write(stub, value_set_update(vs, [[b"\x01", b"\x02\x03"]]))
    missing = value_set_update(vs, [])
    missing.entity.value_set_entry.members.add().match.add(field_id=1).exact.value = b"\x01"
    assert refused(stub, missing) == [code_pb2.INVALID_ARGUMENT]
