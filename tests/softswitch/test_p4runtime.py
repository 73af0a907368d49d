"""The P4Runtime server over real gRPC, driven by p4runtime-shell (and raw stubs where the shell
has no API: RegisterEntry, backup clients, malformed requests), running the real engine on
tests/softswitch/programs/p4rt_cpu.p4."""
from __future__ import annotations

import time

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from softswitch_util import GOLDEN, PROGRAMS
from p4rt_util import RawClient, ids, pipeline_request, write_errors

compiler = pytest.importorskip("hina.softswitch.compiler")
shell = pytest.importorskip("p4runtime_sh.shell")

from hina.softswitch.p4info import build_p4info, read_p4info_text, write_p4info_text  # noqa: E402
from hina.softswitch.p4runtime_server import make_device_config  # noqa: E402
from hina.softswitch.ports import InProcessPort  # noqa: E402

PROGRAM = PROGRAMS / "p4rt_cpu.p4"
CPU_PORT = 255                    # the program's CPU_PORT; running_switch's default cpu_port
INGRESS = "P4rtIngress."
HOST_A, HOST_B = "00:00:00:00:00:0a", "00:00:00:00:00:0b"
FRAME_TO_B = bytes.fromhex("00000000000b" "00000000000a" "0800") + b"payload"
Update = p4runtime_pb2.Update


# --------------------------------------------------------------------------------------------
# fixtures and helpers
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def program():
    return compiler.compile_file(str(PROGRAM))


@pytest.fixture(scope="module")
def pipeline_files(program, tmp_path_factory):
    """(p4info text path, device config path), as a controller would have them from p4c."""
    directory = tmp_path_factory.mktemp("p4rt")
    p4info_path, config_path = directory / "p4rt_cpu.p4info.txt", directory / "p4rt_cpu.bin"
    write_p4info_text(program.info, str(p4info_path))
    config_path.write_bytes(make_device_config(program))
    return str(p4info_path), str(config_path)


@pytest.fixture
def sw(running_switch, pipeline_files):
    """The running switch with ports 1-3 and the pipeline pushed by the shell (primary)."""
    assert running_switch.switch.cpu_port == CPU_PORT
    for number in (1, 2, 3):
        running_switch.switch.add_port(InProcessPort(number))
    shell.setup(device_id=0, grpc_addr=running_switch.address, election_id=(0, 1),
                config=shell.FwdPipeConfig(*pipeline_files), verbose=False)
    try:
        yield running_switch
    finally:
        shell.teardown()


@pytest.fixture
def stub(running_switch):
    """A bare P4Runtime stub on the switch (no stream, no arbitration)."""
    with grpc.insecure_channel(running_switch.address) as channel:
        yield p4runtime_pb2_grpc.P4RuntimeStub(channel)


@pytest.fixture
def raw(sw):
    """A backup client (election id (0, 0)) next to the shell's primary."""
    clients = []

    def make(election_id=(0, 0)):
        client = RawClient(sw.address, election_id)
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close()


def dmac_entry(mac: str, action: str, **params):
    entry = shell.TableEntry(INGRESS + "dmac_t")(action=INGRESS + action)
    entry.match["hdr.ethernet.dst"] = mac
    for name, value in params.items():
        entry.action[name] = value
    return entry


def read_dmac():
    return list(shell.TableEntry(INGRESS + "dmac_t").read())


def read_table(sw, table: str) -> list[p4runtime_pb2.TableEntry]:
    """The entries of ``table`` as raw messages, read through the shell's client."""
    entity = p4runtime_pb2.Entity()
    entity.table_entry.table_id = ids(sw.servicer.pipeline.program)[INGRESS + table]
    return [e.table_entry for r in shell.client.read_one(entity) for e in r.entities]


# --------------------------------------------------------------------------------------------
# pipeline and capabilities
# --------------------------------------------------------------------------------------------
def test_capabilities_report_p4runtime_version(sw):
    assert shell.APIVersion() == "1.4.1"


