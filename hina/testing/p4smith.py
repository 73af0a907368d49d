"""Random small v1model programs for differential testing (P4Smith-like, seeded).

:func:`generate` writes one program from a seed: a header of byte-aligned ``bit<W>`` fields,
an ingress of random assignments (expressions over the fields and constants: ``+ - * & | ^ ~``,
``|+| |-|``, shifts by constants and by fields, slices, casts between widths, ``++``, ``?:``
with comparisons; on ``int<W>`` too: arithmetic shifts, saturation, sign extension, signed
comparisons), ``if``/``else`` on random conditions and tables with exact keys and
``const entries`` (no control plane needed). :func:`packets` draws frames for it. The same
program and frames run on two targets must give the same output bytes:
``tests/conformance/test_differential.py`` runs a few seeds on the embedded target and BMv2;
``bench/p4_differential.py`` runs many.

Example::

    >>> from hina.testing.p4smith import generate, packets
    >>> prog = generate(7)
    >>> "V1Switch" in prog.source and len(packets(prog, 3)) == 3
    True
"""
from __future__ import annotations

import random
from dataclasses import dataclass

#: field widths the generator draws from (byte-aligned: a header is a whole number of bytes)
WIDTHS = (8, 16, 32)
#: frames shorter than this are refused by veths (BMv2's ports)
MIN_FRAME = 14
#: Ethernet types of VLAN tags: a Linux veth strips such a tag (offload), so a frame with one of
#: these at bytes 12..13 never reaches BMv2 as sent (seed 56 found it)
VLAN_ETHER_TYPES = (0x8100, 0x88A8, 0x9100)
BINARY_OPS = ("+", "-", "*", "&", "|", "^", "|+|", "|-|")
COMPARE_OPS = ("==", "!=", "<", "<=", ">", ">=")


#: the language features the generator emits (the coverage report's rows, in order); each is a
#: row of docs/p4-conformance.md's feature table
FEATURES = tuple(f"op {op}" for op in BINARY_OPS) + (
    "op ~", "shift by a constant", "shift by a field", "slice", "concatenation ++",
    "conditional ?:", "cast between widths", "signed cast int<W>", "signed |+| |-| + *",
    "signed >> (arithmetic)", "sign extension", "signed comparison",
) + tuple(f"compare {op}" for op in COMPARE_OPS) + (
    "! on a condition", "&& / ||", "if", "if/else", "exact table, const entries",
    "action parameter", "default action",
)


@dataclass(frozen=True)
class Program:
    """A generated program: its source, its seed, its header's field widths and the
    :data:`FEATURES` it uses."""
    seed: int
    source: str
    widths: tuple[int, ...]
    features: frozenset = frozenset()

    @property
    def header_bytes(self) -> int:
        return sum(self.widths) // 8


