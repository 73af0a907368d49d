"""Front-end coverage: declarations and constructs real v1model programs use, and the names
ProgramInfo gives them (p4c's naming)."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hina.controller import bmv2
from hina.softswitch.api import ActionCall, Exact, P4UnsupportedError, TableEntry
from hina.softswitch.compiler import compile_file, compile_source, generate_python, preprocess
from hina.softswitch.p4info import build_p4info, read_p4info_text

PROGRAM = r"""
#include <core.p4>
#include <v1model.p4>

#define SLOTS 4
const bit<16> ETHERTYPE = 0x88B5;
const int SHIFT = 2;
typedef bit<48> mac_t;
typedef mac_t   alias_t;
type bit<8>     opcode_t;

enum bit<8> Op { ADD = 1, MAX = 2, OR = 8 }
enum Color { RED, GREEN }

@controller_header("packet_in")
header cpu_t { bit<9> port; bit<7> pad; }

header eth_t { alias_t dst; mac_t src; bit<16> etype; }
header op_t { Op op; bit<8> a; bit<8> b; bit<8> r; bit<(SHIFT * 4)> w; }
struct h_t { cpu_t cpu; eth_t eth; op_t op; }
struct m_t { Color c; bit<8> tmp; }
error { NotAnOp }

register<bit<8>>(SLOTS) top_reg;

bit<8> max8(in bit<8> x, in bit<8> y) { return x > y ? x : y; }

parser P(packet_in pkt, out h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { ETHERTYPE: parse_op; default: accept; }
    }
    state parse_op {
        pkt.extract(hdr.op);
        verify(hdr.op.op != (Op) 8w0, error.NotAnOp);
        transition accept;
    }
}
control VC(inout h_t hdr, inout m_t meta) { apply { } }

control Lane(inout h_t hdr, inout m_t meta) {
    @name("apply_op") action do_op(bit<8> bias) {
        hdr.op.r = max8(hdr.op.a, hdr.op.b) + bias;
    }
    table lane_t {
        key = { hdr.op.op: exact @name("opcode"); }
        actions = { do_op; @defaultonly NoAction; }
        size = 16;
    }
    apply { lane_t.apply(); }
}

control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    Lane() lane;
    bit<8> scratch = 3;
    apply {
        std.egress_spec = 1;
        if (std.parser_error == error.NotAnOp) { mark_to_drop(std); return; }
        lane.apply(hdr, meta);
        top_reg.read(scratch, 0);
        top_reg.write(0, scratch + 1);
        if (hdr.op.op == Op.OR) { hdr.op.r = hdr.op.a | hdr.op.b; }
        meta.c = Color.GREEN;
        if (meta.c == Color.GREEN) { hdr.op.w = hdr.op.w |+| 1; }
    }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) { apply { } }
