"""Tables, the control-plane API, the packet replication engine, externs and parser behaviour."""
from __future__ import annotations

import zlib

import pytest

from hina.softswitch.api import (ActionCall, CloneSession, ControlError, Exact, Lpm, Range, Replica,
                            TableEntry, Ternary)
from hina.softswitch.compiler import compile_source
from hina.softswitch.engine.externs import crc16_arc
from test_engine_semantics import ETH, Harness

TABLES = """
    action set(bit<8> v) { hdr.d.res = v; }
    action drop() { mark_to_drop(std); }
    table t_ternary {
        key = { hdr.d.k: ternary; }
        actions = { set; NoAction; }
        default_action = set(0xEE);
        size = 4;
    }
    table t_lpm {
        key = { hdr.d.k32: lpm @name("dst"); }
        actions = { set; drop; }
        default_action = drop();
    }
    table t_exact {
        key = { hdr.d.k: exact; hdr.d.k32: exact; }
        actions = { set; @defaultonly NoAction; }
        const default_action = NoAction();
    }
    table t_range {
        key = { hdr.d.k: range; }
        actions = { set; }
        default_action = set(0);
    }
"""
FIELDS = "bit<8> k; bit<32> k32; bit<8> which; bit<8> res;"
APPLY = """
    if (hdr.d.which == 0) { t_ternary.apply(); }
    else if (hdr.d.which == 1) { t_lpm.apply(); }
    else if (hdr.d.which == 2) { t_exact.apply(); }
    else { t_range.apply(); }
"""


@pytest.fixture
def tables() -> Harness:
    return Harness(FIELDS, APPLY, TABLES)


def entry(table, matches, action, args=(), priority=0):
    return TableEntry(f"I.{table}", tuple(matches), ActionCall(f"I.{action}", tuple(args)), priority)


def test_ternary_higher_priority_wins(tables):
    tables.dp.table_insert(entry("t_ternary", [Ternary(0x10, 0xF0)], "set", [1], priority=10))
    tables.dp.table_insert(entry("t_ternary", [Ternary(0x12, 0xFF)], "set", [2], priority=20))
    assert tables.run(k=0x12, which=0)["res"] == 2
    assert tables.run(k=0x13, which=0)["res"] == 1
    assert tables.run(k=0x23, which=0)["res"] == 0xEE


def test_lpm_longest_prefix_and_default(tables):
    dp = tables.dp
    dp.table_insert(entry("t_lpm", [Lpm(0x0A000000, 8)], "set", [8]))
    dp.table_insert(entry("t_lpm", [Lpm(0x0A010000, 16)], "set", [16]))
    dp.table_insert(entry("t_lpm", [Lpm(0x0A010200, 24)], "set", [24]))
    assert tables.run(k32=0x0A010203, which=1)["res"] == 24
    assert tables.run(k32=0x0A01FF03, which=1)["res"] == 16
    assert tables.run(k32=0x0AFF0000, which=1)["res"] == 8
    assert dp.process(1, tables.pack(k32=0x0B000000, which=1)).outputs == []   # default: drop
    assert tables.program.info.table("I.t_lpm").match_fields[0].name == "dst"


def test_exact_and_range(tables):
    dp = tables.dp
    dp.table_insert(entry("t_exact", [Exact(1), Exact(0xDEADBEEF)], "set", [7]))
    assert tables.run(k=1, k32=0xDEADBEEF, which=2)["res"] == 7
    assert tables.run(k=1, k32=0xDEADBEEE, which=2)["res"] == 0
    dp.table_insert(entry("t_range", [Range(10, 20)], "set", [1], priority=1))
    dp.table_insert(entry("t_range", [Range(15, 30)], "set", [2], priority=2))
    assert [tables.run(k=k, which=3)["res"] for k in (9, 10, 16, 25, 31)] == [0, 1, 2, 2, 0]


def test_default_action_set_get_reset(tables):
    dp = tables.dp
    assert dp.table_get_default("I.t_ternary") == ActionCall("I.set", (0xEE,))
    dp.table_set_default("I.t_ternary", ActionCall("I.set", (0x42,)))
    assert tables.run(k=1, which=0)["res"] == 0x42
    dp.table_reset_default("I.t_ternary")
    assert tables.run(k=1, which=0)["res"] == 0xEE
    with pytest.raises(ControlError) as exc:
        dp.table_set_default("I.t_exact", ActionCall("I.set", (1,)))
    assert exc.value.code == "PERMISSION_DENIED"