class _Gen:
    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        r = self.rng
        self.widths = tuple(r.choice(WIDTHS) for _ in range(r.randint(3, 6)))
        self.fields = [f"f{i}" for i in range(len(self.widths))]
        self.used: set = set()

    def const(self, w: int) -> str:
        r = self.rng
        v = r.choice([0, 1, (1 << w) - 1, 1 << (w - 1), r.getrandbits(w)])
        return f"{w}w{v}"

    def field(self, w: int) -> str:
        i = self.rng.randrange(len(self.fields))
        fw = self.widths[i]
        text = f"hdr.h.{self.fields[i]}"
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
            return f"({self.expr(w // 2, depth - 1)} ++ {self.expr(w // 2, depth - 1)})"
        if kind < 0.88:
            use("conditional ?:")
            return f"({self.cond(depth - 1)} ? {self.expr(w, depth - 1)} : {self.expr(w, depth - 1)})"
        if kind < 0.94:
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
        left = self.expr(w, depth)      # drawn in this order: a seed's program never changes
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
        return c

    def assign(self, indent: str) -> str:
        i = self.rng.randrange(len(self.fields))
        return f"{indent}hdr.h.{self.fields[i]} = {self.expr(self.widths[i], 3)};"

    def stmts(self, indent: str, n: int, depth: int) -> list:
        out = []
        for _ in range(n):
            if depth > 0 and self.rng.random() < 0.25:
                out.append(f"{indent}if {self.cond(1)} {{")
                out += self.stmts(indent + "    ", self.rng.randint(1, 2), depth - 1)
                self.used.add("if")
                if self.rng.random() < 0.5:
                    self.used.add("if/else")
                    out.append(f"{indent}}} else {{")
                    out += self.stmts(indent + "    ", self.rng.randint(1, 2), depth - 1)
                out.append(f"{indent}}}")
            else:
                out.append(self.assign(indent))
        return out

    def table(self, n: int) -> tuple[list, list]:
        """A table keyed on one field with const entries; its actions assign from parameters."""
        r = self.rng
        k = r.randrange(len(self.fields))
        kw = self.widths[k]
        t = r.randrange(len(self.fields))
        tw = self.widths[t]
        decls = [
            f"    action set_{n}(bit<{tw}> v) {{ hdr.h.{self.fields[t]} = v {r.choice(BINARY_OPS)} "
            f"{self.expr(tw, 1)}; }}",
            f"    action other_{n}() {{ {self.assign('').strip()} }}",
            f"    table t{n} {{",
            f"        key = {{ hdr.h.{self.fields[k]}: exact; }}",
            f"        actions = {{ set_{n}; other_{n}; NoAction; }}",
            "        const entries = {",
        ]
        self.used.update(("exact table, const entries", "default action"))
        keys = sorted({r.choice([0, 1, (1 << kw) - 1, r.getrandbits(kw)]) for _ in range(3)})
        for key in keys:
            call = f"set_{n}({r.getrandbits(tw)})" if r.random() < 0.6 else f"other_{n}()"
            if call.startswith("set_"):
                self.used.add("action parameter")
            decls.append(f"            {kw}w{key}: {call};")
        decls += ["        }", f"        default_action = {r.choice([f'other_{n}()', 'NoAction()'])};",
                  "    }"]
        return decls, [f"        t{n}.apply();"]

    def program(self, seed: int) -> Program:
        decls, body = [], []
        for n in range(self.rng.randint(0, 2)):
            d, a = self.table(n)
            decls += d
            body += self.stmts("        ", self.rng.randint(1, 3), 2) + a
        body += self.stmts("        ", self.rng.randint(2, 5), 2)
        fields = " ".join(f"bit<{w}> {f};" for f, w in zip(self.fields, self.widths))
        src = "\n".join([
            f"// Generated by hina.testing.p4smith, seed {seed}.",
            "#include <core.p4>",
            "#include <v1model.p4>",
            f"header h_t {{ {fields} }}",
            "struct headers_t { h_t h; }",
            "struct meta_t { }",
            "parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta,",
            "                inout standard_metadata_t std) {",
            "    state start { pkt.extract(hdr.h); transition accept; }",
            "}",
            "control MyVerify(inout headers_t hdr, inout meta_t meta) { apply { } }",
            "control MyIngress(inout headers_t hdr, inout meta_t meta,",
            "                  inout standard_metadata_t std) {",
            *decls,
            "    apply {",
            *body,
            "        std.egress_spec = 1;",
            "    }",
            "}",
            "control MyEgress(inout headers_t hdr, inout meta_t meta,",
            "                 inout standard_metadata_t std) { apply { } }",
            "control MyCompute(inout headers_t hdr, inout meta_t meta) { apply { } }",
            "control MyDeparser(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr); } }",
            "V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;",
            ""])
        unknown = self.used - set(FEATURES)
        assert not unknown, f"features missing from FEATURES: {unknown}"
        return Program(seed, src, self.widths, frozenset(self.used))