control CC(inout h_t hdr, inout m_t meta) { apply { } }
control D(packet_out pkt, in h_t hdr) { apply { pkt.emit(hdr); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
ETH = bytes(12) + b"\x88\xb5"


@pytest.fixture(scope="module")
def program():
    return compile_source(PROGRAM, "constructs.p4")


def test_names_follow_p4c(program):
    info = program.info
    t = info.table("I.lane.lane_t")
    assert [(f.name, f.bitwidth) for f in t.match_fields] == [("opcode", 8)]
    assert t.size == 16
    assert [r.name for r in t.action_refs] == ["I.lane.apply_op", "NoAction"]
    assert t.action_refs[1].scope == "DEFAULT_ONLY"
    assert [(r.name, r.bitwidth, r.size) for r in info.registers] == [("top_reg", 8, 4)]
    assert info.controller_headers[0].name == "packet_in"
    assert [(f.name, f.bitwidth) for f in info.controller_headers[0].metadata] == [("port", 9), ("pad", 7)]


def test_nested_control_functions_enums_and_locals(program):
    dp = program.instantiate()
    dp.table_insert(TableEntry("I.lane.lane_t", (Exact(1),), ActionCall("I.lane.apply_op", (10,))))
    out = dp.process(0, ETH + bytes([1, 5, 9, 0, 0xFF])).outputs
    assert out == [(1, ETH + bytes([1, 5, 9, 19, 0xFF]))]             # max(5, 9) + 10; w saturates
    out = dp.process(0, ETH + bytes([8, 5, 9, 0, 7])).outputs
    assert out == [(1, ETH + bytes([8, 5, 9, 13, 8]))]               # OR, table miss
    assert dp.register_read("top_reg", 0) == 2


def test_verify_sets_parser_error(program):
    dp = program.instantiate()
    assert dp.process(0, ETH + bytes([0, 1, 2, 3, 4])).outputs == []


def test_generated_python_is_inspectable():
    src = generate_python(preprocess(PROGRAM, "constructs.p4"), "constructs.p4")
    assert "def build(RT, C, REG):" in src and "class H_eth_t:" in src


@pytest.mark.parametrize("snippet, what", [
    ("extern Foo { Foo(); } Foo() foo_inst;", "extern Foo"),
])
def test_valid_but_unsupported_constructs_say_so(snippet, what):
    src = PROGRAM.replace("register<bit<8>>(SLOTS) top_reg;", snippet + "\nregister<bit<8>>(SLOTS) top_reg;")
    with pytest.raises(P4UnsupportedError) as exc:
        compile_source(src, "u.p4")
    assert what in str(exc.value) and "u.p4:" in str(exc.value)


def test_type_parameter_names_stay_usable_as_variables():
    """v1model's type parameters (T, H, M, O, D, I) are scoped to their declarations."""
    src = PROGRAM.replace("bit<8> scratch = 3;", "bit<8> scratch = 3; bit<8> T = 1; bit<8> H = 2;")
    src = src.replace("top_reg.write(0, scratch + 1);", "top_reg.write(0, scratch + T + H - 2);")
    dp = compile_source(src, "params.p4").instantiate()
    dp.process(0, ETH + bytes([8, 5, 9, 0, 7]))
    assert dp.register_read("top_reg", 0) == 0 + 1 + 2 - 2


CTOR_TMP = Path(__file__).resolve().parents[1] / "conformance" / "programs" / "ctor_arg_temporaries.p4"


@pytest.mark.parametrize("old, new, why", [
    # p4c-bm2-ss 1.2.5.16's SideEffectOrdering declares temporaries for a call or ?: inside a
    # right side, which its SimplifyDefUse drops where the value is dead (here hdr.k.r1, which
    # extract overwrites: no temporaries left; checked with --p4runtime-files): counted only in
    # a control, for a field of an inout parameter nothing may write after (m.apply(hdr) may)
    ("state start { pkt.extract(hdr.k);",
     "state start { hdr.k.r1 = pkt.lookahead<bit<8>>() + 1; pkt.extract(hdr.k);",
     "a call or ?: inside a right side (p4c keeps its temporaries only where the value is used)"),
    ("std.egress_spec = 1;", "std.egress_spec = 1; hdr.k.r1 = hdr.k.a > 1 ? 8w1 : 8w2;",
     "a call or ?: inside a right side whose value p4c may find dead (written again at t.p4:65"),
    # a local variable, action parameter: p4c's UniqueNames / UniqueParameters rename it (a
    # local tmp_5 becomes tmp) and SimplifyDefUse may drop it; the embedded target refuses
    ("bit<8> v;\n        r.read(v, 1);",
     "bit<8> tmp_0;\n        r.read(tmp_0, 1);\n        bit<8> v = tmp_0;", "the name tmp_0"),
    ("apply { inner.apply(hdr.k.r2); }",
     "action set_r1(bit<8> tmp_1) { hdr.k.r1 = tmp_1; }\n"
     "    apply { inner.apply(hdr.k.r2); set_r1(3); }",
     "the name tmp_1"),
    # in main's arguments: p4c-bm2-ss 1.2.5.16 crashes (SIGSEGV)
    ("V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(),",
     "control E2(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std)"
     "(register<bit<8>> rr, cfg_t cf) {\n    Acc(rr, cf) a2;\n"
     "    apply { a2.apply(hdr.k.r3); }\n}\n"
     "V1Switch(MyParser(), MyVerify(), MyIngress(), E2(register<bit<8>>(8), (cfg_t) { 2, 0xF0 }),",
     "p4c-bm2-ss 1.2.5.16 crashes"),
])
def test_moved_ctor_temporaries_refused_where_p4c_numbers_its_own_first(old, new, why):
    src = CTOR_TMP.read_text()
    assert old in src
    with pytest.raises(P4UnsupportedError) as exc:
        compile_source(src.replace(old, new, 1), "t.p4")
    assert why in str(exc.value) and "t.p4:" in str(exc.value)


_MX = "bit<8> mx(in bit<8> a, in bit<8> b) { if (a > b) { return a; } return b; }\nstruct cfg_t"


@pytest.mark.skipif(shutil.which(bmv2.P4C_BM2_SS) is None, reason=bmv2.missing() or "")
@pytest.mark.parametrize("edits", [
    # SideEffectOrdering: && over two calls (5 temporaries), ?: over calls (3), an if in a
    # parser state (RemoveParserIfs: a select, 3), an inout argument aliasing another (1)
    [("struct cfg_t", _MX), ("std.egress_spec = 1;", "std.egress_spec = 1; if (mx(hdr.k.a, 1) "
                             "== 1 && mx(hdr.k.b, 2) == 2) { hdr.k.r1 = 1; } if (hdr.k.a == 1 ? "
                             "mx(hdr.k.a, 3) == 3 : hdr.k.b == 4) { hdr.k.r2 = 2; }")],
    [("state start { pkt.extract(hdr.k); transition accept; }",
      "state start { pkt.extract(hdr.k); if (pkt.lookahead<bit<8>>() == 1) { hdr.k.r1 = 1; } "
      "transition accept; }"),
     ("std.egress_spec = 1;", "std.egress_spec = 1; hash(hdr.k.r1, HashAlgorithm.crc16, 8w0, "
                              "{hdr.k.r1, hdr.k.a}, 8w255);")],
    # a binary operation copies its left operand before a right one with a call (1 + mx: none;
    # a + mx: one; three calls: 8); a right side with a call or ?:, live (a field of an inout
    # parameter nothing writes after): its temporaries count (4 + 1 for the ?:)
    [("struct cfg_t", _MX), ("std.egress_spec = 1;", "std.egress_spec = 1; if (8w1 + mx(hdr.k.b, "
                             "2) == 3 || hdr.k.a + mx(hdr.k.b, 2) == 3) { hdr.k.r1 = 1; } if (mx("
                             "hdr.k.a, 1) + mx(hdr.k.b, 2) + mx(hdr.k.a, 3) == 3) "
                             "{ hdr.k.r1 = 2; }"),
     ("            o.apply(hdr);\n        }\n", "            o.apply(hdr);\n        }\n"
      "        hdr.k.r3 = hdr.k.a + mx(hdr.k.b, 2) + 1;\n        hdr.k.r2 = hdr.k.a > 1 ? 8w1 : "
      "8w2;\n")],
    # a control with constructor parameters p4c does not specialise, instantiated twice (the
    # instances share the names); a parameter tmp_0 of a control p4c specialises, which its
    # SideEffectOrdering temporaries skip and the moved externs do not
    [("control Outer(inout headers_t hdr) {", "control Outer(inout headers_t hdr)(cfg_t q) {"),
     ("Outer() o;", "Outer((cfg_t) {1, 2}) o;\n    Outer((cfg_t) {5, 2}) o2;"),
     ("o.apply(hdr);", "o.apply(hdr); o2.apply(hdr);"),
     ("control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {",
      "control E(inout bit<8> tmp_0)(bit<8> k) {\n    apply { tmp_0 = tmp_0 + k; }\n}\n"
      "control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {"
      "\n    E(3) e3;"),
     ("apply { acc2.apply(hdr.k.r3); }", "apply { acc2.apply(hdr.k.r3); e3.apply(hdr.k.r1); }"),
     ("transition accept; }", "transition select(pkt.lookahead<bit<8>>()) { default: accept; } }")],
])
def test_moved_ctor_temporaries_named_as_p4c_names_them(edits, tmp_path, monkeypatch):
    """Variants of ``programs/ctor_arg_temporaries`` beyond the corpus's: the P4Info (the moved
    externs' names among it) is the one p4c-bm2-ss writes."""
    src = CTOR_TMP.read_text()
    for old, new in edits:
        assert old in src, old
        src = src.replace(old, new, 1)
    (tmp_path / "moved.p4").write_text(src)
    # a relative path: p4c's preprocessed text, the key of its cached builds, names the file
    monkeypatch.chdir(tmp_path)
    expected = read_p4info_text(str(bmv2.compile_p4c(Path("moved.p4")).p4info))
    assert build_p4info(compile_file(tmp_path / "moved.p4").info) == expected


def test_header_constructor_parameter_is_a_valid_constant():
    """A control constructor parameter of header type, given a header initializer: a valid
    header whose fields fold as constants (P4_16 spec). Not in the conformance corpus:
    p4c-bm2-ss 1.2.5.16 crashes on it ("Compiler Bug: def_use.h:320: Null location"), so BMv2
    cannot run it."""
    src = (CTOR_TMP.parent / "ctor_param_tuple.p4").read_text()
    src = src.replace("struct headers_t", "header p_t { bit<8> x; bit<8> y; }\nstruct headers_t")
    src = src.replace("tuple<bit<8>, bit<8>, bool> t", "p_t t")
    src = src.replace("t[0] + t[1]", "t.x + t.y").replace("t[2]", "t.isValid()").replace("^ t[0]", "^ t.x")
    src = src.replace("{ 8w3, 8w4, true }", "(p_t) { 3, 4 }").replace("{ 8w250, 8w10, false }",
                                                                     "(p_t) { y = 10, x = 250 }")
    dp = compile_source(src, "hdr_ctor.p4").instantiate()
    k = dp.process(0, bytes([1, 0, 0, 0, 0]) + bytes(14)).outputs[0][1][:5]
    assert k == bytes([1, 7, 1 ^ 3, 0, 0])
    k = dp.process(0, bytes([2, 0, 0, 0, 0]) + bytes(14)).outputs[0][1][:5]
    assert k == bytes([2, 4, 2 ^ 250, 0, 0])
