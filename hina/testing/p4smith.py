"""Random v1model programs for differential testing (P4Smith-like, seeded).

:func:`generate` writes one well-typed program from a seed, with what ordinary v1model programs
use (:data:`FEATURES` lists it all; each is a row of ``docs/p4-conformance.md``'s table):

* a parser over several headers (a first header always extracted, then optional ones, a
  header stack with ``.next``/``.last``, a ``lookahead`` dispatch state): ``select`` on one
  field or a tuple, with values, masks (``&&&``), ranges (``..``), ``_`` and a ``default``
  always (BMv2 departs from the specification without one), ``verify`` with a declared error;
* an ingress of expressions over the fields (every arithmetic, bitwise, saturating and shift
  operator, slices, casts, ``++``, ``?:``, signed forms), ``if``/``else``, blocks guarded by
  ``isValid()``, ``setValid`` (with every field assigned), ``setInvalid``, header and struct
  copies, local variables and local header copies, functions with early ``return``, actions
  with ``in``/``out``/``inout`` parameters called directly, ``exit`` and ``return``, stack
  ``push_front``/``pop_front``, ``std.parser_error``;
* tables with ``exact``, ``lpm``, ``ternary`` and ``isValid()`` keys, ``const entries`` (with
  masks and ``_``) or ``entries`` with ``priority=``, default actions with arguments, applied
  plainly, for ``.hit``/``.miss`` or in ``switch (t.apply().action_run)``;
* deterministic externs: ``hash`` (crc16, crc32, identity, csum16), registers read and
  written, counters, ``mark_to_drop``, ``egress_spec`` from constants and fields, ``digest``
  (a struct type of its own per call site, fields of 1 to 48 bits), a multicast group and an
  I2E clone (:data:`MCAST_GROUP`, :data:`CLONE_SESSION`: p4diff configures them) with egress
  reading ``egress_rid`` and ``instance_type``; a second pass at most per packet
  (``resubmit``, ``recirculate``, an E2E clone; ``meta.pass`` kept by field list 1);
* an egress of assignments and a deparser emitting every header in a random order (invalid
  ones emit nothing); now and then a ``truncate`` at the end of ingress or egress (a stream
  of its own, as the checksums');
* ``verify_checksum`` and ``update_checksum`` (``csum16``, with or without the payload) over
  fields of headers and metadata into a 16-bit header field (not in the list), each guarded
  by the validity of every header it names, the verify control's result read in ingress
  (``std.checksum_error``): :mod:`hina.testing.p4smith_checksums`, drawn from a stream of
  their own, so that the rest of a seed's program is what it was before them (ingress's
  reads of ``std.checksum_error`` apart).

Tables are :mod:`hina.testing.p4smith_tables`'s, the parser :mod:`hina.testing.p4smith_parser`'s.

A program reads a header's fields only where the header is known valid (the first header, a
block guarded by ``isValid()``, after ``setValid`` and an assignment of each field), so its
outputs are specified: a disagreement is a bug of one target. :func:`packets` draws frames that
follow the parser's paths (select values, masks and ranges hit, lookahead bytes, stacks
filled and overflowed, now and then a frame cut short: ``PacketTooShort``). The same program
and frames run on two targets must give the same output bytes, registers and counters:
``tests/conformance/test_differential.py`` runs a few seeds on the embedded target and BMv2;
``bench/p4_differential.py`` runs many. The frames and the run on both targets are
:mod:`hina.testing.p4diff`'s.

Example::

    >>> from hina.testing.p4smith import generate
    >>> prog = generate(7)
    >>> "V1Switch" in prog.source
    True
"""
from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field as dc_field

from .p4smith_checksums import ChecksumGen, checksum_rng
from .p4smith_parser import ParserGen
from .p4smith_tables import TableGen

#: field widths the generator draws from (byte-aligned: a header is a whole number of bytes)
WIDTHS = (8, 16, 32)
#: header fields: single widths and runs of narrower fields that fill whole bytes, as ordinary
#: headers have them (IPv4's 4+4, 3+13, MAC addresses' 48, a VLAN tag's 3+1+12)
FIELD_RUNS = ((8,), (16,), (32,), (8,), (16,), (32,), (48,), (4, 4), (3, 13), (1, 7),
              (3, 1, 12), (6, 2), (64,))