@pytest.mark.parametrize("bad, code", [
    (entry("nope", [Exact(1)], "set", [1]), "NOT_FOUND"),
    (entry("t_exact", [Exact(1), Exact(2)], "nope", []), "NOT_FOUND"),
    (entry("t_exact", [Exact(1), Exact(2)], "drop", []), "INVALID_ARGUMENT"),     # not in table
    (TableEntry("I.t_exact", (Exact(1), Exact(2)), ActionCall("NoAction")), "INVALID_ARGUMENT"),
    (entry("t_exact", [Exact(256), Exact(2)], "set", [1]), "INVALID_ARGUMENT"),   # too wide
    (entry("t_exact", [Exact(1), Exact(2)], "set", [300]), "INVALID_ARGUMENT"),   # arg too wide
    (entry("t_exact", [Exact(1)], "set", [1]), "INVALID_ARGUMENT"),               # arity
    (entry("t_ternary", [Ternary(0x11, 0xF0)], "set", [1], priority=1), "INVALID_ARGUMENT"),
    (entry("t_ternary", [Ternary(0x10, 0xF0)], "set", [1]), "INVALID_ARGUMENT"),  # no priority
    (entry("t_lpm", [Lpm(0x0A000001, 8)], "set", [1]), "INVALID_ARGUMENT"),       # bits past /8
    (entry("t_lpm", [Lpm(0, 33)], "set", [1]), "INVALID_ARGUMENT"),
])
def test_control_plane_rejects_bad_entries(tables, bad, code):
    with pytest.raises(ControlError) as exc:
        tables.dp.table_insert(bad)
    assert exc.value.code == code


def test_duplicate_missing_and_full(tables):
    dp = tables.dp
    e = entry("t_ternary", [Ternary(0x10, 0xF0)], "set", [1], priority=1)
    dp.table_insert(e)
    with pytest.raises(ControlError) as exc:
        dp.table_insert(e)
    assert exc.value.code == "ALREADY_EXISTS"
    dp.table_modify(entry("t_ternary", [Ternary(0x10, 0xF0)], "set", [9], priority=1))
    assert tables.run(k=0x15, which=0)["res"] == 9
    dp.table_delete(e)
    with pytest.raises(ControlError) as exc:
        dp.table_delete(e)
    assert exc.value.code == "NOT_FOUND"
    for i in range(4):                               # size = 4
        dp.table_insert(entry("t_ternary", [Ternary(i, 0xFF)], "set", [1], priority=1))
    with pytest.raises(ControlError) as exc:
        dp.table_insert(entry("t_ternary", [Ternary(9, 0xFF)], "set", [1], priority=1))
    assert exc.value.code == "RESOURCE_EXHAUSTED"
    dp.table_clear("I.t_ternary")
    assert dp.table_entries("I.t_ternary") == []


def test_const_entries_are_read_only():
    h = Harness("bit<8> k; bit<8> res;",
                "t.apply();",
                "action set(bit<8> v) { hdr.d.res = v; }"
                "table t { key = { hdr.d.k: ternary; } actions = { set; }"
                "  const entries = { 0x10 &&& 0xF0 : set(1); 0x12 &&& 0xFF : set(2); _ : set(3); } }")
    assert [h.run(k=k)["res"] for k in (0x12, 0x13, 0x99)] == [1, 1, 3]      # earlier entries win
    with pytest.raises(ControlError) as exc:
        h.dp.table_insert(entry("t", [Ternary(1, 0xFF)], "set", [1], priority=1))
    assert exc.value.code == "PERMISSION_DENIED"
    assert h.program.info.table("I.t").is_const


def test_action_run_switch_and_hit_miss():
    h = Harness("bit<8> k; bit<8> res;",
                "switch (t.apply().action_run) { a: { hdr.d.res = 1; } default: { hdr.d.res = 2; } }"
                "if (u.apply().miss) { hdr.d.res = hdr.d.res + 10; }",
                "action a() { } action b() { }"
                "table t { key = { hdr.d.k: exact; } actions = { a; b; } default_action = b(); }"
                # a second table: p4c-bm2-ss (and the embedded compiler) refuse a table
                # applied twice on one path
                "table u { key = { hdr.d.k: exact; } actions = { a; b; } default_action = b(); }")
    h.dp.table_insert(entry("t", [Exact(1)], "a"))
    h.dp.table_insert(entry("u", [Exact(1)], "a"))
    assert h.run(k=1)["res"] == 1
    assert h.run(k=2)["res"] == 12


