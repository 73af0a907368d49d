"""TNA ``Register<struct, I>`` in the embedded target's control plane: listed in ProgramInfo and
P4Info (``type_spec.struct`` and ``type_info.structs``, as bf-p4c's standard flavour writes it),
read and written as tuples by the dataplane API, the STF runner and P4Runtime (RegisterEntry
data: a struct of one bitstring per field) over the repo's own gRPC server."""
from __future__ import annotations

import contextlib

import grpc
import pytest
from google.rpc import code_pb2
from p4.v1 import p4data_pb2, p4runtime_pb2

from softswitch_util import pick_free_port
from p4rt_util import RawClient, ids, pipeline_request, write_errors

from hina.softswitch.api import ControlError
from hina.softswitch.compiler import compile_source
from hina.softswitch.p4info import build_p4info, program_info_from_p4info
from hina.softswitch.p4runtime_server import make_device_config, serve
from hina.softswitch.stf import run_stf_text
from hina.softswitch.switch import Switch

Update = p4runtime_pb2.Update
SIZE = 4
PAIRS, PLAIN = "Ig.pairs", "Ig.plain"
# A frame's word header: which cell (idx) and what to OR into its lo; hi counts the packets.
PROGRAM = f"""
#include <core.p4>
#include <tna.p4>

header word_h {{ bit<32> idx; bit<32> value; }}
struct headers_t {{ word_h word; }}
struct metadata_t {{ }}
struct pair_t {{ bit<32> lo; bit<16> hi; }}

parser IgParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                out ingress_intrinsic_metadata_t ig_intr_md) {{
    state start {{
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        pkt.extract(hdr.word);
        transition accept;
    }}
}}
control Ig(inout headers_t hdr, inout metadata_t meta,
           in ingress_intrinsic_metadata_t ig_intr_md,
           in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
           inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
           inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {{
    Register<bit<8>, bit<32>>({SIZE}) plain;          // a bit<N> register beside it
    Register<pair_t, bit<32>>({SIZE}, {{1, 2}}) pairs;
    RegisterAction<pair_t, bit<32>, bit<32>>(pairs) pairs_update = {{
        void apply(inout pair_t cell, out bit<32> result) {{
            cell.lo = cell.lo | hdr.word.value;
            cell.hi = cell.hi + 1;
            result = cell.lo;
        }}
    }};
    apply {{
        hdr.word.value = pairs_update.execute(hdr.word.idx);
        ig_tm_md.ucast_egress_port = ig_intr_md.ingress_port;
    }}
}}
control IgDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                   in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {{
    apply {{ pkt.emit(hdr); }}
}}
parser EgParser(packet_in pkt, out headers_t hdr, out metadata_t meta,
                out egress_intrinsic_metadata_t eg_intr_md) {{
    state start {{ pkt.extract(eg_intr_md); pkt.extract(hdr.word); transition accept; }}
}}
control Eg(inout headers_t hdr, inout metadata_t meta,
           in egress_intrinsic_metadata_t eg_intr_md,
           in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
           inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
           inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {{
    apply {{ }}
}}
control EgDeparser(packet_out pkt, inout headers_t hdr, in metadata_t meta,
                   in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {{
    apply {{ pkt.emit(hdr); }}
}}
Pipeline(IgParser(), Ig(), IgDeparser(), EgParser(), Eg(), EgDeparser()) pipe;
Switch(pipe) main;
"""
INITIAL = (1, 2)                 # the Register's initial value {1, 2}


def frame(idx: int, value: int) -> bytes:
    return idx.to_bytes(4, "big") + value.to_bytes(4, "big")


@pytest.fixture(scope="module")
def program():
    return compile_source(PROGRAM, "struct_registers.p4")


# -- ProgramInfo, P4Info ---------------------------------------------------------------------
def test_p4info_lists_the_struct_register_with_its_type(program):
    plain, reg = program.info.registers
    assert (plain.name, plain.bitwidth, plain.fields, plain.type_name) == (PLAIN, 8, (), "")
    assert (reg.name, reg.size, reg.type_name, reg.bitwidth) == (PAIRS, SIZE, "pair_t", 48)
    assert [(f.name, f.bitwidth) for f in reg.fields] == [("lo", 32), ("hi", 16)]
    p4info = build_p4info(program.info)
    assert p4info.registers[0].type_spec.bitstring.bit.bitwidth == 8
    msg = p4info.registers[1]
    assert msg.preamble.name == PAIRS and msg.size == SIZE
    assert msg.type_spec.WhichOneof("type_spec") == "struct"
    assert msg.type_spec.struct.name == "pair_t"
    assert list(p4info.type_info.structs) == ["pair_t"]
    members = p4info.type_info.structs["pair_t"].members
    assert [(m.name, m.type_spec.bitstring.bit.bitwidth) for m in members] == [("lo", 32),
                                                                                ("hi", 16)]
    # and back: a P4Info's struct register is read as the same RegisterInfo
    assert program_info_from_p4info(p4info).registers == program.info.registers


