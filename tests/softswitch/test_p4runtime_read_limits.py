"""Large Read answers (found by the fault suite's P4Runtime fuzz row, docs/reliability.md).

A RegisterEntry with register id 0 and no index asks for every cell of every register. On
p4/hina.p4 that is 269,312 entities, which the server used to build as protobuf messages under
the switch lock (frames and every other request waited for it) and then stream: about a minute
per wildcard in pure-Python protobuf, so the fuzz row's request with two of them was never
answered within its 60 s deadline. The server now refuses an answer over ``max_read_entities``
with RESOURCE_EXHAUSTED before copying it, and holds the switch lock only while it copies an
answer, not while it encodes it.
"""
from __future__ import annotations

import contextlib
import threading
import time

import grpc
import pytest
from p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc

from softswitch_util import pick_free_port
from p4rt_util import ids

compiler = pytest.importorskip("hina.softswitch.compiler")

from hina.softswitch.p4runtime_server import serve  # noqa: E402
from hina.softswitch.switch import Switch  # noqa: E402

BIG, MID, SMALL = 1 << 17, 30000, 1024
PROGRAM = f"""
#include <core.p4>
#include <v1model.p4>

header ethernet_h {{ bit<48> dst; bit<48> src; bit<16> ether_type; }}
struct headers_t {{ ethernet_h ethernet; }}
struct meta_t {{ }}

parser LimitsParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                    inout standard_metadata_t std) {{
    state start {{ pkt.extract(hdr.ethernet); transition accept; }}
}}
control LimitsVerify(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control LimitsIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {{
    register<bit<32>>({BIG}) big;
    register<bit<32>>({MID}) mid;
    register<bit<16>>({SMALL}) small;
    action forward(bit<9> port) {{ std.egress_spec = port; }}
    table dmac {{
        key = {{ hdr.ethernet.dst: exact; }}
        actions = {{ forward; NoAction; }}
        default_action = NoAction();
    }}
    apply {{
        big.write(0, 1);
        mid.write(0, 2);
        small.write(1, hdr.ethernet.ether_type);
        dmac.apply();
    }}
}}
control LimitsEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {{
    apply {{ }}
}}
control LimitsCompute(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control LimitsDeparser(packet_out pkt, in headers_t hdr) {{ apply {{ pkt.emit(hdr.ethernet); }} }}
V1Switch(LimitsParser(), LimitsVerify(), LimitsIngress(), LimitsEgress(), LimitsCompute(),
         LimitsDeparser()) main;
"""
INGRESS = "LimitsIngress."
FRAME = bytes.fromhex("00000000000b" "00000000000a" "0800") + b"payload"


@pytest.fixture(scope="module")
def program():
    return compiler.compile_source(PROGRAM, "read_limits.p4")


@contextlib.contextmanager
def serving(program, **options):
    """A switch running ``program`` (loaded directly: the server serves its generated P4Info)
    behind a P4Runtime server made with ``options``; yields (switch, stub)."""
    switch = Switch(device_id=0)
    switch.load(program)
    address = f"127.0.0.1:{pick_free_port()}"
    server = serve(switch, address, **options)
    channel = grpc.insecure_channel(address)
    try:
        yield switch, p4runtime_pb2_grpc.P4RuntimeStub(channel)
    finally:
        channel.close()
        server.stop(grace=None).wait(5)
        server.servicer.close()
        switch.close()


def register_entity(register_id: int = 0, index=None) -> p4runtime_pb2.Entity:
    entity = p4runtime_pb2.Entity()
    entity.register_entry.register_id = register_id
    if index is not None:
        entity.register_entry.index.index = index
    return entity


def read(stub, *entities, timeout: float = 20) -> list[p4runtime_pb2.Entity]:
    request = p4runtime_pb2.ReadRequest(device_id=0, entities=entities)
    return [e for response in stub.Read(request, timeout=timeout) for e in response.entities]


def refused(stub, *entities) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as info:
        read(stub, *entities)
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, info.value.details()
    return info.value