#: frames shorter than this are refused by veths (BMv2's ports)
MIN_FRAME = 14
#: Ethernet types whose tag the kernel takes off a received frame (802.1Q, 802.1ad; VLAN
#: offload): it comes back in the frame's ``PACKET_AUXDATA`` and the BMv2 harness and libpcap
#: put it back, but a frame too short to hold the tag and the next type is dropped
#: (``skb_vlan_untag``), on a veth in either direction (tests/controller/test_veth_frames.py).
#: (Seed 56 first sent a VLAN frame; until 2026-11-27 the harness lost the tag and no frame
#: with one of these types was generated.)
VLAN_ETHER_TYPES = (0x8100, 0x88A8)
#: the shortest frame with a :data:`VLAN_ETHER_TYPES` type at bytes 12..13 a veth carries
MIN_VLAN_FRAME = MIN_FRAME + 6
BINARY_OPS = ("+", "-", "*", "&", "|", "^", "|+|", "|-|")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")
HASHES = ("crc16", "crc32", "identity", "csum16")
#: the multicast group and clone session a program may use, as p4diff configures them on both
#: targets: the group replicates to ports 1, 2 and 3 with rids 7, 8, 9; the session clones to
#: port 3
MCAST_GROUP, MCAST_REPLICAS = 1, ((1, 7), (2, 8), (3, 9))
CLONE_SESSION, CLONE_PORT = 5, 3
#: widths of a digest's fields (BMv2's P4Runtime server takes bit<W> members only)
DIGEST_WIDTHS = (1, 3, 8, 9, 16, 32, 48)


#: the language features the generator emits (the coverage report's rows, in order); each is a
#: row of docs/p4-conformance.md's feature table
FEATURES = tuple(f"op {op}" for op in BINARY_OPS) + (
    "op ~", "shift by a constant", "shift by a field", "slice", "concatenation ++",
    "conditional ?:", "cast between widths", "signed cast int<W>", "signed |+| |-| + *",
    "signed >> (arithmetic)", "sign extension", "signed comparison",
) + tuple(f"compare {op}" for op in COMPARE_OPS) + (
    "! on a condition", "&& / ||", "if", "if/else",
    # parser
    "parser: optional headers", "select on a field", "select on a tuple", "select mask &&&",
    "select range ..", "select _", "select default", "verify", "header stack .next/.last",
    "lookahead in select",
    # controls
    "isValid() guard", "isValid() in a condition", "setValid", "setInvalid",
    "header copy (validity too)", "struct copy", "local variable", "local header copy",
    "action in/out/inout called directly", "function call", "function early return",
    "switch on a value", "exit", "return", "std.parser_error", "standard_metadata read",
    "fields of other widths (4+4, 3+13, 48, 64)", "exit in a table's action",
    "stack push_front/pop_front", "egress statements",
    # tables
    "exact key", "lpm key", "ternary key", "isValid() key", "two keys", "const entries",
    "const entries _", "entries with priority", "action parameter", "default action",
    "default action with arguments", "apply().hit", "apply().miss",
    "switch (apply().action_run)",
    # externs
) + tuple(f"hash {h}" for h in HASHES) + (
    "register read", "register write", "counter", "mark_to_drop", "egress_spec from a field",
    "digest", "multicast group", "clone I2E", "egress reads egress_rid / instance_type",
    "resubmit", "recirculate", "clone E2E",
    # deparser
    "emit order not declaration order", "emit of a header stack",
    "truncate in ingress", "truncate in egress", "truncate to a field's value",
    # checksum controls
    "verify_checksum", "verify_checksum_with_payload", "std.checksum_error read",
    "update_checksum", "update_checksum_with_payload", "checksum over metadata",
)


def veth_carries(frame: bytes) -> bool:
    """Whether a Linux veth (BMv2's ports) carries ``frame`` to the other end: at least
    :data:`MIN_FRAME` bytes, and :data:`MIN_VLAN_FRAME` when it has a VLAN type."""
    if len(frame) < MIN_FRAME:
        return False
    return (len(frame) >= MIN_VLAN_FRAME
            or int.from_bytes(frame[12:14], "big") not in VLAN_ETHER_TYPES)


@dataclass(frozen=True)
class Program:
    """A generated program: its source, its seed, the :data:`FEATURES` it uses, its parser
    (for :func:`packets`: state name -> extracted header's field widths, select), values worth
    putting in frames (width -> values its tables and selects name) and its registers and
    counters (control-plane name, size) to compare after the frames."""
    seed: int
    source: str
    features: frozenset = frozenset()
    parser: dict = dc_field(default_factory=dict)
    hints: dict = dc_field(default_factory=dict)
    registers: tuple = ()
    counters: tuple = ()
    digests: tuple = ()          # the digests' struct names, one per call site

    @property
    def multicast(self) -> bool:
        """Uses multicast group :data:`MCAST_GROUP` (p4diff configures it)."""
        return "multicast group" in self.features

    @property
    def clone(self) -> bool:
        """Uses clone session :data:`CLONE_SESSION` (p4diff configures it)."""
        return bool(self.features & {"clone I2E", "clone E2E"})


