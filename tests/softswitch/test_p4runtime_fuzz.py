"""Malformed Write/Read requests and garbage PacketOut thrown at a running P4Runtime server: every
request gets a status (never INTERNAL, which would be a server bug) and the server keeps serving."""
from __future__ import annotations

import grpc
import pytest
from google.protobuf.message import DecodeError
from google.rpc import code_pb2, status_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2

from softswitch_util import PROGRAMS
from p4rt_util import RawClient, ids

compiler = pytest.importorskip("hina.softswitch.compiler")

from hina.softswitch.p4info import build_p4info  # noqa: E402
from hina.softswitch.p4runtime_server import make_device_config  # noqa: E402

FUZZ_SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                         suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def program():
    return compiler.compile_file(str(PROGRAMS / "p4rt_cpu.p4"))


@pytest.fixture
def primary(running_switch, program):
    """A primary raw client on a switch running p4rt_cpu.p4."""
    client = RawClient(running_switch.address, (0, 1))
    assert client.arbitrate().arbitration.status.code == code_pb2.OK
    request = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=0)
    request.election_id.low = 1
    request.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
    request.config.p4info.CopyFrom(build_p4info(program.info))
    request.config.p4_device_config = make_device_config(program)
    client.stub.SetForwardingPipelineConfig(request, timeout=30)
    yield client
    client.close()


def known_ids(program) -> list[int]:
    return sorted(ids(program).values())


def id_strategy(program):
    return st.one_of(st.sampled_from(known_ids(program)), st.integers(0, 2**32 - 1))


small_bytes = st.binary(min_size=0, max_size=9)


def field_match(field_id):
    kinds = {
        "exact": lambda m, a, b, n: m.exact.__setattr__("value", a),
        "ternary": lambda m, a, b, n: (m.ternary.__setattr__("value", a),
                                       m.ternary.__setattr__("mask", b)),
        "lpm": lambda m, a, b, n: (m.lpm.__setattr__("value", a),
                                   m.lpm.__setattr__("prefix_len", n)),
        "range": lambda m, a, b, n: (m.range.__setattr__("low", a),
                                     m.range.__setattr__("high", b)),
        "optional": lambda m, a, b, n: m.optional.__setattr__("value", a),
    }

    @st.composite
    def build(draw):
        msg = p4runtime_pb2.FieldMatch(field_id=draw(field_id))
        kinds[draw(st.sampled_from(sorted(kinds)))](
            msg, draw(small_bytes), draw(small_bytes), draw(st.integers(-1, 70)))
        return msg
    return build()


def entities(program):
    some_id = id_strategy(program)

    @st.composite
    def table_entry(draw):
        entity = p4runtime_pb2.Entity()
        entry = entity.table_entry
        entry.table_id = draw(some_id)
        entry.match.extend(draw(st.lists(field_match(st.integers(0, 3)), max_size=3)))
        if draw(st.booleans()):
            entry.action.action.action_id = draw(some_id)
            for _ in range(draw(st.integers(0, 2))):
                entry.action.action.params.add(param_id=draw(st.integers(0, 2)),
                                               value=draw(small_bytes))
        entry.priority = draw(st.integers(-2, 2**31 - 1))
        entry.is_default_action = draw(st.booleans())
        if draw(st.booleans()):
            entry.counter_data.packet_count = draw(st.integers(-2**63, 2**63 - 1))
        return entity

    @st.composite
    def indexed(draw):
        entity = p4runtime_pb2.Entity()
        kind = draw(st.sampled_from(["register_entry", "counter_entry", "meter_entry"]))
        msg = getattr(entity, kind)
        setattr(msg, kind.replace("_entry", "_id"), draw(some_id))
        if draw(st.booleans()):
            msg.index.index = draw(st.integers(-3, 20))
        if kind == "register_entry":
            msg.data.bitstring = draw(small_bytes)
        elif kind == "counter_entry":
            msg.data.byte_count = draw(st.integers(-2**63, 2**63 - 1))
        return entity

    @st.composite
    def replication(draw):
        entity = p4runtime_pb2.Entity()
        pre = entity.packet_replication_engine_entry
        group = pre.clone_session_entry if draw(st.booleans()) else pre.multicast_group_entry
        if group.DESCRIPTOR.name == "CloneSessionEntry":
            group.session_id = draw(st.integers(0, 2**32 - 1))
        else:
            group.multicast_group_id = draw(st.integers(0, 2**32 - 1))
        for _ in range(draw(st.integers(0, 3))):
            replica = group.replicas.add(instance=draw(st.integers(0, 2**32 - 1)))
            if draw(st.booleans()):
                replica.port = draw(small_bytes)
            else:
                replica.egress_port = draw(st.integers(0, 2**32 - 1))
        return entity

    @st.composite
    def garbage(draw):
        try:
            return p4runtime_pb2.Entity.FromString(draw(st.binary(max_size=40)))
        except DecodeError:
            return p4runtime_pb2.Entity()

    return st.one_of(table_entry(), indexed(), replication(), garbage())