@pytest.mark.parametrize("response_type, has_p4info, has_device_config", [
    ("ALL", True, True), ("COOKIE_ONLY", False, False),
    ("P4INFO_AND_COOKIE", True, False), ("DEVICE_CONFIG_AND_COOKIE", False, True)])
def test_get_pipeline_config_returns_what_was_pushed(stub, sw, pipeline_files, response_type,
                                                     has_p4info, has_device_config):
    request = p4runtime_pb2.GetForwardingPipelineConfigRequest(
        device_id=0, response_type=getattr(p4runtime_pb2.GetForwardingPipelineConfigRequest,
                                           response_type))
    config = stub.GetForwardingPipelineConfig(request, timeout=10).config
    assert config.HasField("p4info") == has_p4info
    if has_p4info:
        assert config.p4info == read_p4info_text(pipeline_files[0])
    with open(pipeline_files[1], "rb") as f:
        assert config.p4_device_config == (f.read() if has_device_config else b"")


# --------------------------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------------------------
def test_exact_entry_insert_forward_modify_delete(sw):
    dmac_entry(HOST_B, "forward", port="2").insert()
    assert sw.switch.receive(1, FRAME_TO_B) == [(2, FRAME_TO_B)]
    (entry,) = read_dmac()
    assert entry.action.action_name == INGRESS + "forward"

    dmac_entry(HOST_B, "forward", port="3").modify()
    assert sw.switch.receive(1, FRAME_TO_B) == [(3, FRAME_TO_B)]

    dmac_entry(HOST_B, "forward", port="3").delete()
    assert read_dmac() == []
    assert sw.switch.receive(1, FRAME_TO_B) == [(0, FRAME_TO_B)]   # NoAction: egress_spec 0


def test_duplicate_insert_and_missing_delete_are_refused(sw):
    dmac_entry(HOST_B, "forward", port="2").insert()
    with pytest.raises(Exception) as info:
        dmac_entry(HOST_B, "forward", port="2").insert()
    assert "ALREADY_EXISTS" in str(info.value)
    with pytest.raises(Exception) as info:
        dmac_entry(HOST_A, "drop").delete()
    assert "NOT_FOUND" in str(info.value)


def test_lpm_ternary_optional_range_entries_read_back(sw):
    lpm = shell.TableEntry(INGRESS + "smac_t")(action=INGRESS + "set_class")
    lpm.match["hdr.ethernet.src"] = "00:00:00:00:00:00/40"
    lpm.action["acl_class"] = "7"
    lpm.insert()

    acl = shell.TableEntry(INGRESS + "acl_t")(action=INGRESS + "set_class")
    acl.match["hdr.ethernet.ether_type"] = "0x0800&&&0xff00"
    acl.match["std.ingress_port"] = "1"
    acl.action["acl_class"] = "9"
    acl.priority = 10
    acl.insert()

    rng = shell.TableEntry(INGRESS + "type_range_t")(action=INGRESS + "set_class")
    rng.match["hdr.ethernet.ether_type"] = "0x0800..0x08ff"
    rng.action["acl_class"] = "3"
    rng.priority = 5
    rng.insert()

    (got,) = read_table(sw, "smac_t")
    assert (got.match[0].lpm.value, got.match[0].lpm.prefix_len) == (b"\x00", 40)
    (got,) = read_table(sw, "acl_t")
    assert got.priority == 10
    assert [m.WhichOneof("field_match_type") for m in got.match] == ["ternary", "optional"]
    ternary = got.match[0].ternary
    assert (ternary.value, ternary.mask) == (b"\x08\x00", b"\xff\x00")
    assert got.match[1].optional.value == b"\x01"
    (got,) = read_table(sw, "type_range_t")
    assert (got.match[0].range.low, got.match[0].range.high) == (b"\x08\x00", b"\x08\xff")
    assert sw.switch.receive(1, FRAME_TO_B)   # the entries are live in the dataplane


def test_wildcard_read_of_all_tables(sw):
    dmac_entry(HOST_B, "forward", port="2").insert()
    entity = p4runtime_pb2.Entity()
    entity.table_entry.SetInParent()          # table_id 0: every table
    entries = list(shell.client.read_one(entity))
    tables = [e.table_entry.table_id for r in entries for e in r.entities]
    assert tables == [ids(sw.servicer.pipeline.program)[INGRESS + "dmac_t"]]