class _Gen(ParserGen, TableGen, ChecksumGen):
    WIDTHS, BINARY_OPS = WIDTHS, BINARY_OPS      # for TableGen

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        r = self.rng
        self.used: set = set()
        self.in_egress = False
        self.hints: dict = {}
        # header types: t0 (the first header, always extracted), one or two others, the stack's
        def fields(n):
            return tuple(w for _ in range(n) for w in r.choice(FIELD_RUNS))
        self.types = {"t0_t": fields(r.randint(2, 4))}
        for t in range(1, r.randint(2, 3)):
            self.types[f"t{t}_t"] = fields(r.randint(1, 2))
        others = [t for t in self.types if t != "t0_t"]
        if any(w not in WIDTHS for ws in self.types.values() for w in ws):
            self.used.add("fields of other widths (4+4, 3+13, 48, 64)")
        #: optional headers: (name, type); two of a type now and then (header copies)
        self.opt = [(f"h{i}", r.choice(others)) for i in range(1, r.randint(2, 4))]
        self.stack = None
        if r.random() < 0.5:
            self.types["s_t"] = tuple(r.choice((8, 16)) for _ in range(r.randint(1, 2)))
            self.stack = r.randint(2, 3)
        self.errors: list = []
        self.funcs: list = []       # (name, ret width, (w1, w2))
        self.ioacts: list = []      # (name, (w_in, w_out, w_inout))
        self.regs: list = []        # (name, width, size)
        self.cnts: list = []        # (name, size)
        #: digest struct types, one per call site: (name, field widths)
        self.digests: list = []
        self.digest_ok = False      # in ingress's own body (not a function's or action's)
        self.locals_n = 0
        #: checksum controls: their own stream, so that the rest of a seed's program is the
        #: same with and without them
        self.crng = checksum_rng(seed)
        self.verify = self.crng.random() < 0.4
        self.compute = self.crng.random() < 0.4
        #: truncate() at the end of ingress or egress: a stream of its own too
        self.trng = truncate_rng(seed)

    @contextlib.contextmanager
    def drawing_from(self, rng: random.Random):
        """Draw from ``rng`` instead of the program's stream inside the block (the checksum
        controls and ``truncate``: the rest of a seed's program stays what it was)."""
        saved, self.rng = self.rng, rng
        try:
            yield rng
        finally:
            self.rng = saved

    def truncate(self, valid: frozenset) -> list:
        """Now and then a ``truncate`` at the end of a control, to a constant around the
        frames' lengths (0 and lengths a veth drops included) or to a field's value, under a
        condition over the fields of ``valid`` headers half of the time."""
        with self.drawing_from(self.trng) as r:
            if r.random() >= 0.3:
                return []
            self.set_scope(valid)
            self.used.add("truncate in egress" if self.in_egress else "truncate in ingress")
            if r.random() < 0.25:
                self.used.add("truncate to a field's value")
                length = f"((bit<32>) {self.field(r.choice(WIDTHS))})"
            else:
                # (0 and 13 leave frames a veth cannot carry: compared as not observable)
                length = r.choice((0, 13, 14, 20, r.randint(14, 40), r.randint(14, 80),
                                   r.randint(20, 120)))
                length = f"32w{length}"
            call = f"truncate({length});"
            if r.random() < 0.5:
                return [f"        {call}"]
            return [f"        if {self.cond(1)} {{ {call} }}"]

    # ---------------------------------------------------------------- scope
    def fields_of(self, inst: str, typ: str) -> list:
        return [(f"hdr.{inst}.f{i}", w) for i, w in enumerate(self.types[typ])]

    def instances(self) -> list:
        """Every header instance but the first: (name as in ``hdr.NAME``, type)."""
        out = list(self.opt)
        if self.stack:
            out += [(f"s[{i}]", "s_t") for i in range(self.stack)]
        return out

    META = [("meta.m0", 8), ("meta.m1", 16), ("meta.m2", 32), ("meta.m3", 32), ("meta.p.a", 8),
            ("meta.p.b", 16), ("meta.q.a", 8), ("meta.q.b", 16)]

    def set_scope(self, valid: frozenset = frozenset(), local: tuple = (), extra: tuple = (),
                  headers: bool = True):
        base = (self.fields_of("h0", "t0_t") if headers else []) + list(self.META)
        for inst, typ in self.instances():
            if inst in valid:
                base += self.fields_of(inst, typ)
        self.lvals = base + list(local)
        # extra: read-only (action parameters); standard metadata read (written apart)
        std = [("std.ingress_port", 9), ("std.packet_length", 32)] + (
            [("std.egress_port", 9), ("std.egress_rid", 16), ("std.instance_type", 32)]
            if self.in_egress else []) + (
            [("std.checksum_error", 1)] if self.verify else [])
        self.scope = self.lvals + list(extra) + std

    def lval(self, w: int | None = None, avoid=()) -> tuple:
        pool = [lv for lv in self.lvals if (w is None or lv[1] == w) and lv[0] not in avoid]
        return self.rng.choice(pool)

    # ---------------------------------------------------------------- expressions
    def const(self, w: int) -> str:
        r = self.rng
        v = r.choice([0, 1, (1 << w) - 1, 1 << (w - 1), r.getrandbits(w)])
        return f"{w}w{v}"

    def note_std(self, text: str) -> None:
        """The features a read of ``text`` uses, when it is standard metadata."""
        if text.startswith("std."):
            self.used.add("standard_metadata read")
            if text in ("std.egress_rid", "std.instance_type"):
                self.used.add("egress reads egress_rid / instance_type")
            if text == "std.checksum_error":
                self.used.add("std.checksum_error read")

    def field(self, w: int) -> str:
        text, fw = self.rng.choice(self.scope)
        self.note_std(text)
        if fw != w:
            self.used.add("cast between widths")
        return text if fw == w else f"((bit<{w}>) {text})"

    def expr(self, w: int, depth: int) -> str:
        r = self.rng
        if depth <= 0 or r.random() < 0.25:
            return self.field(w) if r.random() < 0.7 else self.const(w)
        kind = r.random()
        use = self.used.add
        if kind < 0.45:
            op = r.choice(BINARY_OPS)
            use(f"op {op}")
            return f"({self.expr(w, depth - 1)} {op} {self.expr(w, depth - 1)})"
        if kind < 0.55:
            use("op ~")
            return f"(~{self.expr(w, depth - 1)})"
        if kind < 0.65:
            constant = r.random() < 0.6
            use("shift by a constant" if constant else "shift by a field")
            amount = f"8w{r.randint(0, w + 2)}" if constant else f"((bit<8>) {self.field(8)})"
            return f"({self.expr(w, depth - 1)} {r.choice(('<<', '>>'))} {amount})"
        if kind < 0.75:
            use("slice")
            wide = r.choice([x for x in WIDTHS if x >= w] or [w])
            hi = r.randint(w - 1, wide - 1)
            return f"({self.expr(wide, depth - 1)}[{hi}:{hi - w + 1}])"
        if kind < 0.82 and w >= 16:
            use("concatenation ++")
            hi = r.randint(1, w - 1)
            return f"({self.expr(hi, depth - 1)} ++ {self.expr(w - hi, depth - 1)})"
        if kind < 0.88:
            use("conditional ?:")
            return f"({self.cond(depth - 1)} ? {self.expr(w, depth - 1)} : {self.expr(w, depth - 1)})"
        if kind < 0.94 and w >= 2:
            # signed: arithmetic shift, saturating add/sub, sign extension from a narrower width
            use("signed cast int<W>")
            a = f"((int<{w}>) {self.expr(w, depth - 1)})"
            op = r.choice(("|+|", "|-|", "+", "*", ">>"))
            use("signed >> (arithmetic)" if op == ">>" else "signed |+| |-| + *")
            rhs = f"8w{r.randint(0, w + 1)}" if op == ">>" else f"((int<{w}>) {self.expr(w, depth - 1)})"
            if op != ">>" and w > 8 and r.random() < 0.3:
                use("sign extension")
                rhs = f"((int<{w}>) ((int<8>) {self.expr(8, depth - 1)}))"
            return f"((bit<{w}>) ({a} {op} {rhs}))"
        other = r.choice(WIDTHS)
        use("cast between widths")
        return f"((bit<{w}>) {self.expr(other, depth - 1)})"

    def cond(self, depth: int) -> str:
        r = self.rng
        w = r.choice(WIDTHS)
        signed = r.random() < 0.25      # a signed comparison
        left = self.expr(w, depth)
        op = r.choice(COMPARE_OPS)
        right = self.expr(w, depth)
        self.used.add(f"compare {op}")
        if signed:
            self.used.add("signed comparison")
            c = f"(((int<{w}>) {left}) {op} ((int<{w}>) {right}))"
        else:
            c = f"({left} {op} {right})"
        if r.random() < 0.2:
            self.used.add("! on a condition")
            c = f"(!{c})"
        if r.random() < 0.2:
            self.used.add("&& / ||")
            c = f"({c} {r.choice(('&&', '||'))} {self.cond(0)})"
        if self.valid_ok and r.random() < 0.1:
            inst, _ = r.choice(self.instances())
            self.used.update(("isValid() in a condition", "&& / ||"))
            c = f"({'!' if r.random() < 0.5 else ''}hdr.{inst}.isValid() {r.choice(('&&', '||'))} {c})"
        return c

    valid_ok = False      # isValid() of headers may appear in conditions (controls only)
    in_egress = False

    def assign(self, indent: str) -> str:
        text, w = self.lval()
        return f"{indent}{text} = {self.expr(w, 3)};"

    # ---------------------------------------------------------------- statements

    def cell_index(self, size: int) -> str:
        """An index into a register or counter of ``size`` cells (a power of two): a constant,
        or a field masked into range."""
        r = self.rng
        return (f"32w{r.randrange(size)}" if r.random() < 0.5
                else f"(((bit<32>) {self.field(32)}) & 32w{size - 1})")
    def stmts(self, indent: str, n: int, depth: int, valid: frozenset, local: tuple,
              egress: bool = False) -> tuple[list, frozenset]:
        """``n`` statements; returns them and the headers known valid after them."""
        r = self.rng
        out: list = []
        local = tuple(local)
        for _ in range(n):
            self.set_scope(valid, local)
            k = r.random()
            invalid = [i for i in self.instances() if i[0] not in valid]
            if depth > 0 and k < 0.12:
                out.append(f"{indent}if {self.cond(1)} {{")
                a, va = self.stmts(indent + "    ", r.randint(1, 2), depth - 1, valid, local, egress)
                out += a
                self.used.add("if")
                vb = valid
                if r.random() < 0.5:
                    self.used.add("if/else")
                    out.append(f"{indent}}} else {{")
                    b, vb = self.stmts(indent + "    ", r.randint(1, 2), depth - 1, valid, local, egress)
                    out += b
                out.append(f"{indent}}}")
                valid = va & vb
            elif depth > 0 and k < 0.15 and r.random() < 0.5:
                # switch on a value: labels the frames' values hit, shared labels, default
                self.used.add("switch on a value")
                text, w = r.choice(self.scope)
                if w > 64:
                    continue
                out.append(f"{indent}switch ({text}) {{")
                labels = sorted({r.choice([0, 1, (1 << w) - 1, r.getrandbits(w)])
                                 for _ in range(r.randint(1, 4))})
                after = valid
                for j, v in enumerate(labels):
                    self.hints.setdefault(w, set()).add(v)
                    if j + 1 < len(labels) and r.random() < 0.3:
                        out.append(f"{indent}    {w}w{v}:")          # falls through
                        continue
                    out.append(f"{indent}    {w}w{v}: {{")
                    a, va = self.stmts(indent + "        ", r.randint(0, 2), depth - 1, valid,
                                       local, egress)
                    out += a + [f"{indent}    }}"]
                    after = after & va
                if r.random() < 0.5:
                    out.append(f"{indent}    default: {{")
                    a, va = self.stmts(indent + "        ", r.randint(0, 2), depth - 1, valid,
                                       local, egress)
                    out += a + [f"{indent}    }}"]
                    after = after & va
                else:
                    # an empty default, not none: p4c-bm2-ss 1.2.5.16 folds values after a
                    # switch without default as if a case always ran (seed 90160,
                    # programs/switch_no_default_value_after, xfail on BMv2)
                    out.append(f"{indent}    default: {{ }}")
                out.append(f"{indent}}}")
                valid = after
            elif depth > 0 and k < 0.22 and invalid:
                inst, _ = r.choice(invalid)
                self.used.add("isValid() guard")
                out.append(f"{indent}if (hdr.{inst}.isValid()) {{")
                a, va = self.stmts(indent + "    ", r.randint(1, 3), depth - 1, valid | {inst},
                                   local, egress)
                out += a + [f"{indent}}}"]
                valid = valid & va
            elif k < 0.27 and invalid and not egress:
                inst, typ = r.choice(invalid)
                self.used.add("setValid")
                out.append(f"{indent}hdr.{inst}.setValid();")
                for text, w in self.fields_of(inst, typ):
                    out.append(f"{indent}{text} = {self.expr(w, 2)};")
                valid = valid | {inst}
            elif k < 0.31 and not egress:
                inst, _ = r.choice(self.instances())
                self.used.add("setInvalid")
                out.append(f"{indent}hdr.{inst}.setInvalid();")
                valid = valid - {inst}
            elif k < 0.35 and not egress and self.copy_pairs():
                (a, _), (b, _) = r.choice(self.copy_pairs())
                self.used.add("header copy (validity too)")
                out.append(f"{indent}hdr.{b} = hdr.{a};")
                valid = (valid | {b}) if a in valid else (valid - {b})
            elif k < 0.42:
                w = r.choice(WIDTHS)
                name = f"l{self.locals_n}"
                self.locals_n += 1
                self.used.add("local variable")
                out.append(f"{indent}bit<{w}> {name} = {self.expr(w, 2)};")
                local = local + ((name, w),)
            elif k < 0.46 and [i for i in self.instances() if i[0] in valid]:
                inst, typ = r.choice([i for i in self.instances() if i[0] in valid])
                name = f"l{self.locals_n}"
                self.locals_n += 1
                self.used.add("local header copy")
                out.append(f"{indent}{typ} {name} = hdr.{inst};")
                local = local + tuple((f"{name}.f{i}", w) for i, w in enumerate(self.types[typ]))
            elif k < 0.50:
                self.used.add("struct copy")
                if r.random() < 0.5:
                    a, b = r.sample(("p", "q"), 2)
                    out.append(f"{indent}meta.{b} = meta.{a};")
                else:
                    name = f"l{self.locals_n}"
                    self.locals_n += 1
                    out.append(f"{indent}pair_t {name} = meta.{r.choice('pq')};")
                    local = local + ((f"{name}.a", 8), (f"{name}.b", 16))
            elif k < 0.56 and self.ioacts and not egress:
                name, (wi, wo, wio) = r.choice(self.ioacts)
                o = self.lval(wo)
                io = self.lval(wio, avoid=(o[0],))
                self.used.add("action in/out/inout called directly")
                out.append(f"{indent}{name}({self.expr(wi, 2)}, {o[0]}, {io[0]});")
            elif k < 0.62 and self.funcs:
                name, wr, (w1, w2) = r.choice(self.funcs)
                self.used.add("function call")
                out.append(f"{indent}{self.lval(wr)[0]} = {name}({self.expr(w1, 2)}, "
                           f"{self.expr(w2, 2)});")
            elif k < 0.67 and not egress:
                out.append(indent + self.hash_call())
            elif k < 0.72 and self.regs and not egress:
                name, w, size = r.choice(self.regs)
                idx = self.cell_index(size)
                if r.random() < 0.5:
                    self.used.add("register read")
                    out.append(f"{indent}{name}.read({self.lval(w)[0]}, {idx});")
                else:
                    self.used.add("register write")
                    out.append(f"{indent}{name}.write({idx}, {self.expr(w, 2)});")
            elif k < 0.75 and self.cnts and not egress:
                name, size = r.choice(self.cnts)
                self.used.add("counter")
                idx = self.cell_index(size)
                out.append(f"{indent}{name}.count({idx});")
            elif k < 0.78 and not egress:
                if r.random() < 0.5:
                    self.used.add("mark_to_drop")
                    out.append(f"{indent}if {self.cond(1)} {{ mark_to_drop(std); }}")
                else:
                    self.used.add("egress_spec from a field")
                    out.append(f"{indent}std.egress_spec = ((bit<9>) {self.field(8)}) & 9w3;")
            elif depth > 0 and k < 0.81 and not egress:
                what = r.choice(("exit", "return"))
                self.used.add(what)
                out.append(f"{indent}if {self.cond(1)} {{")
                out.append(self.assign(indent + "    "))
                out.append(f"{indent}    {what};")
                out.append(f"{indent}}}")
            elif k < 0.83 and not egress:
                self.used.add("std.parser_error")
                err = r.choice(["NoError", "PacketTooShort", "StackOutOfBounds"] + self.errors)
                out.append(f"{indent}if (std.parser_error {r.choice(('==', '!='))} error.{err}) {{")
                out.append(self.assign(indent + "    "))
                out.append(f"{indent}}}")
            elif k < 0.85 and self.stack and not egress:
                self.used.add("stack push_front/pop_front")
                out.append(f"{indent}hdr.s.{r.choice(('push_front', 'pop_front'))}({r.randint(1, 2)});")
                valid = frozenset(v for v in valid if not v.startswith("s["))
            elif k < 0.88 and self.digest_ok and not egress:
                # a digest: its own struct type per call site, so that BMv2's learn filter
                # (per call site: hina.testing.p4diff) is a filter per digest name
                name = f"dg{len(self.digests)}_t"
                widths = tuple(r.choice(DIGEST_WIDTHS) for _ in range(r.randint(1, 3)))
                self.digests.append((name, widths))
                self.used.add("digest")
                data = ", ".join(self.expr(w, 2) for w in widths)
                out.append(f"{indent}digest<{name}>(1, {{{data}}});")
            elif k < 0.90 and self.digest_ok and not egress:
                # packet replication: a multicast group, an I2E clone (p4diff configures both)
                if r.random() < 0.5:
                    self.used.add("multicast group")
                    out.append(f"{indent}if {self.cond(1)} {{ std.mcast_grp = 16w{MCAST_GROUP}; }}")
                else:
                    self.used.add("clone I2E")
                    # only a packet's first pass clones: a clone's metadata starts afresh
                    # (meta.pass 0), so a clone of a recirculated packet could recirculate
                    # again, without end (seed 1644 of the first version)
                    out.append(f"{indent}if (std.instance_type == 0 && {self.cond(1)}) {{ "
                               f"clone(CloneType.I2E, 32w{CLONE_SESSION}); }}")
            elif k < 0.92 and (self.digest_ok or egress):
                # another pass, at most one per packet (meta.pass, kept by field list 1)
                again = f"if (meta.pass == 0 && {self.cond(1)}) {{ meta.pass = 1; "
                if not egress:
                    self.used.add("resubmit")
                    out.append(f"{indent}{again}resubmit_preserving_field_list(1); }}")
                elif r.random() < 0.5:
                    self.used.add("recirculate")
                    out.append(f"{indent}{again}recirculate_preserving_field_list(1); }}")
                else:
                    self.used.add("clone E2E")
                    out.append(f"{indent}if (std.instance_type == 0 && {self.cond(1)}) {{ "
                               f"clone_preserving_field_list(CloneType.E2E, "
                               f"32w{CLONE_SESSION}, 1); }}")
            else:
                out.append(self.assign(indent))
        return out, valid

    def copy_pairs(self) -> list:
        inst = self.instances()
        return [(a, b) for a in inst for b in inst if a != b and a[1] == b[1]]

    def hash_call(self) -> str:
        r = self.rng
        algo = r.choice(HASHES)
        self.used.add(f"hash {algo}")
        out, w = self.lval(r.choice((16, 32)))
        data = [r.choice(self.scope)[0] for _ in range(r.randint(1, 3))]
        for text in data:
            self.note_std(text)
        data = ", ".join(data)
        base = r.choice((0, 0, 1, r.getrandbits(16)))
        mx = r.choice((1 << r.randint(1, 16), r.randint(1, 1 << 16), 1 << 32 - 1))
        return (f"hash({out}, HashAlgorithm.{algo}, 16w{base}, {{ {data} }}, 32w{mx});")

    # ---------------------------------------------------------------- declarations
    def function(self, n: int) -> list:
        r = self.rng
        wr, w1, w2 = (r.choice(WIDTHS) for _ in range(3))
        name = f"fn{n}"
        self.scope = [("a", w1), ("b", w2)]
        self.lvals = []
        lines = [f"bit<{wr}> {name}(in bit<{w1}> a, in bit<{w2}> b) {{"]
        if r.random() < 0.6:
            self.used.add("function early return")
            lines.append(f"    if {self.cond(1)} {{ return {self.expr(wr, 2)}; }}")
        lines += [f"    return {self.expr(wr, 3)};", "}"]
        self.funcs.append((name, wr, (w1, w2)))
        return lines

    def ioaction(self, n: int) -> list:
        r = self.rng
        wi, wo, wio = (r.choice(WIDTHS) for _ in range(3))
        name = f"io{n}"
        self.set_scope(extra=(("a", wi), ("c", wio)))
        lines = [f"    action {name}(in bit<{wi}> a, out bit<{wo}> b, inout bit<{wio}> c) {{",
                 f"        b = {self.expr(wo, 2)};",
                 f"        c = {self.expr(wio, 2)};"]
        if r.random() < 0.5:
            lines.append(self.assign("        "))
        lines.append("    }")
        self.ioacts.append((name, (wi, wo, wio)))
        return lines

    # ---------------------------------------------------------------- program
    def program(self, seed: int) -> Program:
        r = self.rng
        funcs = []
        for n in range(r.randint(0, 2)):
            funcs += self.function(n)
        parser_lines, plan = self.parser()
        decls = []
        for n in range(r.randint(0, 2)):
            w, size = r.choice(WIDTHS), r.choice((4, 8))
            decls.append(f"    register<bit<{w}>>({size}) r{n};")
            self.regs.append((f"r{n}", w, size))
        for n in range(r.randint(0, 1)):
            size = r.choice((4, 8))
            decls.append(f"    counter({size}, CounterType.packets_and_bytes) c{n};")
            self.cnts.append((f"c{n}", size))
        for n in range(r.randint(0, 2)):
            decls += self.ioaction(n)
        tables = []
        valid_keys = [inst for inst, _ in self.instances()]
        for n in range(r.randint(0, 2)):
            d, acts = self.table(n, valid_keys)
            decls += d
            tables.append((n, acts))
        self.valid_ok = self.digest_ok = True
        body = [f"        std.egress_spec = 9w{r.randint(1, 3)};"]
        valid, local = frozenset(), ()
        for n, acts in tables:
            a, valid = self.stmts("        ", r.randint(1, 3), 2, valid, local)
            body += a
            a, valid = self.apply_table(n, acts, valid, local)
            body += a
        a, valid = self.stmts("        ", r.randint(2, 6), 2, valid, local)
        body += a
        self.digest_ok = False
        body += self.truncate(valid)
        egress = []
        if r.random() < 0.5:
            self.used.add("egress statements")
            self.in_egress = True
            egress, _ = self.stmts("        ", r.randint(1, 3), 1, frozenset(), (), egress=True)
        in_egress, self.in_egress = self.in_egress, True
        egress += self.truncate(frozenset())
        self.in_egress = in_egress
        # deparser: every header, in a random order (invalid ones emit nothing)
        emits = ["h0"] + [inst for inst, _ in self.opt] + (["s"] if self.stack else [])
        declared = list(emits)
        r.shuffle(emits)
        if emits != declared:
            self.used.add("emit order not declaration order")
        if self.stack:
            self.used.add("emit of a header stack")
        verify = self.checksum_calls("verify") if self.verify else []
        compute = self.checksum_calls("update") if self.compute else []
        htypes = [f"header {t} {{ " + " ".join(f"bit<{w}> f{i};" for i, w in enumerate(ws)) + " }"
                  for t, ws in self.types.items()]
        members = ["t0_t h0;"] + [f"{typ} {inst};" for inst, typ in self.opt]
        if self.stack:
            members.append(f"s_t[{self.stack}] s;")
        src = "\n".join([
            f"// Generated by hina.testing.p4smith, seed {seed}.",
            "#include <core.p4>",
            "#include <v1model.p4>",
            *htypes,
            "struct pair_t { bit<8> a; bit<16> b; }",
            *(f"struct {name} {{ " + " ".join(f"bit<{w}> f{i};" for i, w in enumerate(ws)) + " }"
              for name, ws in self.digests),
            "struct headers_t { " + " ".join(members) + " }",
            "struct meta_t { bit<8> m0; bit<16> m1; bit<32> m2; bit<32> m3; pair_t p; pair_t q;",
            "                @field_list(1) bit<8> pass; }",
            *([f"error {{ {', '.join(self.errors)} }}"] if self.errors else []),
            *funcs,
            "parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,",
            "                inout standard_metadata_t std) {",
            *parser_lines,
            "}",
            "control MyVerify(inout headers_t hdr, inout meta_t meta) {",
            "    apply {",
            *verify,
            "    }",
            "}",
            "control MyIngress(inout headers_t hdr, inout meta_t meta,",
            "                  inout standard_metadata_t std) {",
            *decls,
            "    apply {",
            *body,
            "    }",
            "}",
            "control MyEgress(inout headers_t hdr, inout meta_t meta,",
            "                 inout standard_metadata_t std) {",
            "    apply {",
            *egress,
            "    }",
            "}",
            "control MyCompute(inout headers_t hdr, inout meta_t meta) {",
            "    apply {",
            *compute,
            "    }",
            "}",
            "control MyDeparser(packet_out pkt, in headers_t hdr) {",
            "    apply { " + " ".join(f"pkt.emit(hdr.{e});" for e in emits) + " }",
            "}",
            "V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;",
            ""])
        unknown = self.used - set(FEATURES)
        assert not unknown, f"features missing from FEATURES: {unknown}"
        hints = {w: tuple(sorted(v)) for w, v in self.hints.items()}
        return Program(seed, src, frozenset(self.used), plan, hints,
                       tuple((f"MyIngress.{n}", size) for n, _, size in self.regs),
                       tuple((f"MyIngress.{n}", size) for n, size in self.cnts),
                       tuple(name for name, _ in self.digests))


def truncate_rng(seed: int) -> random.Random:
    """The stream ``seed``'s ``truncate`` calls are drawn from."""
    return random.Random(f"truncate of seed {seed}")


def generate(seed: int) -> Program:
    """The program of ``seed`` (the same seed always gives the same program).

    Args:
        seed: any integer.

    Returns:
        a :class:`Program`.
    """
    return _Gen(seed).program(seed)