def test_direct_counter_counts_hits():
    h = Harness("bit<8> k;", "t.apply();",
                "direct_counter(CounterType.packets_and_bytes) dc;"
                "action a() { dc.count(); }"
                "table t { key = { hdr.d.k: exact; } actions = { a; NoAction; } counters = dc; }")
    e = entry("t", [Exact(5)], "a")
    h.dp.table_insert(e)
    h.run(k=5)
    h.run(k=5)
    h.run(k=6)
    assert h.dp.direct_counter_read("I.t", e) == (2 * len(h.pack()), 2)
    assert h.program.info.direct_counters[0].table == "I.t"


EGRESS_TAGS = "hdr.d.rid = (bit<8>) std.egress_rid; hdr.d.itype = (bit<8>) std.instance_type;"
PRE_FIELDS = "bit<8> mode; bit<8> rid; bit<8> itype; bit<8> passes;"


def test_multicast_replicas_carry_rids():
    h = Harness(PRE_FIELDS, "std.mcast_grp = 7;", egress=EGRESS_TAGS)
    h.dp.mcast_group_set(7, [Replica(2, 100), Replica(3, 101)])
    out = h.dp.process(1, h.pack()).outputs
    assert [(p, h.unpack(f)["rid"], h.unpack(f)["itype"]) for p, f in out] == [(2, 100, 5), (3, 101, 5)]
    h.dp.mcast_group_delete(7)
    assert h.dp.process(1, h.pack()).outputs == []          # empty group: nothing


def test_clone_i2e_and_e2e():
    h = Harness(PRE_FIELDS,
                "if (hdr.d.mode == 1) { clone(CloneType.I2E, 5); }",
                egress=EGRESS_TAGS + "if (hdr.d.mode == 2 && std.instance_type == 0) "
                                     "{ clone(CloneType.E2E, 5); }")
    h.dp.clone_session_set(CloneSession(5, (Replica(9, 0),)))
    out = h.dp.process(1, h.pack(mode=1)).outputs
    assert sorted((p, h.unpack(f)["itype"]) for p, f in out) == [(1, 0), (9, 1)]
    out = h.dp.process(1, h.pack(mode=2)).outputs
    assert sorted((p, h.unpack(f)["itype"]) for p, f in out) == [(1, 0), (9, 2)]


def test_recirculate_and_resubmit_preserve_field_lists():
    h = Harness(PRE_FIELDS,
                "meta.count = meta.count + 1;"
                "if (hdr.d.mode == 3 && meta.count < 3) { resubmit_preserving_field_list(1); }"
                "hdr.d.passes = meta.count;",
                egress="if (hdr.d.mode == 4 && hdr.d.itype < 2) {"
                       "  hdr.d.itype = hdr.d.itype + 1; recirculate_preserving_field_list(1); }",
                meta="@field_list(1) bit<8> count;")
    out = h.dp.process(1, h.pack(mode=3)).outputs
    assert [(p, h.unpack(f)["passes"]) for p, f in out] == [(0, 3)]   # BMv2: ingress_port 0
    out = h.dp.process(2, h.pack(mode=4)).outputs
    assert [(p, h.unpack(f)["itype"], h.unpack(f)["passes"]) for p, f in out] == [(0, 2, 3)]


def test_recirculation_is_bounded():
    h = Harness(PRE_FIELDS, "", egress="recirculate_preserving_field_list(0);")
    result = h.dp.process(1, h.pack(), trace=True)
    assert result.outputs == [] and any("passes" in line for line in result.trace)


def crc16_reference(data: bytes) -> int:
    """CRC-16/ARC bit by bit (poly 0x8005 reflected = 0xA001, init 0, no final xor)."""
    crc = 0
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc


def test_hash_matches_independent_references():
    h = Harness("bit<32> a; bit<16> b; bit<8> c; bit<8> pad; bit<32> crc32; bit<16> crc16; bit<16> m;",
                "hash(hdr.d.crc32, HashAlgorithm.crc32, 32w0, { hdr.d.a, hdr.d.b, hdr.d.c }, 64w0x100000000);"
                "hash(hdr.d.crc16, HashAlgorithm.crc16, 16w0, { hdr.d.a, hdr.d.b }, 32w0x10000);"
                "hash(hdr.d.m, HashAlgorithm.crc32, 16w100, { hdr.d.a }, 32w50);")
    assert crc16_reference(b"123456789") == 0xBB3D == crc16_arc(b"123456789")   # the check value
    for a, b, c in ((0, 0, 0), (0x12345678, 0xBEEF, 0x42), (0xFFFFFFFF, 0xFFFF, 0xFF)):
        r = h.run(a=a, b=b, c=c)
        data = a.to_bytes(4, "big") + b.to_bytes(2, "big") + c.to_bytes(1, "big")
        assert r["crc32"] == zlib.crc32(data)
        assert r["crc16"] == crc16_reference(data[:6])
        assert r["m"] == 100 + zlib.crc32(data[:4]) % 50