def test_wildcard_read_of_every_register_is_refused_at_once(program):
    with serving(program) as (switch, stub):
        switch.receive(1, FRAME)
        started = time.monotonic()
        exc = refused(stub, register_entity())      # every cell of every register: 132,096
        assert time.monotonic() - started < 5
        assert "per Read request" in exc.details() and "at most" in exc.details()
        # the server and the dataplane go on: a register read by name, a frame
        small = ids(program)[INGRESS + "small"]
        (got,) = read(stub, register_entity(small, 1))
        assert got.register_entry.data.bitstring == b"\x08\x00"
        switch.receive(1, FRAME)


def test_the_limits_count_every_entity_of_the_request(program):
    named = ids(program)
    small, dmac = named[INGRESS + "small"], named[INGRESS + "dmac"]
    with serving(program, max_read_entities=SMALL - 24) as (switch, stub):
        switch.receive(1, FRAME)
        refused(stub, register_entity(small))                 # 1024 cells
        cells = [register_entity(small, i) for i in range(SMALL - 24)]
        got = read(stub, *cells)                              # 1000: exactly the limit
        assert [e.register_entry.index.index for e in got] == list(range(SMALL - 24))
        assert got[1].register_entry.data.bitstring == b"\x08\x00"
        refused(stub, *cells, register_entity(small, 0))      # 1001
    with serving(program, max_read_entities=2) as (switch, stub):
        update = p4runtime_pb2.WriteRequest(device_id=0)
        for mac in (1, 2, 3):
            entry = update.updates.add(type=p4runtime_pb2.Update.INSERT).entity.table_entry
            entry.table_id = dmac
            entry.match.add(field_id=1).exact.value = bytes([mac])
            entry.action.action.action_id = named[INGRESS + "forward"]
            entry.action.action.params.add(param_id=1, value=b"\x02")
        stub.Write(update, timeout=10)
        wildcard = p4runtime_pb2.Entity()
        wildcard.table_entry.table_id = dmac
        refused(stub, wildcard)                                # 3 entries
        one = p4runtime_pb2.Entity()
        one.table_entry.CopyFrom(update.updates[0].entity.table_entry)
        one.table_entry.ClearField("action")
        assert len(read(stub, one, one)) == 2
        # what a request looks at is bounded too (16 x the limit): each read by match scans
        # the table's 3 entries, and counts itself
        absent = p4runtime_pb2.Entity()
        absent.table_entry.CopyFrom(one.table_entry)
        absent.table_entry.match[0].exact.value = b"\x09"
        assert read(stub, *[absent] * 8) == []                # looks at 8 x 4 = 32
        exc = refused(stub, *[absent] * 9)                      # 36
        assert "looks at more than 32" in exc.details()


def test_frames_wait_for_the_copy_of_an_answer_not_for_its_encoding(program, monkeypatch):
    """A large (allowed) read: the switch lock is held while the cells are copied, not while
    30,000 entities are encoded and sent (the dataplane used to stall for all of it). Checked
    where it happens, not by timing: while each batch of the answer is encoded, another thread
    takes the switch lock (it could not if the server held it), and frames keep flowing."""
    from hina.softswitch.p4rt.reader import Reader
    mid = ids(program)[INGRESS + "mid"]
    free_while_encoding: list[bool] = []
    responses = Reader.responses

    def watched(reader):
        lock = reader.server.switch.lock

        def take(took: list) -> None:
            took.append(lock.acquire(timeout=10))
            if took[-1]:
                lock.release()
        for response in responses(reader):
            took: list = []
            other = threading.Thread(target=take, args=(took,))
            other.start()
            other.join(20)
            free_while_encoding.append(bool(took and took[0]))
            yield response
    monkeypatch.setattr(Reader, "responses", watched)
    with serving(program) as (switch, stub):
        frames = [0]
        done = threading.Event()

        def prober():
            while not done.is_set():
                switch.receive(1, FRAME)
                frames[0] += 1
                time.sleep(0.002)

        thread = threading.Thread(target=prober, daemon=True)
        thread.start()
        try:
            got = read(stub, register_entity(mid), timeout=120)
        finally:
            done.set()
            thread.join(10)
        assert len(got) == MID and got[0].register_entry.data.bitstring == b"\x02"
        assert len(free_while_encoding) > 1 and all(free_while_encoding), free_while_encoding
        assert frames[0] > 0