def test_default_entry_modify_read_and_reset(sw):
    default = shell.TableEntry(INGRESS + "dmac_t")(is_default=True, action=INGRESS + "forward")
    default.action["port"] = "3"
    default.modify()
    assert sw.switch.receive(1, FRAME_TO_B) == [(3, FRAME_TO_B)]
    (got,) = shell.TableEntry(INGRESS + "dmac_t")(is_default=True).read()
    assert got.action.action_name == INGRESS + "forward"

    shell.TableEntry(INGRESS + "dmac_t")(is_default=True).modify()   # no action: reset
    (got,) = shell.TableEntry(INGRESS + "dmac_t")(is_default=True).read()
    assert got.action.action_name == "NoAction"


def test_defaultonly_action_is_refused_in_entries(sw):
    rng = shell.TableEntry(INGRESS + "type_range_t")(action="NoAction")
    rng.match["hdr.ethernet.ether_type"] = "1..2"
    rng.priority = 1
    with pytest.raises(Exception, match="INVALID_ARGUMENT"):
        rng.insert()


# --------------------------------------------------------------------------------------------
# packet replication engine
# --------------------------------------------------------------------------------------------
def test_multicast_group_lifecycle_and_flooding(sw):
    group = shell.MulticastGroupEntry(7).add(2, 1).add(3, 2)
    group.insert()
    dmac_entry(HOST_B, "flood", group="7").insert()
    assert sorted(port for port, _ in sw.switch.receive(1, FRAME_TO_B)) == [2, 3]
    (got,) = shell.MulticastGroupEntry(7).read()
    assert sorted((r.egress_port, r.instance) for r in got.replicas) == [(2, 1), (3, 2)]

    shell.MulticastGroupEntry(7).add(1, 5).modify()
    (got,) = shell.MulticastGroupEntry().read()      # group 0: all groups
    assert [(r.egress_port, r.instance) for r in got.replicas] == [(1, 5)]
    shell.MulticastGroupEntry(7).delete()
    assert list(shell.MulticastGroupEntry().read()) == []
    with pytest.raises(Exception, match="NOT_FOUND"):
        shell.MulticastGroupEntry(7).add(1, 1).modify()


def test_clone_session_insert_read_delete(sw):
    # truncating clones and classes of service: the dataplane does neither, so the server
    # refuses them (BMv2's too) rather than keep a setting it would ignore
    for setting in ("packet_length_bytes", "cos"):
        session = shell.CloneSessionEntry(5).add(3, 0)
        setattr(session, setting, 1 if setting == "cos" else 128)
        with pytest.raises(Exception, match="UNIMPLEMENTED"):
            session.insert()
    shell.CloneSessionEntry(5).add(3, 0).insert()
    (got,) = shell.CloneSessionEntry(5).read()
    assert (got.packet_length_bytes, got.cos) == (0, 0)
    assert [(r.egress_port, r.instance) for r in got.replicas] == [(3, 0)]
    shell.CloneSessionEntry(5).delete()
    assert list(shell.CloneSessionEntry().read()) == []


def test_replication_limits_are_bmv2s(sw, raw):
    """Ids and ports BMv2's server refuses (or dies on: a replica port of 0xFFFFFFFF) are
    refused here too (bmv2_tests/test_p4runtime_differential.py compares the two)."""
    primary = raw((0, 9))
    primary.arbitrate()

    def group(group_id, port):
        e = p4runtime_pb2.Entity()
        g = e.packet_replication_engine_entry.multicast_group_entry
        g.multicast_group_id = group_id
        g.replicas.add(egress_port=port, instance=1)
        return e

    def session(session_id):
        e = p4runtime_pb2.Entity()
        e.packet_replication_engine_entry.clone_session_entry.session_id = session_id
        return e

    cases = [(group(32767, (1 << 31) - 1), code_pb2.OK),
             (group(32768, 1), code_pb2.OUT_OF_RANGE),
             (group(5, 1 << 31), code_pb2.INVALID_ARGUMENT),
             (group(6, 0xFFFF_FFFF), code_pb2.INVALID_ARGUMENT),
             (session(32767), code_pb2.OK), (session(32768), code_pb2.INVALID_ARGUMENT)]
    with pytest.raises(grpc.RpcError) as info:
        primary.write(*(Update(type=Update.INSERT, entity=e) for e, _ in cases))
    assert [e.canonical_code for e in write_errors(info.value)] == [c for _, c in cases]