def generate(seed: int) -> Program:
    """The program of ``seed`` (the same seed always gives the same program).

    Args:
        seed: any integer.

    Returns:
        a :class:`Program`.
    """
    return _Gen(seed).program(seed)


def packets(program: Program, count: int) -> list[bytes]:
    """``count`` frames for ``program``: its header (fields drawn with edge values often) and a
    payload, at least :data:`MIN_FRAME` bytes, never a VLAN Ethernet type at bytes 12..13.
    Deterministic in the program's seed."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    rng = random.Random(program.seed * 7919 + 1)
    frames = []
    for _ in range(count):
        head = b"".join(rng.choice([0, 1, (1 << w) - 1, 1 << (w - 1), rng.getrandbits(w)])
                        .to_bytes(w // 8, "big") for w in program.widths)
        pad = max(MIN_FRAME - len(head), 0) + 2
        frame = bytearray(head + bytes(rng.getrandbits(8) for _ in range(pad)))
        if int.from_bytes(frame[12:14], "big") in VLAN_ETHER_TYPES:
            frame[13] ^= 1          # veths take VLAN tags out of the frame: BMv2 never sees it
        frames.append(bytes(frame))
    return frames


def differential(seed: int, dataplane, workdir, count: int = 8, stats: dict | None = None):
    """Run the program of ``seed`` on the embedded target and on ``dataplane`` (a BMv2
    :class:`controller.bmv2_dataplane.Bmv2Dataplane`, the program compiled by p4c and loaded
    afresh) with the same ``count`` frames, one at a time.

    Each frame goes to BMv2 expecting as many frames out as the embedded target sent (BMv2 waits
    for them, up to its timeout, then a short grace for more): a slow machine delays frames but
    does not lose them, and an extra or a missing frame shows.

    Args:
        seed: the program's seed.
        dataplane: the BMv2 dataplane (``hina.testing.targets.shared_bmv2()``).
        workdir: a folder for the program file (kept: a failing program can be rerun).
        count: frames to send.
        stats: counters to add to: ``frames`` compared, ``unobservable`` frames skipped (the
            embedded target sent a frame with a VLAN Ethernet type at bytes 12..13: a veth
            takes the tag out of such a frame, so BMv2's copy cannot be seen as sent; seed 1173
            found it).

    Returns:
        ``None`` when both targets sent the same frames on the same ports, else a report (the
        program's path, the first frame that differs and each target's outputs for it).
    """
    from pathlib import Path

    from hina.controller import bmv2
    from hina.softswitch.compiler import compile_file
    from hina.softswitch.p4info import program_info_from_p4info, read_p4info_text

    prog = generate(seed)
    path = Path(workdir) / f"p4smith_{seed}.p4"
    path.write_text(prog.source)
    embedded = compile_file(str(path)).instantiate()
    build = bmv2.compile_p4c(path)
    dataplane.load(path, {}, info=program_info_from_p4info(read_p4info_text(str(build.p4info))))
    stats = {} if stats is None else stats
    for i, frame in enumerate(packets(prog, count)):
        want = embedded.process(0, frame).outputs
        if any(int.from_bytes(f[12:14], "big") in VLAN_ETHER_TYPES for _, f in want):
            stats["unobservable"] = stats.get("unobservable", 0) + 1
            continue
        stats["frames"] = stats.get("frames", 0) + 1
        got = dataplane.process(0, frame, expected=len(want)).outputs
        if _per_port(want) != _per_port(got):
            def show(outputs):
                return "\n".join(f"    port {p}: {f.hex()}" for p, f in outputs) or "    nothing"
            return (f"seed {seed} ({path}): frame {i} ({frame.hex()}) differs\n"
                    f"  embedded:\n{show(want)}\n  bmv2:\n{show(got)}")
    return None


def _per_port(outputs: list) -> dict:
    """port -> its frames in order (the order across ports is not BMv2's to keep)."""
    ports: dict = {}
    for port, frame in outputs:
        ports.setdefault(port, []).append(frame)
    return ports