def test_parser_error_reaches_ingress():
    h = Harness("bit<32> a; bit<32> b;", "")
    prog = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header big_t { bit<64> x; }
struct h_t { eth_t eth; big_t big; }
struct m_t { }
parser P(packet_in pkt, out h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.big); transition accept; }
}
control VC(inout h_t hdr, inout m_t meta) { apply { } }
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        if (std.parser_error == error.PacketTooShort) { hdr.eth.dst = 0xEEEE; }
    }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) { apply { } }
control CC(inout h_t hdr, inout m_t meta) { apply { } }
control D(packet_out pkt, in h_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.big); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
    dp = compile_source(prog, "err.p4").instantiate()
    short = ETH + b"\x01\x02\x03"
    out = dp.process(3, short).outputs
    assert out == [(1, (0xEEEE).to_bytes(6, "big") + ETH[6:] + b"\x01\x02\x03")]
    assert h  # the scaffold compiles alongside


def test_select_masks_ranges_tuples_and_header_stacks():
    prog = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header tag_t { bit<8> kind; bit<8> more; }
header res_t { bit<8> path; bit<8> count; }
struct h_t { eth_t eth; tag_t[3] tags; res_t res; }
struct m_t { bit<8> path; }
parser P(packet_in pkt, out h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype, hdr.eth.dst[7:0]) {
            (0x8800 &&& 0xFF00, 1 .. 5): low;
            (0x8800 &&& 0xFF00, _): tags;
            default: accept;
        }
    }
    state low { meta.path = 1; transition accept; }
    state tags {
        pkt.extract(hdr.tags.next);
        transition select(hdr.tags.last.more) { 0: accept; default: tags; }
    }
}
control VC(inout h_t hdr, inout m_t meta) { apply { } }
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    apply {
        std.egress_spec = 1;
        hdr.res.setValid();
        hdr.res.path = meta.path;
        hdr.res.count = (bit<8>) (hdr.tags[0].isValid() ? 8w1 : 8w0)
                      + (hdr.tags[1].isValid() ? 8w1 : 8w0) + (hdr.tags[2].isValid() ? 8w1 : 8w0);
        if (std.parser_error == error.StackOutOfBounds) { hdr.res.path = 0xFF; }
    }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) { apply { } }
control CC(inout h_t hdr, inout m_t meta) { apply { } }
control D(packet_out pkt, in h_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.res); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
    dp = compile_source(prog, "sel.p4").instantiate()

    def run(dst_low: int, etype: int, tags: bytes = b"") -> tuple:
        frame = bytes(5) + bytes([dst_low]) + bytes(6) + etype.to_bytes(2, "big") + tags
        out = dp.process(1, frame).outputs[0][1]
        return out[14], out[15]

    assert run(3, 0x8812) == (1, 0)
    assert run(9, 0x8812, b"\x01\x01\x02\x00") == (0, 2)
    assert run(9, 0x8812, b"\x01\x01\x02\x01\x03\x01\x04\x00") == (0xFF, 3)   # 4th tag: overflow
    assert run(9, 0x0800) == (0, 0)


def test_digest_is_returned():
    h = Harness("bit<8> a; bit<16> b;",
                "digest<learn_t>(1, { hdr.d.a, hdr.d.b });",
                extra_types="struct learn_t { bit<8> a; bit<16> b; }")
    result = h.dp.process(1, h.pack(a=7, b=0x1234))
    assert [(d.name, d.values) for d in result.digests] == [("learn_t", (7, 0x1234))]
    assert [(f.name, f.bitwidth) for f in h.program.info.digests[0].fields] == [("a", 8), ("b", 16)]


def test_trace_names_parser_states_tables_and_drops(tables):
    result = tables.dp.process(1, tables.pack(k32=1, which=1), trace=True)
    text = "\n".join(result.trace)
    assert "parser state parse_d" in text
    assert "table I.t_lpm: miss" in text
    assert "dropped" in text
    short = tables.dp.process(1, ETH + b"\x01", trace=True)
    assert "parser error PacketTooShort" in short.trace