# --------------------------------------------------------------------------------------------
# counters and registers
# --------------------------------------------------------------------------------------------
def test_counter_read_and_reset(sw):
    for _ in range(3):
        sw.switch.receive(2, FRAME_TO_B)
    counter = shell.CounterEntry(INGRESS + "port_packets")
    counter.index = 2
    (got,) = counter.read()
    assert (got.packet_count, got.byte_count) == (3, 3 * len(FRAME_TO_B))
    assert len(list(shell.CounterEntry(INGRESS + "port_packets").read())) == 8   # all indices

    reset = shell.CounterEntry(INGRESS + "port_packets")
    reset.index = 2
    reset.packet_count, reset.byte_count = 0, 0
    reset.modify()
    (got,) = counter.read()
    assert got.packet_count == 0


def test_direct_counter_counts_entry_hits(sw):
    dmac_entry(HOST_B, "forward", port="2").insert()
    sw.switch.receive(1, FRAME_TO_B)
    sw.switch.receive(1, FRAME_TO_B)
    (got,) = shell.DirectCounterEntry(INGRESS + "dmac_hits").read()
    assert got.packet_count == 2
    entity = p4runtime_pb2.Entity()
    entity.table_entry.table_id = ids(sw.servicer.pipeline.program)[INGRESS + "dmac_t"]
    entity.table_entry.counter_data.SetInParent()
    (response,) = shell.client.read_one(entity)
    assert response.entities[0].table_entry.counter_data.packet_count == 2


def test_register_write_and_read_with_raw_stub(sw, raw, program):
    primary = raw((0, 9))                      # a higher election id: the new primary
    assert primary.arbitrate().arbitration.status.code == code_pb2.OK
    register_id = ids(program)[INGRESS + "last_ether_type"]
    entity = p4runtime_pb2.Entity()
    entity.register_entry.register_id = register_id
    entity.register_entry.index.index = 3
    entity.register_entry.data.bitstring = b"\x12\x34"
    primary.write(Update(type=Update.MODIFY, entity=entity))

    (got,) = primary.read(entity)
    assert got.register_entry.data.bitstring == b"\x12\x34"
    sw.switch.receive(5, FRAME_TO_B)
    wildcard = p4runtime_pb2.Entity()
    wildcard.register_entry.SetInParent()     # register_id 0: every register, every index
    values = {e.register_entry.index.index: e.register_entry.data.bitstring
              for e in primary.read(wildcard)}
    assert len(values) == 8 and values[3] == b"\x12\x34" and values[5] == b"\x08\x00"


# --------------------------------------------------------------------------------------------
# packet I/O
# --------------------------------------------------------------------------------------------
def test_packet_out_leaves_on_the_requested_port(sw):
    port2 = sw.switch.ports[2]
    shell.PacketOut(FRAME_TO_B, egress_port="2").send()
    assert port2.recv(timeout=5) == FRAME_TO_B


def test_packet_in_carries_ingress_port_metadata(sw):
    dmac_entry(HOST_B, "send_to_cpu").insert()
    packet_in = shell.PacketIn()
    sw.switch.receive(3, FRAME_TO_B)
    (message,) = packet_in.sniff(timeout=1)
    assert message.packet.payload == FRAME_TO_B
    (md,) = [m for m in message.packet.metadata if m.metadata_id == 1]
    assert int.from_bytes(md.value, "big") == 3


