"""P4_16 expression and statement semantics of the engine, each on a small program.

Every test compiles a tiny v1model program around a ``data_t`` header whose fields carry the
operands in and the results out, and checks the results against values computed here by hand
(P4_16 spec rules: bit<N> wraps modulo 2^N, int<N> is two's complement, etc.).
"""
from __future__ import annotations

import pytest

from hina.softswitch.compiler import compile_source

ETHERTYPE = 0x88B5
ETH = bytes.fromhex("0000000000aa0000000000bb") + ETHERTYPE.to_bytes(2, "big")

SCAFFOLD = """
#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> etype; }}
header data_t {{ {fields} }}
{extra_types}
struct headers_t {{ eth_t eth; data_t d; {extra_headers} }}
struct meta_t {{ {meta} }}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {{
    state start {{
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) {{ 0x88B5: parse_d; default: accept; }}
    }}
    state parse_d {{ pkt.extract(hdr.d); transition accept; }}
}}
control VC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control I(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {{
    {ingress_decls}
    apply {{
        std.egress_spec = std.ingress_port;
        {ingress}
    }}
}}
control E(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t std) {{
    {egress_decls}
    apply {{ {egress} }}
}}
control CC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers_t hdr) {{ apply {{ pkt.emit(hdr.eth); pkt.emit(hdr.d); }} }}
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
"""


def parse_fields(spec: str) -> list:
    """'bit<8> a; int<8> b;' -> [('a', 8, False), ('b', 8, True)]"""
    out = []
    for decl in filter(None, (d.strip() for d in spec.split(";"))):
        t, name = decl.rsplit(None, 1)
        kind, width = t.split("<")
        out.append((name, int(width.rstrip(">")), kind == "int"))
    return out


