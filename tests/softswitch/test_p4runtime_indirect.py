"""The P4Runtime server's parser value sets (ValueSetEntry) over real gRPC, on the conformance
corpus's programs, with the P4Info the embedded target derives (equal to p4c's:
``test_p4info_parity.py``): writes that replace a set, reads, and the errors of bad requests."""
from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from p4rt_util import pipeline_request, write_errors

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


# --------------------------------------------------------------------------------------------
# action profiles and selectors
# --------------------------------------------------------------------------------------------
def named(p4info) -> dict[str, int]:
    return {o.preamble.name: o.preamble.id
            for kind in ("tables", "actions", "action_profiles")
            for o in getattr(p4info, kind)}


def member_update(ids, profile, member_id, value=b"\x11", port=b"\x02", kind=Update.INSERT):
    entity = p4runtime_pb2.Entity()
    member = entity.action_profile_member
    member.action_profile_id, member.member_id = ids[profile], member_id
    if kind != Update.DELETE:
        member.action.action_id = ids["MyIngress.set_out"]
        member.action.params.add(param_id=1, value=value)
        member.action.params.add(param_id=2, value=port)
    return Update(type=kind, entity=entity)


def group_update(ids, profile, group_id, members, kind=Update.INSERT, weight=1):
    entity = p4runtime_pb2.Entity()
    group = entity.action_profile_group
    group.action_profile_id, group.group_id = ids[profile], group_id
    for m in members:
        group.members.add(member_id=m, weight=weight)
    return Update(type=kind, entity=entity)


def entry_update(ids, table, a, kind=Update.INSERT, member=None, group=None, action=None):
    entity = p4runtime_pb2.Entity()
    entry = entity.table_entry
    entry.table_id = ids[table]
    entry.match.add(field_id=1).exact.value = bytes([a])
    if member is not None:
        entry.action.action_profile_member_id = member
    if group is not None:
        entry.action.action_profile_group_id = group
    if action is not None:
        entry.action.action.action_id = ids[action]
        entry.action.action.params.add(param_id=1, value=b"\x01")
        entry.action.action.params.add(param_id=2, value=b"\x01")
    return Update(type=kind, entity=entity)


def test_selector_groups_pick_members_and_read_back(pushed, running_switch):
    stub, p4info = pushed("action_selector.p4")
    ids = named(p4info)
    for port in (1, 2, 3, 4):
        running_switch.switch.add_port(InProcessPort(port))
    write(stub, member_update(ids, "MyIngress.sel16", 1, b"\x11", b"\x02"),
          member_update(ids, "MyIngress.sel16", 3, b"\x33", b"\x04"),
          member_update(ids, "MyIngress.sel16", 2, b"\x22", b"\x03"))
    write(stub, group_update(ids, "MyIngress.sel16", 100, [3, 1, 2]))
    write(stub, entry_update(ids, "MyIngress.ecmp", 1, group=100))
    # the STF file's first packets: crc16(b, c) % 3 picks the member by creation order
    for frame, port in ((b"\x01\x01\x02\x03\x00", 2), (b"\x01\x12\x34\x56\x00", 3),
                        (b"\x01\x00\x02\x01\x00", 4)):
        assert running_switch.switch.receive(0, frame)[0][0] == port
    read = p4runtime_pb2.Entity()
    read.action_profile_group.action_profile_id = ids["MyIngress.sel16"]
    (answer,) = stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[read]))
    (group,) = [e.action_profile_group for e in answer.entities]
    assert (group.group_id, [m.member_id for m in group.members]) == (100, [3, 1, 2])
    read = p4runtime_pb2.Entity()
    read.action_profile_member.action_profile_id = ids["MyIngress.sel16"]
    (answer,) = stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[read]))
    assert [e.action_profile_member.member_id for e in answer.entities] == [1, 2, 3]
    read = p4runtime_pb2.Entity()
    read.table_entry.table_id = ids["MyIngress.ecmp"]
    (answer,) = stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[read]))
    assert answer.entities[0].table_entry.action.action_profile_group_id == 100