# -- the dataplane API -----------------------------------------------------------------------
def test_dataplane_reads_writes_and_resets_tuples(program):
    dp = program.instantiate()
    assert dp.process(5, frame(1, 0x10)).outputs == [(5, frame(1, 0x11))]
    assert dp.register_read(PAIRS, 1) == (0x11, 3)
    assert dp.register_read(PAIRS, 0) == INITIAL
    dp.register_write(PAIRS, 2, (0xFFFFFFFF, 0xFFFF))
    assert dp.process(5, frame(2, 0)).outputs == [(5, frame(2, 0xFFFFFFFF))]
    assert dp.register_read(PAIRS, 2) == (0xFFFFFFFF, 0)      # hi wrapped at 16 bits
    for bad, message in (((1, 2, 3), "3 field values given, 2 expected"),
                         (7, "a value is a tuple"), ((1, 1 << 16), "field hi does not fit"),
                         ((-1, 0), "field lo")):
        with pytest.raises(ControlError) as info:
            dp.register_write(PAIRS, 2, bad)
        assert info.value.code == "INVALID_ARGUMENT"
        assert PAIRS in info.value.message and message in info.value.message
    assert dp.register_read(PAIRS, 2) == (0xFFFFFFFF, 0)      # the refused writes changed nothing
    dp.register_reset(PAIRS)
    assert [dp.register_read(PAIRS, i) for i in range(SIZE)] == [INITIAL] * SIZE
    # the RegisterActions still update the cells reset replaced
    dp.process(5, frame(2, 4))
    assert dp.register_read(PAIRS, 2) == (5, 3)


def test_stf_writes_and_compares_one_value_per_field(program):
    result = run_stf_text(f"register_write {PAIRS} 3 7 9\nregister_read {PAIRS} 3 == 7 9\n"
                          f"register_read pairs 0 != 7 9\n", program)
    assert result.passed, result.report()
    result = run_stf_text("register_read pairs 0 == 1 3\nregister_write pairs 0 1\n", program,
                          filename="t.stf")
    assert [(f.line, f.message) for f in result.failures] == [
        (1, f"register {PAIRS}[0] is (1, 2), expected == (1, 3)"),
        (2, f"register_write pairs 0 1: register {PAIRS} holds structs (lo, hi): expected one "
            "VALUE per field, got 1")]


# -- P4Runtime -------------------------------------------------------------------------------
@contextlib.contextmanager
def serving(program):
    """The program on a switch behind the repo's P4Runtime server (serving its generated
    P4Info); yields (switch, primary client)."""
    switch = Switch(device_id=0)
    switch.load(program)
    address = f"127.0.0.1:{pick_free_port()}"
    server = serve(switch, address)
    client = RawClient(address, (0, 1))
    try:
        client.arbitrate()
        yield switch, client
    finally:
        client.close()
        server.stop(grace=None).wait(5)
        server.servicer.close()
        switch.close()


def entity(register_id: int, index=None, data=None) -> p4runtime_pb2.Entity:
    e = p4runtime_pb2.Entity()
    e.register_entry.register_id = register_id
    if index is not None:
        e.register_entry.index.index = index
    if data is not None:
        e.register_entry.data.CopyFrom(data)
    return e


def struct_data(*members: bytes) -> p4data_pb2.P4Data:
    data = p4data_pb2.P4Data()
    for m in members:
        data.struct.members.add().bitstring = m
    return data


def cells(entities) -> dict[int, list[bytes]]:
    return {e.register_entry.index.index: [m.bitstring for m in
                                           e.register_entry.data.struct.members]
            for e in entities}