def assert_serving(client: RawClient) -> None:
    reply = client.stub.Capabilities(p4runtime_pb2.CapabilitiesRequest(), timeout=10)
    assert reply.p4runtime_api_version


def assert_no_internal_error(exc: grpc.RpcError) -> None:
    assert exc.code() != grpc.StatusCode.INTERNAL, exc.details()
    if exc.code() == grpc.StatusCode.UNKNOWN:
        details = dict(exc.trailing_metadata())["grpc-status-details-bin"]
        for any_ in status_pb2.Status.FromString(details).details:
            error = p4runtime_pb2.Error()
            any_.Unpack(error)
            assert error.canonical_code != code_pb2.INTERNAL, error.message


def test_malformed_writes_and_reads_never_break_the_server(primary, program, caplog):
    @FUZZ_SETTINGS
    @given(st.lists(st.tuples(st.integers(0, 4), entities(program)), min_size=1, max_size=4),
           st.integers(0, 4))
    def check(updates, atomicity):
        request = p4runtime_pb2.WriteRequest(device_id=0, atomicity=atomicity)
        request.election_id.low = 1
        for kind, entity in updates:
            request.updates.add(type=kind, entity=entity)
        try:
            primary.stub.Write(request, timeout=10)
        except grpc.RpcError as exc:
            assert_no_internal_error(exc)
        read = p4runtime_pb2.ReadRequest(device_id=0, entities=[e for _, e in updates])
        try:
            list(primary.stub.Read(read, timeout=10))
        except grpc.RpcError as exc:
            assert_no_internal_error(exc)
        assert_serving(primary)

    check()
    errors = [r.getMessage() for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    assert not errors        # no internal error, no failed rollback


def test_garbage_packet_out_never_breaks_the_server(primary, running_switch):
    @FUZZ_SETTINGS
    @given(st.binary(max_size=64),
           st.lists(st.tuples(st.integers(0, 4), small_bytes), max_size=3))
    def check(payload, metadata):
        request = p4runtime_pb2.StreamMessageRequest()
        request.packet.payload = payload
        for md_id, value in metadata:
            request.packet.metadata.add(metadata_id=md_id, value=value)
        primary.send(request)
        assert_serving(primary)

    check()
    errors = []
    while not primary.responses.empty():
        response = primary.responses.get()
        assert not isinstance(response, Exception), response   # the stream stayed open
        if response.HasField("error"):
            errors.append(response.error.canonical_code)
    assert code_pb2.INTERNAL not in errors
    assert running_switch.switch.stats["rx"] > 0            # well-formed ones went in


def test_mutated_p4info_is_refused_cleanly(primary, program):
    p4info = build_p4info(program.info)
    device_config = make_device_config(program)
    serialized = p4info.SerializeToString()

    @FUZZ_SETTINGS
    @given(st.integers(0, len(serialized) - 1), st.binary(min_size=1, max_size=4))
    def check(offset, patch):
        mutated = p4info.__class__()
        try:
            mutated.ParseFromString(serialized[:offset] + patch + serialized[offset + len(patch):])
        except (DecodeError, UnicodeDecodeError):   # not a P4Info at all: nothing to send
            return
        request = p4runtime_pb2.SetForwardingPipelineConfigRequest(device_id=0)
        request.election_id.low = 1
        request.action = p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY
        request.config.p4info.CopyFrom(mutated)
        request.config.p4_device_config = device_config
        try:
            primary.stub.SetForwardingPipelineConfig(request, timeout=30)
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.INVALID_ARGUMENT, exc.details()
        assert_serving(primary)

    check()