def test_bad_action_profile_requests_are_refused(pushed):
    stub, p4info = pushed("action_selector.p4")
    ids = named(p4info)
    write(stub, member_update(ids, "MyIngress.sel16", 1),
          member_update(ids, "MyIngress.sel_id", 11))
    write(stub, group_update(ids, "MyIngress.sel16", 100, [1]))
    write(stub, entry_update(ids, "MyIngress.ecmp", 1, group=100),
          entry_update(ids, "MyIngress.by_c", 3, member=11))
    cases = [
        (entry_update(ids, "MyIngress.ecmp", 2, member=7), code_pb2.NOT_FOUND),   # unknown
        (entry_update(ids, "MyIngress.ecmp", 2, member=11), code_pb2.NOT_FOUND),  # other profile
        (entry_update(ids, "MyIngress.ecmp", 2, group=5), code_pb2.NOT_FOUND),
        (entry_update(ids, "MyIngress.ecmp", 2, action="MyIngress.set_out"),
         code_pb2.INVALID_ARGUMENT),                                          # direct action
        (group_update(ids, "MyIngress.sel16", 101, [9]), code_pb2.NOT_FOUND),
        (group_update(ids, "MyIngress.sel16", 101, [1], weight=2), code_pb2.UNIMPLEMENTED),
        (member_update(ids, "MyIngress.sel16", 1), code_pb2.ALREADY_EXISTS),
        (member_update(ids, "MyIngress.sel16", 1, kind=Update.DELETE),
         code_pb2.FAILED_PRECONDITION),                                       # in group 100
        (member_update(ids, "MyIngress.sel_id", 11, kind=Update.DELETE),
         code_pb2.FAILED_PRECONDITION),                                       # an entry's
        (group_update(ids, "MyIngress.sel16", 100, [], kind=Update.DELETE),
         code_pb2.FAILED_PRECONDITION),                                       # an entry's
        (member_update(ids, "MyIngress.sel16", 5, port=b"\x02\x00"), code_pb2.OUT_OF_RANGE),
    ]
    for update, code in cases:
        assert refused(stub, update) == [code], update
    too_many = [member_update(ids, "MyIngress.sel16", m) for m in range(2, 10)]   # size 8
    assert refused(stub, *too_many)[-1] == code_pb2.RESOURCE_EXHAUSTED


def test_action_profile_without_selector_has_no_groups(pushed):
    stub, p4info = pushed("action_profile.p4")
    ids = named(p4info)
    assert refused(stub, group_update(ids, "MyIngress.prof", 1, [])) == [
        code_pb2.INVALID_ARGUMENT]
    write(stub, member_update(ids, "MyIngress.prof", 10))
    assert refused(stub, entry_update(ids, "MyIngress.t", 1, group=1)) == [
        code_pb2.INVALID_ARGUMENT]
    write(stub, entry_update(ids, "MyIngress.t", 1, member=10))
    write(stub, entry_update(ids, "MyIngress.t", 1, kind=Update.DELETE))
    write(stub, member_update(ids, "MyIngress.prof", 10, kind=Update.DELETE))


# --------------------------------------------------------------------------------------------
# direct meters
# --------------------------------------------------------------------------------------------
def test_direct_meter_config_colours_the_entry_and_reads_back(pushed, running_switch):
    stub, p4info = pushed("direct_meter_configured.p4")
    ids = {o.preamble.name: o.preamble.id for o in (*p4info.tables, *p4info.actions)}
    for port in (1, 2):
        running_switch.switch.add_port(InProcessPort(port))
    entity = p4runtime_pb2.Entity()
    entry = entity.table_entry
    entry.table_id = ids["MyIngress.t"]
    entry.match.add(field_id=1).exact.value = b"\x01"
    entry.action.action.action_id = ids["MyIngress.metered"]
    entry.action.action.params.add(param_id=1, value=b"\x02")
    write(stub, Update(type=Update.INSERT, entity=entity))
    meter = p4runtime_pb2.Entity()
    meter.direct_meter_entry.table_entry.table_id = entry.table_id
    meter.direct_meter_entry.table_entry.match.extend(entry.match)
    config = meter.direct_meter_entry.config
    config.cir, config.cburst, config.pir, config.pburst = 0, 1, 0, 2
    write(stub, Update(type=Update.MODIFY, entity=meter))
    colours = [running_switch.switch.receive(0, b"\x01\xff\x00")[0][1][1] for _ in range(3)]
    assert colours == [0, 1, 2]                                   # GREEN, YELLOW, RED
    (answer,) = stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[meter]))
    assert answer.entities[0].direct_meter_entry.config == config
    assert refused(stub, Update(type=Update.INSERT, entity=meter)) == [
        code_pb2.INVALID_ARGUMENT]                                # MODIFY only
    config.cir = 5                                                # above the PIR
    assert refused(stub, Update(type=Update.MODIFY, entity=meter)) == [
        code_pb2.INVALID_ARGUMENT]