def test_garbage_packet_out_gets_a_stream_error(sw, raw):
    primary = raw((0, 9))
    primary.arbitrate()
    request = p4runtime_pb2.StreamMessageRequest()
    request.packet.payload = b"x"
    request.packet.metadata.add(metadata_id=99, value=b"\x01")
    primary.send(request)
    error = primary.next("error")
    assert error.error.canonical_code == code_pb2.INVALID_ARGUMENT
    assert error.error.packet_out.packet_out.payload == b"x"


# --------------------------------------------------------------------------------------------
# arbitration
# --------------------------------------------------------------------------------------------
def test_backup_client_cannot_write(sw, raw, program):
    backup = raw((0, 0))
    assert backup.arbitrate().arbitration.status.code == code_pb2.ALREADY_EXISTS
    entity = p4runtime_pb2.Entity()
    entity.register_entry.register_id = ids(program)[INGRESS + "last_ether_type"]
    entity.register_entry.data.bitstring = b"\x01"
    with pytest.raises(grpc.RpcError) as info:
        backup.write(Update(type=Update.MODIFY, entity=entity))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert backup.read(entity)                  # reading needs no arbitration


def test_primary_hand_over_when_primary_leaves(sw, raw):
    backup = raw((0, 0))
    assert backup.arbitrate().arbitration.status.code == code_pb2.ALREADY_EXISTS
    shell.teardown()                           # the primary's stream ends
    try:
        update = backup.next("arbitration")
        assert update.arbitration.status.code == code_pb2.OK
    finally:
        shell.setup(device_id=0, grpc_addr=sw.address, election_id=(0, 1), verbose=False)


def test_duplicate_election_id_ends_the_stream(sw, raw):
    twin = raw((0, 1))                          # the shell's election id
    request = p4runtime_pb2.StreamMessageRequest()
    request.arbitration.device_id = 0
    request.arbitration.election_id.low = 1
    twin.send(request)
    response = twin.next("arbitration")
    assert isinstance(response, grpc.RpcError)
    assert response.code() == grpc.StatusCode.INVALID_ARGUMENT


# --------------------------------------------------------------------------------------------
# bad requests: the right code, and the server keeps serving
# --------------------------------------------------------------------------------------------
def test_bad_updates_each_get_their_own_error(sw, raw, program):
    primary = raw((0, 9))
    primary.arbitrate()
    named = ids(program)

    unknown_table = p4runtime_pb2.Entity()
    unknown_table.table_entry.table_id = 0x02000001
    too_wide = p4runtime_pb2.Entity()
    entry = too_wide.table_entry
    entry.table_id = named[INGRESS + "dmac_t"]
    entry.match.add(field_id=1).exact.value = b"\x01" * 7      # 56 bits for a 48-bit field
    entry.action.action.action_id = named["NoAction"]
    no_priority = p4runtime_pb2.Entity()
    entry = no_priority.table_entry
    entry.table_id = named[INGRESS + "acl_t"]
    entry.match.add(field_id=2).optional.value = b"\x01"
    entry.action.action.action_id = named["NoAction"]
    empty = p4runtime_pb2.Entity()               # "the server always rejects" an empty string
    entry = empty.table_entry
    entry.table_id = named[INGRESS + "dmac_t"]
    entry.match.add(field_id=1).exact.value = b""
    entry.action.action.action_id = named["NoAction"]
    padded = p4runtime_pb2.Entity()              # any length, if the value fits
    entry = padded.table_entry
    entry.table_id = named[INGRESS + "dmac_t"]
    entry.match.add(field_id=1).exact.value = b"\x00" * 9 + b"\x0b"
    entry.action.action.action_id = named["NoAction"]
    good = p4runtime_pb2.Entity()
    good.packet_replication_engine_entry.multicast_group_entry.multicast_group_id = 3

    with pytest.raises(grpc.RpcError) as info:
        primary.write(*(Update(type=Update.INSERT, entity=e)
                        for e in (unknown_table, too_wide, no_priority, empty, padded, good)))
    codes = [e.canonical_code for e in write_errors(info.value)]
    assert codes == [code_pb2.NOT_FOUND, code_pb2.OUT_OF_RANGE, code_pb2.INVALID_ARGUMENT,
                     code_pb2.OUT_OF_RANGE, code_pb2.OK, code_pb2.OK]
    assert len(primary.read(good)) == 1        # CONTINUE_ON_ERROR: the good update applied
    assert shell.APIVersion() == "1.4.1"