def test_p4runtime_reads_and_writes_struct_cells(program):
    reg, plain = ids(program)[PAIRS], ids(program)[PLAIN]
    with serving(program) as (switch, client):
        assert switch.receive(5, frame(1, 0x0102)) == [(5, frame(1, 0x0103))]
        (got,) = client.read(entity(reg, 1))
        assert got.register_entry.data.WhichOneof("data") == "struct"
        assert cells([got]) == {1: [b"\x01\x03", b"\x03"]}        # canonical bytestrings

        client.write(Update(type=Update.MODIFY, entity=entity(
            reg, 2, struct_data(b"\x00\xab\xcd\xef\x01", b"\x00\x07"))))    # padded: accepted
        assert cells(client.read(entity(reg, 2))) == {2: [b"\xab\xcd\xef\x01", b"\x07"]}

        bitstring = p4data_pb2.P4Data(bitstring=b"\x01")
        bad = [(bitstring, code_pb2.INVALID_ARGUMENT),
               (struct_data(b"\x01"), code_pb2.INVALID_ARGUMENT),
               (struct_data(b"\x01", b"\x02", b"\x03"), code_pb2.INVALID_ARGUMENT),
               (struct_data(b"\x01", b"\x01\x00\x00"), code_pb2.OUT_OF_RANGE)]  # hi: bit<16>
        for data, code in bad:
            with pytest.raises(grpc.RpcError) as info:
                client.write(Update(type=Update.MODIFY, entity=entity(reg, 2, data)))
            (error,) = write_errors(info.value)
            assert error.canonical_code == code, error.message
            assert PAIRS in error.message
        assert cells(client.read(entity(reg, 2))) == {2: [b"\xab\xcd\xef\x01", b"\x07"]}
        assert switch.dataplane.register_read(PAIRS, 2) == (0xABCDEF01, 7)

        # a wildcard (no index): every cell, in index order
        assert cells(client.read(entity(reg))) == {
            0: [b"\x01", b"\x02"], 1: [b"\x01\x03", b"\x03"], 2: [b"\xab\xcd\xef\x01", b"\x07"],
            3: [b"\x01", b"\x02"]}
        everything = client.read(entity(0))          # every cell of every register
        assert [(e.register_entry.register_id, e.register_entry.data.WhichOneof("data"))
                for e in everything] == [(plain, "bitstring")] * SIZE + [(reg, "struct")] * SIZE

        # and struct data for a bit<N> register is refused
        with pytest.raises(grpc.RpcError) as info:
            client.write(Update(type=Update.MODIFY, entity=entity(plain, 0, struct_data(b"\1"))))
        (error,) = write_errors(info.value)
        assert error.canonical_code == code_pb2.INVALID_ARGUMENT
        assert f"register {PLAIN!r}: data must be a bitstring, not struct" in error.message


def _push(client: RawClient, program, p4info) -> None:
    request = pipeline_request(p4info, make_device_config(program))
    client.stub.SetForwardingPipelineConfig(request, timeout=30)


def test_push_checks_struct_members_against_the_program(program):
    good = build_p4info(program.info)
    with serving(program) as (_, client):
        for change, message in (
                (lambda p: setattr(p.type_info.structs["pair_t"].members[1].type_spec
                                   .bitstring.bit, "bitwidth", 8),
                 "member 'hi' of register 'Ig.pairs' is 8 bits wide, the program's is 16"),
                (lambda p: p.type_info.structs["pair_t"].members.add(name="x").type_spec
                 .bitstring.bit.SetInParent(), "of 3 members, the program's of 2 fields"),
                (lambda p: p.registers[1].type_spec.bitstring.bit.SetInParent(),
                 "holds bitstrings, the program's holds structs pair_t"),
                (lambda p: setattr(p.registers[0].type_spec.struct, "name", "pair_t"),
                 "register 'Ig.plain' holds structs 'pair_t', the program's holds bit<8>")):
            bad = type(good)()
            bad.CopyFrom(good)
            change(bad)
            with pytest.raises(grpc.RpcError) as info:
                _push(client, program, bad)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert message in info.value.details()

        # a struct register the program does not have: accepted, UNIMPLEMENTED when asked
        extra = type(good)()
        extra.CopyFrom(good)
        other = extra.registers.add()
        other.CopyFrom(good.registers[1])
        other.preamble.id, other.preamble.name = good.registers[1].preamble.id + 1, "Ig.other"
        _push(client, program, extra)
        with pytest.raises(grpc.RpcError) as info:
            client.read(entity(other.preamble.id, 0))
        assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert "'Ig.other' holds structs and is not in the program" in info.value.details()
        assert len(cells(client.read(entity(good.registers[1].preamble.id)))) == SIZE