class Harness:
    """A compiled scaffold program plus helpers to pack operands and unpack results."""

    def __init__(self, fields: str, ingress: str = "", ingress_decls: str = "", egress: str = "",
                 egress_decls: str = "", meta: str = "", extra_types: str = "", extra_headers: str = ""):
        self.fields = parse_fields(fields)
        src = SCAFFOLD.format(fields=fields, ingress=ingress, ingress_decls=ingress_decls,
                              egress=egress, egress_decls=egress_decls, meta=meta,
                              extra_types=extra_types, extra_headers=extra_headers)
        self.program = compile_source(src, "test.p4")
        self.dp = self.program.instantiate()

    def pack(self, **values) -> bytes:
        acc, total = 0, 0
        for name, w, signed in self.fields:
            acc = (acc << w) | (values.get(name, 0) & ((1 << w) - 1))
            total += w
        return ETH + acc.to_bytes(total // 8, "big")

    def unpack(self, frame: bytes) -> dict:
        total = sum(w for _, w, _ in self.fields)
        acc = int.from_bytes(frame[len(ETH):len(ETH) + total // 8], "big")
        out = {}
        for name, w, signed in reversed(self.fields):
            v = acc & ((1 << w) - 1)
            acc >>= w
            if signed and v >> (w - 1):
                v -= 1 << w
            out[name] = v
        return out

    def run(self, port: int = 1, **values) -> dict:
        result = self.dp.process(port, self.pack(**values))
        assert len(result.outputs) == 1, result.outputs
        return self.unpack(result.outputs[0][1])


def test_bit_width_wraparound():
    h = Harness("bit<8> a; bit<8> b; bit<8> add; bit<8> sub; bit<8> mul; bit<8> neg; bit<8> inv;",
                "hdr.d.add = hdr.d.a + hdr.d.b; hdr.d.sub = hdr.d.a - hdr.d.b;"
                "hdr.d.mul = hdr.d.a * hdr.d.b; hdr.d.neg = -hdr.d.a; hdr.d.inv = ~hdr.d.a;")
    r = h.run(a=250, b=10)
    assert (r["add"], r["sub"], r["mul"], r["neg"], r["inv"]) == (4, 240, (2500) % 256, 6, 5)
    r = h.run(a=3, b=5)
    assert r["sub"] == 254


def test_signed_arithmetic_and_comparison():
    h = Harness("int<8> a; int<8> b; int<8> add; int<8> neg; bit<8> lt; bit<8> lt_u;",
                "hdr.d.add = hdr.d.a + hdr.d.b; hdr.d.neg = -hdr.d.a;"
                "hdr.d.lt = hdr.d.a < hdr.d.b ? 8w1 : 8w0;"
                "hdr.d.lt_u = (bit<8>) hdr.d.a < (bit<8>) hdr.d.b ? 8w1 : 8w0;")
    r = h.run(a=100, b=100)
    assert r["add"] == -56
    r = h.run(a=-128, b=1)
    assert r["neg"] == -128 and r["lt"] == 1 and r["lt_u"] == 0


def test_slices_as_rvalue_and_lvalue():
    h = Harness("bit<16> a; bit<8> hi; bit<4> mid; bit<4> pad; bit<16> res;",
                "hdr.d.hi = hdr.d.a[15:8]; hdr.d.mid = hdr.d.a[7:4];"
                "hdr.d.res = hdr.d.a; hdr.d.res[11:4] = 8w0xAB; hdr.d.res[0:0] = 1;")
    r = h.run(a=0x1234)
    assert (r["hi"], r["mid"]) == (0x12, 0x3)
    assert r["res"] == 0x1AB5


def test_casts_extend_and_truncate():
    h = Harness("int<8> s; bit<16> u; bit<16> sext; bit<16> zext; bit<8> trunc; int<16> s16; bit<8> b;",
                "hdr.d.sext = (bit<16>) ((int<16>) hdr.d.s);"
                "hdr.d.zext = (bit<16>) ((bit<8>) hdr.d.s);"
                "hdr.d.trunc = (bit<8>) hdr.d.u;"
                "hdr.d.s16 = (int<16>) hdr.d.u;"
                "hdr.d.b = (bit<8>) ((bit<1>) (hdr.d.u == 0x8001));")
    r = h.run(s=-2, u=0x8001)
    assert r["sext"] == 0xFFFE and r["zext"] == 0x00FE and r["trunc"] == 0x01
    assert r["s16"] == -0x7FFF and r["b"] == 1


def test_saturating_operators():
    h = Harness("bit<8> a; bit<8> b; int<8> s; int<8> t; bit<8> ua; bit<8> us; int<8> sa; int<8> ss;",
                "hdr.d.ua = hdr.d.a |+| hdr.d.b; hdr.d.us = hdr.d.a |-| hdr.d.b;"
                "hdr.d.sa = hdr.d.s |+| hdr.d.t; hdr.d.ss = hdr.d.s |-| hdr.d.t;")
    r = h.run(a=200, b=100, s=100, t=-100)
    assert (r["ua"], r["us"], r["sa"], r["ss"]) == (255, 100, 0, 127)
    r = h.run(a=10, b=100, s=-100, t=100)
    assert (r["ua"], r["us"], r["sa"], r["ss"]) == (110, 0, 0, -128)


@pytest.mark.parametrize("amount", [0, 1, 7, 8, 31, 32, 33, 200])
def test_shifts_by_runtime_amounts(amount):
    h = Harness("bit<8> a; int<8> s; bit<8> n; bit<8> shl; bit<8> shr; int<8> sshr; bit<32> wide;",
                "hdr.d.shl = hdr.d.a << hdr.d.n; hdr.d.shr = hdr.d.a >> hdr.d.n;"
                "hdr.d.sshr = hdr.d.s >> hdr.d.n; hdr.d.wide = ((bit<32>) hdr.d.a) << hdr.d.n;")
    r = h.run(a=0x81, s=-0x7F, n=amount)
    assert r["shl"] == (0x81 << amount) & 0xFF
    assert r["shr"] == 0x81 >> amount
    assert r["sshr"] == -0x7F >> min(amount, 8)
    assert r["wide"] == (0x81 << amount) & 0xFFFFFFFF


def test_concatenation_and_constants():
    h = Harness("bit<8> a; bit<4> b; bit<4> pad; bit<12> cat; bit<4> pad2; bit<16> k;",
                "hdr.d.cat = hdr.d.a ++ hdr.d.b;"
                "hdr.d.k = (16w7 * 3 + 0x10) % 5 + (bit<16>) (8w0xF0 ++ 8w0x0F)[15:8];",
                ingress_decls="")
    r = h.run(a=0xAB, b=0xC)
    assert r["cat"] == 0xABC
    assert r["k"] == ((7 * 3 + 0x10) % 5) + 0xF0


def test_struct_and_header_initialisers_and_locals():
    h = Harness("bit<8> a; bit<8> b; bit<8> x; bit<8> y;",
                ingress_decls="bit<8> scratch;",
                ingress="pair_t p = { hdr.d.b, hdr.d.a }; scratch = p.first;"
                        "pair_t q = { first = 8w1, second = 8w2 };"
                        "hdr.d.x = scratch; hdr.d.y = q.second + p.second;",
                extra_types="struct pair_t { bit<8> first; bit<8> second; }")
    r = h.run(a=5, b=9)
    assert (r["x"], r["y"]) == (9, 7)


def test_register_persistence_and_out_of_range():
    h = Harness("bit<32> idx; bit<32> val; bit<32> old;",
                ingress_decls="register<bit<32>>(8) r;",
                ingress="r.read(hdr.d.old, hdr.d.idx); r.write(hdr.d.idx, hdr.d.val);")
    assert h.run(idx=3, val=11)["old"] == 0
    assert h.run(idx=3, val=12)["old"] == 11
    assert h.run(idx=99, val=13)["old"] == 0          # out of range: read gives 0
    assert h.run(idx=99, val=14)["old"] == 0          # ... and the write was ignored
    assert h.dp.register_read("I.r", 3) == 12
    h.dp.register_write("I.r", 3, 77)
    assert h.run(idx=3, val=0)["old"] == 77


def test_counters_count_packets_and_bytes():
    h = Harness("bit<32> idx;", ingress_decls="counter(4, CounterType.packets_and_bytes) c;",
                ingress="c.count(hdr.d.idx);")
    frame_len = len(h.pack(idx=2))
    h.run(idx=2)
    h.run(idx=2)
    h.run(idx=9)                                      # out of range: ignored
    assert h.dp.counter_read("I.c", 2) == (2 * frame_len, 2)
    assert h.dp.counter_read("I.c", 0) == (0, 0)
    assert h.program.info.counters[0].unit == "BOTH"


def test_meter_unconfigured_is_green_and_configured_turns_red():
    h = Harness("bit<32> idx; bit<8> color;", ingress_decls="meter(4, MeterType.packets) m;",
                ingress="m.execute_meter(hdr.d.idx, hdr.d.color);")
    assert h.run(idx=1)["color"] == 0
    h.dp.meter_set("I.m", 1, cir=1, cburst=1, pir=1, pburst=2)
    colors = [h.run(idx=1)["color"] for _ in range(4)]
    assert colors[0] == 0 and colors[-1] == 2


def test_exit_ends_the_control():
    h = Harness("bit<8> a; bit<8> b;", "hdr.d.a = 1; if (hdr.d.b == 0) { exit; } hdr.d.a = 2;")
    assert h.run(b=0)["a"] == 1
    assert h.run(b=1)["a"] == 2


def test_functions_and_action_calls_with_out_params():
    h = Harness("bit<8> a; bit<8> b; bit<8> c;",
                ingress_decls="action twice(in bit<8> x, out bit<8> y) { y = x + x; }"
                              "action set_c(bit<8> v) { hdr.d.c = v; }",
                ingress="twice(hdr.d.a, hdr.d.b); set_c(8w42);")
    r = h.run(a=21)
    assert (r["b"], r["c"]) == (42, 42)


def test_switch_on_value_with_fallthrough():
    h = Harness("bit<8> a; bit<8> res;",
                "switch (hdr.d.a) { 1: 2: { hdr.d.res = 12; } 3: { hdr.d.res = 3; } "
                "default: { hdr.d.res = 99; } }")
    assert [h.run(a=v)["res"] for v in (1, 2, 3, 4)] == [12, 12, 3, 99]


def test_named_arguments_are_matched_by_name():
    h = Harness("bit<8> a; bit<8> b;",
                ingress_decls="action put(in bit<8> x, out bit<8> y) { y = x + 1; }",
                ingress="put(y = hdr.d.b, x = hdr.d.a);")
    assert h.run(a=41)["b"] == 42


def test_header_validity_copy_and_size_methods():
    h = Harness("bit<8> a; bit<8> valid_before; bit<8> valid_after; bit<16> size;",
                "hdr.x = { 8w1, 8w2 }; hdr.y = hdr.x; hdr.y.f1 = 9;"
                "hdr.d.valid_before = hdr.y.isValid() ? 8w1 : 8w0;"
                "hdr.d.a = hdr.x.f1 + hdr.y.f1 + hdr.y.f2;"
                "hdr.x.setInvalid();"
                "hdr.d.valid_after = hdr.x.isValid() ? 8w1 : 8w0;"
                "hdr.d.size = (bit<16>) (hdr.d.minSizeInBits() + hdr.y.minSizeInBytes());",
                extra_types="header pair_h { bit<8> f1; bit<8> f2; }",
                extra_headers="pair_h x; pair_h y;")
    r = h.run()
    assert (r["a"], r["valid_before"], r["valid_after"], r["size"]) == (12, 1, 0, 40 + 2)


def test_header_stack_push_and_pop():
    h = Harness("bit<8> n0; bit<8> n1; bit<8> n2; bit<8> v2;",
                "hdr.st[0].setValid(); hdr.st[0].v = 7; hdr.st.push_front(2);"
                "hdr.d.n0 = hdr.st[0].isValid() ? 8w1 : 8w0;"
                "hdr.d.v2 = hdr.st[2].v;"
                "hdr.st.pop_front(2);"
                "hdr.d.n1 = hdr.st[0].v; hdr.d.n2 = hdr.st[2].isValid() ? 8w1 : 8w0;",
                extra_types="header slot_h { bit<8> v; }",
                extra_headers="slot_h[3] st;")
    r = h.run()
    assert (r["n0"], r["v2"], r["n1"], r["n2"]) == (0, 7, 7, 0)


def test_sub_control_with_scalar_inout_parameter():
    h = Harness("bit<8> a; bit<8> b;",
                "Bump.apply(hdr.d.a, hdr.d.b);".replace("Bump", "bump"),
                ingress_decls="Bump() bump;",
                extra_types="control Bump(inout bit<8> x, in bit<8> by) {"
                            "  apply { if (by == 0) { return; } x = x + by; } }")
    assert h.run(a=5, b=3)["a"] == 8
    assert h.run(a=5, b=0)["a"] == 5
