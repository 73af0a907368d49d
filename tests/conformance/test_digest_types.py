"""Digest data of a type BMv2's P4Runtime server cannot stream.

p4c compiles a ``digest`` whose struct has a ``varbit``, an ``int<W>`` or a ``bool`` member,
but ``simple_switch_grpc`` refuses the pipeline that carries it ("Error when importing p4info":
PI's digests take ``bit<W>`` members only). The embedded target refuses the varbit one when it
compiles the program, naming the file and line (its front end takes varbit fields in headers
only, and its digest code refuses a varbit in a field list), and runs the other two (P4Runtime's ``P4Data`` carries signed and boolean members: a documented
difference, ``docs/p4-conformance.md``). The BMv2 half is checked on the real switch so that a
BMv2 that starts taking them fails this test.
"""
from __future__ import annotations

import pytest

from hina.controller import bmv2
from hina.controller.p4runtime_client import P4RuntimeClientError
from hina.softswitch.api import P4CompileError, P4UnsupportedError
from hina.softswitch.compiler import compile_file
from hina.softswitch.p4info import read_p4info_text
from hina.testing.targets import bmv2_missing, shared_bmv2

PROGRAM = """#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
header opt_t {{ bit<8> len; varbit<32> data; }}
struct headers_t {{ eth_t eth; opt_t opt; }}
struct learn_t {{ bit<8> len; {member} }}
struct meta_t {{ }}
parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,
                inout standard_metadata_t std) {{
    state start {{ pkt.extract(hdr.eth); pkt.extract(hdr.opt, 16); transition accept; }}
}}
control MyVerify(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {{
    apply {{
        std.egress_spec = 1;
        digest<learn_t>(1, {{hdr.opt.len, {value}}});
    }}
}}
control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {{
    apply {{ }}
}}
control MyCompute(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control MyDeparser(packet_out pkt, in headers_t hdr) {{
    apply {{ pkt.emit(hdr.eth); pkt.emit(hdr.opt); }}
}}
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
"""
LINE = 6            # the struct's member

MEMBERS = {
    "varbit": ("varbit<32> data;", "hdr.opt.data"),
    "int": ("int<8> data;", "(int<8>) hdr.opt.len"),
    "bool": ("bool data;", "hdr.opt.len == 2"),
}


def _program(tmp_path, kind: str):
    member, value = MEMBERS[kind]
    path = tmp_path / f"digest_{kind}.p4"
    path.write_text(PROGRAM.format(member=member, value=value))
    return path


@pytest.mark.parametrize("kind", sorted(MEMBERS))
def test_bmv2_p4runtime_refuses_the_pipeline(tmp_path, kind):
    reason = bmv2_missing()
    if reason:
        pytest.skip(reason)
    build = bmv2.compile_p4c(_program(tmp_path, kind))     # p4c accepts it
    dp = shared_bmv2()
    try:
        with pytest.raises(P4RuntimeClientError, match="Error when importing p4info"):
            dp.conn.set_pipeline(read_p4info_text(str(build.p4info)), build.device_config())
    finally:
        dp.reset()           # the shared switch takes its last program again


def test_embedded_refuses_a_varbit_digest_at_its_line(tmp_path):
    path = _program(tmp_path, "varbit")
    with pytest.raises(P4CompileError) as err:
        compile_file(str(path))
    assert f"{path.name}:{LINE}:" in str(err.value)
    assert "varbit" in str(err.value)


@pytest.mark.parametrize("kind, values", [("int", (2, 2)), ("bool", (2, 1))])
def test_embedded_runs_signed_and_boolean_members(tmp_path, kind, values):
    dp = compile_file(str(_program(tmp_path, kind))).instantiate()
    frame = bytes(6) + bytes.fromhex("0000000000AA") + b"\x08\x00" + bytes([2, 0xAB, 0xCD])
    result = dp.process(0, frame)
    assert [(d.name, d.values) for d in result.digests] == [("learn_t", values)]


@pytest.mark.parametrize("call, why", [
    ("digest(1, {hdr.opt.len, hdr.opt.data});", "varbit fields in a digest's data"),
    ('log_msg("len {} data {}", {hdr.opt.len, hdr.opt.data});',
     "varbit fields in log_msg's arguments"),
])
def test_embedded_refuses_a_varbit_in_a_field_list_saying_where(tmp_path, call, why):
    path = tmp_path / "field_list_varbit.p4"
    path.write_text(PROGRAM.format(member="bit<8> x;", value="8w1").replace(
        "digest<learn_t>(1, {hdr.opt.len, 8w1});", call))
    with pytest.raises(P4UnsupportedError) as err:
        compile_file(str(path))
    assert f"{path.name}:16" in str(err.value) and why in str(err.value)