def test_digest_values_are_taken_at_end_of_ingress_once_per_packet():
    h = Harness("bit<8> a; bit<16> b;",
                "digest<learn_t>(1, { hdr.d.a, hdr.d.b }); hdr.d.a = hdr.d.a + 1;"
                "digest<learn_t>(1, { hdr.d.a, 16w9 });",
                extra_types="struct learn_t { bit<8> a; bit<16> b; }")
    result = h.dp.process(1, h.pack(a=7, b=0x1234))
    assert [(d.name, d.values) for d in result.digests] == [("learn_t", (8, 9))]


def test_plain_entries_can_be_changed_by_the_control_plane():
    h = Harness("bit<8> k; bit<8> res;", "t.apply();",
                "action set(bit<8> v) { hdr.d.res = v; }"
                "table t { key = { hdr.d.k: exact; } actions = { set; }"
                "  entries = { 1 : set(10); 2 : set(20); } }")
    info = h.program.info.table("I.t")
    assert info.has_initial_entries and not info.is_const
    assert h.run(k=2)["res"] == 20
    h.dp.table_delete(entry("t", [Exact(2)], "set", [20]))
    h.dp.table_insert(entry("t", [Exact(3)], "set", [30]))
    assert (h.run(k=2)["res"], h.run(k=3)["res"]) == (0, 30)


def test_e2e_clone_of_a_recirculating_packet_and_clone_loops_are_bounded():
    h = Harness(PRE_FIELDS, "",
                egress=EGRESS_TAGS + "if (hdr.d.passes == 0 && hdr.d.mode == 5) { hdr.d.passes = 1;"
                                     "  clone(CloneType.E2E, 5); recirculate_preserving_field_list(0); }"
                                     "if (hdr.d.mode == 9) { clone(CloneType.E2E, 5); }")
    h.dp.clone_session_set(CloneSession(5, (Replica(9, 0),)))
    out = h.dp.process(1, h.pack(mode=5)).outputs
    # the clone leaves on 9 (instance_type 2); the original comes back on port 0 (BMv2 sets
    # instance_type NORMAL again for a unicast packet, so egress sees 0)
    assert sorted((p, h.unpack(f)["itype"], h.unpack(f)["passes"]) for p, f in out) == \
        [(0, 0, 1), (9, 2, 1)]
    result = h.dp.process(1, h.pack(mode=9), trace=True)     # every clone clones again
    assert 0 < len(result.outputs) <= 16 and any("clones" in line for line in result.trace)


def test_hash_leaves_out_fields_of_invalid_headers():
    """BMv2 builds the hashed bytes from valid headers only (its field-list deparser skips
    invalid ones)."""
    h = Harness("bit<8> a; bit<8> mode; bit<32> h;",
                "if (hdr.d.mode == 1) { hdr.x.setValid(); hdr.x.f = 0xBEEF; }"
                "hash(hdr.d.h, HashAlgorithm.crc32, 32w0, { hdr.d.a, hdr.x.f }, 64w0x100000000);",
                extra_types="header x_h { bit<16> f; }", extra_headers="x_h x;")
    assert h.run(a=0x42, mode=0)["h"] == zlib.crc32(b"\x42")
    assert h.run(a=0x42, mode=1)["h"] == zlib.crc32(b"\x42\xbe\xef")


def test_lookahead_of_a_header_and_advance():
    prog = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header calc_t { bit<8> p; bit<8> four; bit<8> op; }
struct h_t { eth_t eth; calc_t calc; }
struct m_t { }
parser P(packet_in pkt, out h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    state start {
        pkt.advance(48);
        pkt.extract(hdr.eth);
        transition select(pkt.lookahead<calc_t>().p, pkt.lookahead<calc_t>().four) {
            (0x50, 0x34): parse_calc;
            default: accept;
        }
    }
    state parse_calc { pkt.extract(hdr.calc); transition accept; }
}
control VC(inout h_t hdr, inout m_t meta) { apply { } }
control I(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) {
    apply { std.egress_spec = 1; if (hdr.calc.isValid()) { hdr.calc.op = 0xAA; } }
}
control E(inout h_t hdr, inout m_t meta, inout standard_metadata_t std) { apply { } }
control CC(inout h_t hdr, inout m_t meta) { apply { } }
control D(packet_out pkt, in h_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.calc); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""
    dp = compile_source(prog, "calc.p4").instantiate()
    pad = bytes(6)
    assert dp.process(0, pad + ETH + b"\x50\x34\x01").outputs == [(1, ETH + b"\x50\x34\xaa")]
    assert dp.process(0, pad + ETH + b"\x50\x35\x01").outputs == [(1, ETH + b"\x50\x35\x01")]