def test_shell_reports_write_errors_by_index(sw):
    entry = dmac_entry(HOST_B, "forward", port="2")
    entry.insert()
    with pytest.raises(Exception) as info:
        entry.insert()
    assert "At index 0: ALREADY_EXISTS" in str(info.value)


def test_bad_pipeline_configs_are_refused(stub, sw, program):
    p4info = build_p4info(program.info)
    good_config = make_device_config(program)

    cases = {
        b"not json": grpc.StatusCode.INVALID_ARGUMENT,
        b'{"format": "softswitch-p4", "version": 1, "name": "x.p4", "source": "control"}':
            grpc.StatusCode.INVALID_ARGUMENT,     # does not compile
    }
    for device_config, code in cases.items():
        with pytest.raises(grpc.RpcError) as info:
            stub.SetForwardingPipelineConfig(pipeline_request(p4info, device_config), timeout=30)
        assert info.value.code() == code, device_config

    wrong_width = p4runtime_pb2.SetForwardingPipelineConfigRequest().config.p4info
    wrong_width.CopyFrom(p4info)
    wrong_width.tables[0].match_fields[0].bitwidth += 1
    with pytest.raises(grpc.RpcError) as info:
        stub.SetForwardingPipelineConfig(pipeline_request(wrong_width, good_config), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "bits wide" in info.value.details()

    with pytest.raises(grpc.RpcError) as info:   # election id (0, 2) is not the primary's
        stub.SetForwardingPipelineConfig(pipeline_request(p4info, good_config, 2), timeout=30)
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED

    # VERIFY changes nothing; the committed pipeline still serves
    stub.SetForwardingPipelineConfig(pipeline_request(p4info, good_config, action="VERIFY"),
                                     timeout=30)
    dmac_entry(HOST_B, "forward", port="2").insert()
    assert sw.switch.receive(1, FRAME_TO_B) == [(2, FRAME_TO_B)]


def test_save_then_commit_resets_state(stub, sw, program):
    dmac_entry(HOST_B, "forward", port="2").insert()
    request = pipeline_request(build_p4info(program.info), make_device_config(program),
                               action="VERIFY_AND_SAVE")
    stub.SetForwardingPipelineConfig(request, timeout=30)
    assert len(read_dmac()) == 1               # saved, not committed
    commit = p4runtime_pb2.SetForwardingPipelineConfigRequest(
        device_id=0, action=p4runtime_pb2.SetForwardingPipelineConfigRequest.COMMIT)
    commit.election_id.low = 1
    stub.SetForwardingPipelineConfig(commit, timeout=30)
    assert read_dmac() == []


def test_requests_for_another_device_are_not_found(stub, sw):
    with pytest.raises(grpc.RpcError) as info:
        list(stub.Read(p4runtime_pb2.ReadRequest(device_id=7), timeout=10))
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


def test_digests_reach_the_primary_once_enabled(sw, raw, program):
    if not program.info.digests:
        pytest.skip("the engine does not report the program's digests in ProgramInfo yet")
    primary = raw((0, 9))
    primary.arbitrate()
    learn = bytes.fromhex("00000000000b" "00000000000a" "1234")
    sw.switch.receive(2, learn)                 # no DigestEntry yet: nothing is sent
    entity = p4runtime_pb2.Entity()
    entity.digest_entry.digest_id = ids(program)["learn_t"]
    entity.digest_entry.config.max_list_size = 1
    primary.write(Update(type=Update.INSERT, entity=entity))
    sw.switch.receive(2, learn)
    digest = primary.next("digest").digest
    assert digest.digest_id == entity.digest_entry.digest_id
    (data,) = digest.data
    assert [m.bitstring for m in data.struct.members] == [b"\x0a", b"\x02"]
    assert primary.responses.empty()            # exactly one list: the first frame sent none


def test_digest_duplicates_wait_for_the_ack_and_the_config_reads_back(sw, raw, program):
    primary = raw((0, 9))
    primary.arbitrate()
    entity = p4runtime_pb2.Entity()
    entity.digest_entry.digest_id = ids(program)["learn_t"]
    entity.digest_entry.config.max_list_size = 1
    entity.digest_entry.config.ack_timeout_ns = 60 * 10**9
    primary.write(Update(type=Update.INSERT, entity=entity))
    (read,) = primary.read(entity)
    assert read.digest_entry == entity.digest_entry
    learn = bytes.fromhex("00000000000b" "00000000000a" "1234")
    sw.switch.receive(2, learn)
    sw.switch.receive(2, learn)                 # the same data, not acknowledged: dropped
    first = primary.next("digest").digest
    assert first.list_id == 1
    ack = p4runtime_pb2.StreamMessageRequest()
    ack.digest_ack.digest_id, ack.digest_ack.list_id = first.digest_id, first.list_id
    primary.send(ack)
    deadline = time.monotonic() + 5     # the ack is handled on the stream's thread: resend
    while primary.responses.empty() and time.monotonic() < deadline:
        sw.switch.receive(2, learn)     # (dropped until the ack is in, then dropped again)
        time.sleep(0.05)
    assert primary.next("digest").digest.list_id == 2
    bad = p4runtime_pb2.Entity()
    bad.digest_entry.CopyFrom(entity.digest_entry)
    bad.digest_entry.config.max_timeout_ns = -1
    with pytest.raises(grpc.RpcError) as info:
        primary.write(Update(type=Update.MODIFY, entity=bad))
    assert "max_timeout_ns -1" in str(write_errors(info.value))


def test_requests_before_any_pipeline_fail_precondition(running_switch):
    client = RawClient(running_switch.address, (0, 1))
    try:
        assert client.arbitrate().arbitration.status.code == code_pb2.OK
        with pytest.raises(grpc.RpcError) as info:
            client.write()
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(grpc.RpcError) as info:
            client.read(p4runtime_pb2.Entity())
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        request = p4runtime_pb2.StreamMessageRequest()
        request.packet.payload = b"\x00" * 20
        client.send(request)
        assert client.next("error").error.canonical_code == code_pb2.FAILED_PRECONDITION
    finally:
        client.close()


def test_unarbitrated_requests_are_served_while_no_client_is_connected(stub, running_switch,
                                                                       program):
    request = pipeline_request(build_p4info(program.info), make_device_config(program),
                               election_low=0)
    stub.SetForwardingPipelineConfig(request, timeout=30)        # as PI: nobody is primary
    client = RawClient(running_switch.address, (0, 5))
    try:
        client.arbitrate()
        with pytest.raises(grpc.RpcError) as info:
            stub.SetForwardingPipelineConfig(request, timeout=30)
        assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    finally:
        client.close()


def test_program_loaded_on_the_switch_is_served_with_its_generated_p4info(running_switch,
                                                                          program):
    running_switch.switch.load(program)          # as `softswitch --program`: no push
    running_switch.switch.add_port(InProcessPort(2))
    shell.setup(device_id=0, grpc_addr=running_switch.address, election_id=(0, 1),
                verbose=False)
    try:
        assert shell.client.get_p4info() == build_p4info(program.info)
        dmac_entry(HOST_B, "forward", port="2").insert()
        assert running_switch.switch.receive(1, FRAME_TO_B) == [(2, FRAME_TO_B)]
    finally:
        shell.teardown()


def test_p4info_from_real_p4c_drives_the_program(stub, running_switch):
    p4info = read_p4info_text(str(GOLDEN / "tables.p4info.txt"))      # written by real p4c
    program = compiler.compile_file(str(GOLDEN / "tables.p4"))
    stub.SetForwardingPipelineConfig(
        pipeline_request(p4info, make_device_config(program), election_low=0), timeout=30)
    named = {o.preamble.name: o.preamble.id for o in (*p4info.tables, *p4info.actions)}

    def update(table, action, value, default):
        entity = p4runtime_pb2.Entity()
        entry = entity.table_entry
        entry.table_id, entry.is_default_action = named["ProbeIngress." + table], default
        entry.action.action.action_id = named["ProbeIngress." + action]
        entry.action.action.params.add(param_id=1, value=value)
        if not default:
            entry.match.add(field_id=1).exact.value = b"\x07"
        request = p4runtime_pb2.WriteRequest(device_id=0, updates=[
            Update(type=Update.INSERT if not default else Update.MODIFY, entity=entity)])
        stub.Write(request, timeout=10)
        return entity

    entity = update("ternary_t", "set_ternary", b"\x11", default=True)
    (response,) = stub.Read(p4runtime_pb2.ReadRequest(device_id=0, entities=[entity]))
    assert response.entities[0].table_entry.action == entity.table_entry.action
    with pytest.raises(grpc.RpcError) as info:         # const default action
        update("exact_t", "set_exact", b"\x01", default=True)
    assert write_errors(info.value)[0].canonical_code == code_pb2.PERMISSION_DENIED
    with pytest.raises(grpc.RpcError) as info:         # const entries
        update("exact_t", "set_exact", b"\x01", default=False)
    assert write_errors(info.value)[0].canonical_code == code_pb2.PERMISSION_DENIED


def test_read_with_a_match_returns_only_that_entry(sw):
    dmac_entry(HOST_A, "forward", port="1").insert()
    dmac_entry(HOST_B, "forward", port="2").insert()
    query = shell.TableEntry(INGRESS + "dmac_t")
    query.match["hdr.ethernet.dst"] = HOST_B
    (got,) = query.read()
    assert got.action["port"].value == b"\x02"


def dmac_update(named, kind, mac: bytes, port: bytes = b"\x01"):
    entity = p4runtime_pb2.Entity()
    entry = entity.table_entry
    entry.table_id = named[INGRESS + "dmac_t"]
    entry.match.add(field_id=1).exact.value = mac
    entry.action.action.action_id = named[INGRESS + "forward"]
    entry.action.action.params.add(param_id=1, value=port)
    return Update(type=kind, entity=entity)


@pytest.mark.parametrize("atomicity", ["ROLLBACK_ON_ERROR", "DATAPLANE_ATOMIC"])
def test_atomic_batches_roll_back_on_the_first_error(sw, raw, program, atomicity):
    primary = raw((0, 9))
    primary.arbitrate()
    named = ids(program)
    primary.write(dmac_update(named, Update.INSERT, b"\x0b", b"\x02"))
    sw.switch.receive(1, FRAME_TO_B)                      # one hit on the direct counter
    register = p4runtime_pb2.Entity()
    register.register_entry.register_id = named[INGRESS + "last_ether_type"]
    register.register_entry.index.index = 4
    register.register_entry.data.bitstring = b"\x77"

    request = p4runtime_pb2.WriteRequest(device_id=0, updates=[
        dmac_update(named, Update.INSERT, b"\x0a"),       # applied, then undone
        Update(type=Update.MODIFY, entity=register),       # applied, then undone
        dmac_update(named, Update.DELETE, b"\x0b"),       # applied, then undone
        dmac_update(named, Update.INSERT, b"\x0a"),       # fails: ALREADY_EXISTS
        dmac_update(named, Update.INSERT, b"\x0c"),       # never tried
    ], atomicity=getattr(p4runtime_pb2.WriteRequest, atomicity))
    request.election_id.low = 9
    with pytest.raises(grpc.RpcError) as info:
        primary.stub.Write(request, timeout=10)
    codes = [e.canonical_code for e in write_errors(info.value)]
    assert codes == [code_pb2.ABORTED] * 3 + [code_pb2.ALREADY_EXISTS, code_pb2.ABORTED]

    entries = read_table(sw, "dmac_t")
    assert [e.match[0].exact.value for e in entries] == [b"\x0b"]
    assert primary.read(register)[0].register_entry.data.bitstring == b"\x00"
    (hits,) = shell.DirectCounterEntry(INGRESS + "dmac_hits").read()
    assert hits.packet_count == 1                          # the restored entry kept its count
