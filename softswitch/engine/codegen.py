"""Generate Python source for a checked program: one ``build(RT, C)`` function per program.

The generated code uses plain ints (``int<N>`` values kept in two's complement range, ``bit<N>``
values in 0 .. 2**N - 1, an invariant the code relies on to skip redundant masks), one class per
header/struct type (``__slots__``, or an instance dict over class defaults for wide types),
and closures per control instance: control parameters and control-level variables are closure
cells, actions are nested functions that tables call with their control-plane arguments.
Nothing walks the IR per packet.

Per-packet fast paths: headers are extracted and emitted with one precompiled ``struct``
format; register reads/writes index the register's list directly; parameterless actions
called directly are inlined; scalar fields an action or control body reads more than once and
cannot change (see :meth:`CodeGen.body_with_hoisting`) are loaded once; hashes and checksums
with a constant algorithm call the algorithm directly.
"""
from __future__ import annotations

import keyword
from typing import Optional

from ..frontend import ir
from ..frontend.controlplane import local_name, qualified_name
from ..frontend.typecheck import Sym, expr_text, unsupported
from ..frontend.types import (Bits, Bool, EnumT, ErrorT, ExternT, InfInt, ListT, ObjT, StackT,
                              StringT, StructT, width_of)
from .externs import CHECKSUM_BY_ALGO, HASH_ALGOS, HASH_BY_ALGO

CSUM16 = HASH_ALGOS.index("csum16")     # v1model HashAlgorithm.csum16

DROP_PORT = 511
INDENT = "    "
WIDE_FIELDS = 32        # header/struct types with at least this many scalar fields use a dict
# Names a generated struct class defines itself (a field of a wide type may not shadow them).
CLASS_MEMBERS = {"TYPE_NAME", "FIELDS", "NBYTES", "WIDTH", "copy", "of", "emit", "extract",
                 "values", "set_valid", "_ST", "_unpack", "_pack", "_v"}


class _HeaderBits:
    """The type of a whole header in a field list: its fields' bits as one unsigned value."""

    def __init__(self, header: StructT):
        self.width = width_of(header)


def _part_width(t) -> int:
    return t.width if isinstance(t, _HeaderBits) else width_of(t)


def pyfield(name: str) -> str:
    return name + "_" if keyword.iskeyword(name) or name.startswith("_") else name


class _Names(dict):
    """Python names of declarations, keyed by the declaration (through any Sym naming it)."""

    @staticmethod
    def _k(k):
        return id(k.decl) if isinstance(k, Sym) and k.decl is not None else id(k)

    def __getitem__(self, k):
        return super().__getitem__(self._k(k))

    def __setitem__(self, k, v):
        super().__setitem__(self._k(k), v)

    def __contains__(self, k):
        return super().__contains__(self._k(k))

    def get(self, k, default=None):
        return super().get(self._k(k), default)


class Emitter:
    def __init__(self):
        self.lines: list = []
        self.level = 0

    def line(self, text: str) -> None:
        self.lines.append(INDENT * self.level + text)

    def indent(self):
        self.level += 1

    def dedent(self):
        self.level -= 1

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"


def _decl_of(path) -> object:
    """The declaration a checked Path names (None when unknown)."""
    return getattr(getattr(path, "sym", None), "decl", None)


def has_return(s) -> bool:
    """Whether a statement contains a ``return`` (such an action body cannot be inlined)."""
    if isinstance(s, ir.Return):
        return True
    if isinstance(s, ir.Block):
        return any(has_return(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return has_return(s.then) or (s.other is not None and has_return(s.other))
    if isinstance(s, ir.Switch):
        return any(c.body is not None and has_return(c.body) for c in s.cases)
    return False


def pure(e) -> bool:
    """Whether evaluating ``e`` can have no side effect and cannot raise (so generated code
    may skip or repeat its evaluation)."""
    if getattr(e, "const", None) is not None or isinstance(e, (ir.IntLit, ir.BoolLit,
                                                                   ir.TypeMember, ir.Path)):
        return True
    if isinstance(e, ir.Member):
        return not isinstance(e.expr.type, StackT) and pure(e.expr)
    if isinstance(e, (ir.Slice, ir.Unary, ir.Cast)):
        return pure(e.expr)
    if isinstance(e, ir.Binary):
        return pure(e.left) and pure(e.right)
    if isinstance(e, ir.Cond):
        return pure(e.cond) and pure(e.then) and pure(e.other)
    return False


def _operands(e: ir.Expr) -> Optional[tuple]:
    """The operands of an operator expression (unary, cast, slice, binary, conditional, list),
    or None for any other kind of expression."""
    if isinstance(e, (ir.Unary, ir.Cast, ir.Slice)):
        return (e.expr,)
    if isinstance(e, ir.Binary):
        return (e.left, e.right)
    if isinstance(e, ir.Cond):
        return (e.cond, e.then, e.other)
    if isinstance(e, ir.ListExpr):
        return tuple(e.items)
    return None


class CodeGen:
    """Turns the checked IR of a v1model program into Python source."""

    def __init__(self, checker):
        self.ck = checker
        self.out = Emitter()
        self.names = _Names()          # declaration -> python expression text
        self.tmp = 0
        self.struct_classes: dict = {}  # type name -> class name
        self.wide_types: dict = {}      # type name -> fields kept in the instance dict
        self.cells: list = []           # closure cell names of the control being generated
        self.reg_sizes: dict = {}       # register instance name -> size literal (inlined access)
        self.hoisted: dict = {}         # field read text -> local holding it (body_with_hoisting)
        self.counted_tables: set = set()  # tables with a direct counter (apply passes C.length)
        self.prefix = ""

    def fresh(self, base: str = "t") -> str:
        self.tmp += 1
        return f"_{base}{self.tmp}"

    # ------------------------------------------------------------------------------ types
    def class_of(self, t: StructT) -> str:
        return self.struct_classes[t.name]

    def default_value(self, t) -> str:
        if isinstance(t, (Bits, InfInt)):
            return "0"
        if isinstance(t, Bool):
            return "False"
        if isinstance(t, (EnumT, ErrorT)):
            return "0"
        if isinstance(t, StructT):
            return f"{self.class_of(t)}()"
        if isinstance(t, StackT):
            return f"RT.Stack({self.class_of(t.elem)}, {t.size})"
        if isinstance(t, StringT):
            return "''"
        raise unsupported(ir.Node(), f"variables of type {t}")

    def gen_types(self) -> None:
        o = self.out
        for name, t in self.ck.types.items():
            if isinstance(t, StructT):
                self.struct_classes[name] = ("H_" if t.kind == "header" else "S_") + name
        for name, t in self.ck.types.items():
            if not isinstance(t, StructT) or name not in self.struct_classes:
                continue
            if t.kind == "header_union":
                raise unsupported(ir.Node(), "header_union")
            cls = self.struct_classes[name]
            fields = [pyfield(n) for n, _ in t.fields]
            is_hdr = t.kind == "header"
            slots = (["_v"] if is_hdr else []) + fields
            # Wide types of scalar fields (HINA's 128-word payload, 256 THC indices) keep their
            # fields in the instance dict over class-level defaults: construction sets nothing,
            # copy() and setValid() are one C-level dict operation instead of one statement
            # per field (they are built and copied for every packet and replica).
            wide = (len(fields) >= WIDE_FIELDS
                    and all(isinstance(ft, (Bits, Bool, EnumT, ErrorT)) for _, ft in t.fields)
                    and not set(fields) & CLASS_MEMBERS)
            self.wide_types[name] = wide
            o.line(f"class {cls}:")
            o.indent()
            if not wide:
                o.line(f"__slots__ = {tuple(slots)!r}")
            o.line(f"TYPE_NAME = {name!r}")
            o.line(f"FIELDS = {tuple(n for n, _ in t.fields)!r}")
            if wide:
                if is_hdr:
                    o.line("_v = False")
                for (n, ft), pf in zip(t.fields, fields):
                    o.line(f"{pf} = {self.default_value(ft)}")
                o.line("def __init__(self):")
                o.indent()
                o.line("pass")
                o.dedent()
                o.line("def copy(self):")
                o.indent()
                o.line(f"n = {cls}.__new__({cls})")
                o.line("n.__dict__.update(self.__dict__)")
                o.line("return n")
                o.dedent()
            else:
                o.line("def __init__(self):")
                o.indent()
                if is_hdr:
                    o.line("self._v = False")
                for (n, ft), pf in zip(t.fields, fields):
                    o.line(f"self.{pf} = {self.default_value(ft)}")
                if not slots:
                    o.line("pass")
                o.dedent()
                o.line("def copy(self):")
                o.indent()
                o.line(f"n = {cls}.__new__({cls})")
                if is_hdr:
                    o.line("n._v = self._v")
                for (n, ft), pf in zip(t.fields, fields):
                    if isinstance(ft, (StructT, StackT)):
                        o.line(f"n.{pf} = self.{pf}.copy()")
                    else:
                        o.line(f"n.{pf} = self.{pf}")
                o.line("return n")
                o.dedent()
            o.line("@staticmethod")
            o.line("def of(*vals):")
            o.indent()
            o.line(f"n = {cls}()")
            if is_hdr:
                o.line("n._v = True")
            for i, pf in enumerate(fields):
                o.line(f"n.{pf} = vals[{i}]")
            o.line("return n")
            o.dedent()
            if is_hdr:
                self.gen_header_io(t, fields)
            else:
                o.line("def emit(self, out):")
                o.indent()
                o.line("pass")
                for (n, ft), pf in zip(t.fields, fields):
                    if isinstance(ft, (StructT, StackT)):
                        o.line(f"self.{pf}.emit(out)")
                o.dedent()
                o.line("def values(self):")
                o.indent()
                o.line("return (" + "".join(f"self.{pf}, " for pf in fields) + ")")
                o.dedent()
            o.dedent()
            o.line("")

    @staticmethod
    def header_segments(t: StructT, fields: list) -> list:
        """Split a header's fields into struct.Struct items: a byte-aligned unsigned field of
        8/16/32/64 bits is one item (B/H/I/Q); other fields are grouped into runs ending on a
        byte boundary, read as one integer (B/H/I/Q) or as bytes (``Ns``) and split by shifts.
        Returns [(format code, [(python field, type, width)], direct)]."""
        codes = {1: "B", 2: "H", 4: "I", 8: "Q"}
        segs, run, bits = [], [], 0
        for (n, ft), pf in zip(t.fields, fields):
            w = width_of(ft)
            plain = (not isinstance(ft, Bool) and not (isinstance(ft, Bits) and ft.signed))
            if not run and plain and w in (8, 16, 32, 64):
                segs.append((codes[w // 8], [(pf, ft, w)], True))
                continue
            run.append((pf, ft, w))
            bits += w
            if bits % 8 == 0:
                nb = bits // 8
                segs.append((codes.get(nb, f"{nb}s"), run, False))
                run, bits = [], 0
        if run:                       # only for headers that are not byte-aligned (rejected)
            raise unsupported(ir.Node(), f"header {t.name} (not a multiple of 8 bits)")
        return segs

    def gen_header_io(self, t: StructT, fields: list) -> None:
        o = self.out
        total = sum(width_of(ft) for _, ft in t.fields)
        nbytes = (total + 7) // 8
        if total % 8:
            raise unsupported(ir.Node(), f"header {t.name} of {total} bits (not a multiple of 8)")
        segs = self.header_segments(t, fields) if fields else []
        fmt = ">" + "".join(code for code, _, _ in segs)
        o.line(f"NBYTES = {nbytes}")
        o.line(f"WIDTH = {total}")
        o.line(f"_ST = RT.struct.Struct({fmt!r})")
        o.line("_unpack = _ST.unpack_from")
        o.line("_pack = _ST.pack")
        # extract: one unpack_from, then the grouped fields split by shifts
        o.line("def extract(self, buf, off, _unpack=_unpack):")
        o.indent()
        targets = []
        for i, (code, run, direct) in enumerate(segs):
            targets.append(f"self.{run[0][0]}" if direct else f"g{i}")
        if targets:
            o.line(f"({', '.join(targets)},) = _unpack(buf, off)")
        for i, (code, run, direct) in enumerate(segs):
            if direct:
                continue
            v = f"g{i}"
            if code.endswith("s"):
                o.line(f"{v} = int.from_bytes({v}, 'big')")
            for j, (pf, ft, w) in enumerate(reversed(run)):
                last = j == len(run) - 1
                if isinstance(ft, Bits) and ft.signed:
                    o.line(f"x = {v} & {hex((1 << w) - 1)}")
                    o.line(f"self.{pf} = x - {1 << w} if x >> {w - 1} else x")
                elif isinstance(ft, Bool):
                    o.line(f"self.{pf} = bool({v} & 1)")
                else:
                    o.line(f"self.{pf} = {v} & {hex((1 << w) - 1)}")
                if not last:
                    o.line(f"{v} >>= {w}")
        o.line("self._v = True")
        o.dedent()
        # emit: one pack of the masked fields
        o.line("def emit(self, out, _pack=_pack):")
        o.indent()
        o.line("if not self._v: return")
        items = []
        for code, run, direct in segs:
            if direct:
                pf, ft, w = run[0]
                items.append(f"self.{pf} & {hex((1 << w) - 1)}")
                continue
            terms, shift = [], sum(w for _, _, w in run)
            for pf, ft, w in run:
                shift -= w
                x = (f"(int(self.{pf}) & 1)" if isinstance(ft, Bool)
                     else f"(self.{pf} & {hex((1 << w) - 1)})")
                terms.append(f"({x} << {shift})" if shift else x)
            expr = " | ".join(terms)
            if code.endswith("s"):
                expr = f"({expr}).to_bytes({code[:-1]}, 'big')"
            items.append(expr)
        o.line(f"out.append(_pack({', '.join(items)}))")
        o.dedent()
        # the header's bits as one int, valid or not (field lists that name the whole header)
        o.line("def packed_int(self, _pack=_pack):")
        o.indent()
        o.line(f"return int.from_bytes(_pack({', '.join(items)}), 'big')")
        o.dedent()
        # ... and what its bits add to a ones' sum (csum16 of field lists naming the header)
        o.line("def csum16_residue(self):")
        o.indent()
        o.line(f"return {self.csum16_residue([(f'self.{pf}', ft) for (_, ft), pf in zip(t.fields, fields)])}")
        o.dedent()
        o.line("def values(self):")
        o.indent()
        o.line("return (" + "".join(f"self.{pf}, " for pf in fields) + ")")
        o.dedent()
        o.line("def set_valid(self):")
        o.indent()
        o.line("if not self._v:")
        o.indent()
        if self.wide_types.get(t.name):
            o.line("self.__dict__.clear()         # every field back to its class default")
            o.line("self._v = True")
        else:
            o.line("self._v = True")
            for (n, ft), pf in zip(t.fields, fields):
                o.line(f"self.{pf} = {self.default_value(ft)}")
        o.dedent()
        o.dedent()

    # ------------------------------------------------------------------------------ expressions
    def g(self, e: ir.Expr) -> str:
        c = getattr(e, "const", None)
        if c is not None and not isinstance(e.type, (StructT, ListT, StringT)):
            if isinstance(c, bool):
                return "True" if c else "False"
            if isinstance(c, int):
                return str(c)
        m = getattr(self, "g_" + type(e).__name__, None)
        if m is None:
            raise unsupported(e, f"expression {type(e).__name__}")
        return m(e)

    def g_Path(self, e: ir.Path) -> str:
        sym = e.sym
        if sym in self.names:
            return self.names[sym]
        if sym.kind == "const":
            return repr(sym.const)
        raise unsupported(e, f"reference to {sym.kind} {e.name} here")

    def g_Member(self, e: ir.Member) -> str:
        bt = e.expr.type
        base = self.g(e.expr)
        if isinstance(bt, StackT):
            if e.member == "next":
                return f"{base}.next()"
            if e.member == "last":
                return f"{base}.last()"
            if e.member == "lastIndex":
                return f"(({base}.next_index - 1) & 0xffffffff)"
            if e.member == "nextIndex":
                return f"{base}.next_index"
        if isinstance(bt, StructT):
            text = f"{base}.{pyfield(e.member)}"
            return self.hoisted.get(text, text)
        if isinstance(bt, ObjT) and bt.kind == "apply_result":
            if e.member == "hit":
                return f"{base}[0]"
            if e.member == "miss":
                return f"(not {base}[0])"
            return f"{base}[1]"
        raise unsupported(e, f"member {e.member} of {bt}")

    def g_Index(self, e: ir.Index) -> str:
        return f"{self.g(e.expr)}.at({self.g(e.index)})"

    def g_Slice(self, e: ir.Slice) -> str:
        w = e.hi_v - e.lo_v + 1
        bt = e.expr.type
        if isinstance(bt, Bits) and not bt.signed and e.hi_v == bt.width - 1:
            # the top bits of an unsigned value (kept in 0 .. 2**N - 1): no mask needed
            return f"({self.g(e.expr)} >> {e.lo_v})" if e.lo_v else self.g(e.expr)
        if e.lo_v == 0:
            return f"({self.g(e.expr)} & {hex((1 << w) - 1)})"
        return f"(({self.g(e.expr)} >> {e.lo_v}) & {hex((1 << w) - 1)})"

    def g_Cond(self, e: ir.Cond) -> str:
        return f"({self.g(e.then)} if {self.g(e.cond)} else {self.g(e.other)})"

    @staticmethod
    def wrap(x: str, t) -> str:
        if isinstance(t, Bits):
            if t.signed:
                h = 1 << (t.width - 1)
                return f"((({x}) + {h}) & {hex(t.mask)}) - {h}"
            return f"(({x}) & {hex(t.mask)})"
        return x

    def g_Unary(self, e: ir.Unary) -> str:
        x = self.g(e.expr)
        t = e.type
        if e.op == "!":
            return f"(not {x})"
        if e.op == "+":
            return x
        if e.op == "~":
            return f"(~{x})" if t.signed else f"({x} ^ {hex(t.mask)})"
        return self.wrap(f"-{x}", t)

    def g_Binary(self, e: ir.Binary) -> str:
        op = e.op
        a, b = self.g(e.left), self.g(e.right)
        t = e.type
        lt = e.left.type
        if op == "&&":
            return f"({a} and {b})"
        if op == "||":
            return f"({a} or {b})"
        if op in ("==", "!=", "<", ">", "<=", ">="):
            return f"({a} {op} {b})"
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op in ("+", "-", "*"):
            return self.wrap(f"{a} {op} {b}", t)
        if op in ("/", "%"):
            return self.wrap(f"RT.div({a}, {b})" if op == "/" else f"RT.mod({a}, {b})", t)
        if op == "|+|" or op == "|-|":
            pyop = "+" if op == "|+|" else "-"
            if t.signed:
                lo, hi = -(1 << (t.width - 1)), (1 << (t.width - 1)) - 1
            else:
                lo, hi = 0, t.mask
            return f"max({lo}, min({hi}, {a} {pyop} {b}))"
        if op == "<<":
            return f"RT.shl({a}, {b}, {t.width}, {t.signed})"
        if op == ">>":
            if t.signed:
                return f"({a} >> min({b}, {t.width}))"
            return f"({a} >> {b} if {b} < {t.width} else 0)"
        if op == "++":
            rt = e.right.type
            # Unsigned bit<N> values are always kept in 0 .. 2**N - 1: no masking needed for
            # them, and their concatenation is in range of the (unsigned) result.
            ua = isinstance(lt, Bits) and not lt.signed
            ub = isinstance(rt, Bits) and not rt.signed
            am = f"({a})" if ua else f"(({a}) & {hex(lt.mask)})"
            bm = f"({b})" if ub else f"(({b}) & {hex(rt.mask)})"
            x = f"({am} << {rt.width}) | {bm}"
            if ua and ub and isinstance(t, Bits) and not t.signed:
                return f"({x})"
            return self.wrap(x, t)
        raise unsupported(e, f"operator {op}")

    def g_Cast(self, e: ir.Cast) -> str:
        x = self.g(e.expr)
        to, src = e.type, e.expr.type
        if isinstance(to, Bool):
            return f"({x} != 0)"
        if isinstance(src, Bool):
            return f"(1 if {x} else 0)"
        if isinstance(to, Bits):
            return self.wrap(x, to)
        if isinstance(to, EnumT):
            return self.wrap(x, to.base)
        return x

    def g_ListExpr(self, e: ir.ListExpr) -> str:
        return "(" + "".join(self.g(x) + ", " for x in e.items) + ")"

    def g_TypeMember(self, e) -> str:
        return str(e.const)

    def g_Call(self, e: ir.Call) -> str:
        kind = e.call_kind
        if kind[0] == "header" and kind[1] == "isValid":
            return f"{self.g(e.func.expr)}._v"
        if kind[0] == "table_apply":
            return self.table_apply(e)
        if kind[0] == "extern_method" and kind[2] == "lookahead":
            t = e.type
            if isinstance(t, StructT) and t.kind == "header":
                return f"C.peek({self.class_of(t)})"
            if not isinstance(t, Bits):
                raise unsupported(e, f"lookahead<{t}> (only bit<N> and headers are supported)")
            return f"C.lookahead({width_of(t)})"
        if kind[0] == "extern_method" and kind[1] == "packet_in" and kind[2] == "length":
            return "len(C.buf)"
        if kind[0] == "function":
            return f"{self.names[e.func.sym]}({', '.join(self.g(a) for a in e.args)})"
        if kind[0] == "extern_method" and kind[1] == "register" and kind[2] == "read":
            return f"{self.names[e.func.expr.sym]}.read({self.g(e.args[0])})"
        raise unsupported(e, f"call of {expr_text(e.func)} in an expression")

    def table_apply(self, e: ir.Call) -> str:
        table = e.func.expr.sym.decl
        tname = self.names[e.func.expr.sym]
        keys = "(" + "".join(self.key_expr(k) + ", " for k in table.keys) + ")"
        if tname not in self.counted_tables:       # only direct counters use the length
            return f"{tname}.apply({keys})"
        return f"{tname}.apply({keys}, C.length)"

    def key_expr(self, k: ir.KeyElem) -> str:
        x = self.g(k.expr)
        t = k.expr.type
        if isinstance(t, Bool):
            return f"(1 if {x} else 0)"
        if isinstance(t, Bits) and t.signed:
            return f"({x} & {hex(t.mask)})"
        return x

    # ------------------------------------------------------------------------------ l-values
    def assign(self, target: ir.Expr, value: str, vtype=None) -> None:
        o = self.out
        if isinstance(target, ir.Slice):
            base = self.g(target.expr)
            w = target.hi_v - target.lo_v + 1
            m = (1 << w) - 1
            full = target.expr.type.mask
            clear = full ^ (m << target.lo_v)
            new = f"({base} & {hex(clear)}) | ((({value}) & {hex(m)}) << {target.lo_v})"
            self.assign(target.expr, self.wrap(new, target.expr.type) if target.expr.type.signed else new)
            return
        if isinstance(target, ir.DontCare):
            return
        t = target.type
        if isinstance(t, (StructT, StackT)) and vtype is not None and not isinstance(vtype, ListT):
            value = f"{value}.copy()"
        if isinstance(target, ir.Index):
            o.line(f"{self.g(target.expr)}.put({self.g(target.index)}, {value})")
            return
        if isinstance(target, ir.Member) and isinstance(target.expr.type, StackT):
            raise unsupported(target, f"assignment to {target.member} of a header stack")
        o.line(f"{self.g(target)} = {value}")

    def value_for(self, e: ir.Expr, t) -> str:
        """Python expression for ``e`` converted to type ``t`` (list/struct initialisers)."""
        if isinstance(e, ir.ListExpr) and isinstance(t, StructT):
            vals = [self.value_for(x, ft) for x, (_, ft) in zip(e.items, t.fields)]
            return f"{self.class_of(t)}.of({', '.join(vals)})"
        if isinstance(e, ir.StructExpr) and isinstance(t, StructT):
            by = dict(zip(e.names, e.values))
            vals = [self.value_for(by[n], ft) for n, ft in t.fields]
            return f"{self.class_of(t)}.of({', '.join(vals)})"
        return self.g(e)

    # ------------------------------------------------------------------------------ hoisting
    def body_with_hoisting(self, body: ir.Stmt) -> None:
        """Generate an action body, first loading into locals the scalar fields it reads more
        than once and never writes (``meta.alu_mode`` read by every lane of an ALU action).
        Only for bodies whose effects are all visible here: no calls of (non-inlined) actions,
        functions, tables, controls or header methods, no switch, no header stacks. Loading a
        struct field early cannot fail, and nothing in the body changes it, so every read sees
        the same value as before."""
        reads, written = {}, set()
        if not self._scan_stmt(body, reads, written):
            self.stmt(body)
            return
        saved = self.hoisted
        self.hoisted = dict(saved)
        for text, (count, names) in reads.items():
            if count >= 2 and text not in self.hoisted and not (names & written):
                h = self.fresh("h")
                self.out.line(f"{h} = {text}")
                self.hoisted[text] = h
        try:
            self.stmt(body)
        finally:
            self.hoisted = saved

    def _chain(self, e) -> Optional[tuple]:
        """(text, names) of a field chain ``base.f1...fn`` rooted at an already named variable
        through structs/headers only, else None."""
        names = []
        x = e
        while isinstance(x, ir.Member):
            if not isinstance(x.expr.type, StructT):
                return None
            names.append(x.member)
            x = x.expr
        if not isinstance(x, ir.Path) or x.sym not in self.names or x is e:
            return None
        base = self.names[x.sym]
        if not base.startswith(("p_", "c_")):    # parameters and control variables only
            return None
        names.append(base)
        text = base + "".join("." + pyfield(n) for n in reversed(names[:-1]))
        return text, frozenset(names)

    def _scan_expr(self, e, reads: dict) -> bool:
        if e is None or getattr(e, "const", None) is not None:
            return True
        if isinstance(e, ir.Member):
            c = self._chain(e)
            if c is not None:
                if isinstance(e.type, (Bits, Bool, EnumT)):
                    n, _ = reads.get(c[0], (0, None))
                    reads[c[0]] = (n + 1, c[1])
                return True
            if isinstance(e.expr.type, StackT):
                return False
            return self._scan_expr(e.expr, reads)
        if isinstance(e, (ir.IntLit, ir.BoolLit, ir.StringLit, ir.Path, ir.TypeMember)):
            return True
        operands = _operands(e)
        if operands is not None:
            return all(self._scan_expr(x, reads) for x in operands)
        if isinstance(e, ir.StructExpr):
            return all(self._scan_expr(x, reads) for x in e.values)
        if isinstance(e, ir.Call):
            k = getattr(e, "call_kind", None)
            return bool(k) and k[0] == "header" and k[1] == "isValid"
        return False

    def _scan_table_apply(self, e, reads: dict, written: set) -> bool:
        """A table apply: its keys are read; any of its actions may run (their writes count)."""
        table = e.func.expr.sym.decl
        if not isinstance(table, ir.TableDecl):
            return False
        if not all(self._scan_expr(k.expr, reads) for k in table.keys):
            return False
        for sym in table.action_decls:
            d = getattr(sym, "decl", None)
            if not isinstance(d, ir.ActionDecl) or not self._scan_stmt(d.body, {}, written):
                return False
            for p in d.params:          # an action's parameters are its own locals
                written.add(f"p_{p.name}")
                written.add(p.name)
        return True

    def _scan_target(self, t, reads: dict, written: set) -> bool:
        while isinstance(t, ir.Slice):
            t = t.expr
        if isinstance(t, ir.DontCare):
            return True
        x = t
        while isinstance(x, ir.Member):
            if isinstance(x.expr.type, StackT):
                return False
            written.add(x.member)
            x = x.expr
        if not isinstance(x, ir.Path):
            return False
        if x is t:                  # the whole variable assigned
            written.add(self.names.get(x.sym, x.name))
            written.add(x.name)
        return True

    def _scan_stmt(self, s, reads: dict, written: set) -> bool:
        if isinstance(s, ir.Block):
            return all(self._scan_stmt(x, reads, written) for x in s.stmts)
        if isinstance(s, ir.Assign):
            return self._scan_expr(s.value, reads) and self._scan_target(s.target, reads, written)
        if isinstance(s, ir.VarDecl):
            return self._scan_expr(s.init, reads)
        if isinstance(s, (ir.ConstDecl, ir.EmptyStmt, ir.Exit, ir.Return)):
            return s.value is None if isinstance(s, ir.Return) else True
        if isinstance(s, ir.If):
            return (self._scan_expr(s.cond, reads) and self._scan_stmt(s.then, reads, written)
                    and (s.other is None or self._scan_stmt(s.other, reads, written)))
        if isinstance(s, ir.CallStmt):
            e = s.call
            k = getattr(e, "call_kind", None)
            if not k or isinstance(e, ir.CtorCall):
                return False
            if k[0] == "extern_method" and k[1] == "register" and k[2] in ("read", "write"):
                if not isinstance(e.func.expr, ir.Path) or self.names.get(e.func.expr.sym) is None:
                    return False
                if k[2] == "read":
                    return self._scan_expr(e.args[1], reads) and \
                        self._scan_target(e.args[0], reads, written)
                return all(self._scan_expr(a, reads) for a in e.args)
            if k[0] == "extern_method" and k[1] == "counter":
                return all(self._scan_expr(a, reads) for a in e.args)
            if k[0] == "table_apply":
                return self._scan_table_apply(e, reads, written)
            if k[0] == "extern_func" and k[1] == "hash" and len(e.args) == 5:
                return all(self._scan_expr(a, reads) for a in e.args[1:]) and \
                    self._scan_target(e.args[0], reads, written)
            if k[0] == "header" and k[1] in ("setValid", "setInvalid"):
                t = e.func.expr.type        # set_valid() zeroes the fields: all are written
                if not isinstance(t, StructT) or not self._scan_expr(e.func.expr, reads):
                    return False
                written.update(n for n, _ in t.fields)
                return True
            if k[0] == "action" and isinstance(e.func.sym.decl, ir.ActionDecl) \
                    and not e.func.sym.decl.params and not has_return(e.func.sym.decl.body):
                return self._scan_stmt(e.func.sym.decl.body, reads, written)   # inlined
            return False
        return False

    # ------------------------------------------------------------------------------ statements
    @staticmethod
    def _assigned_next(decl: ir.VarDecl, nxt) -> bool:
        """Whether ``nxt`` (the statement after ``decl``) sets the whole declared scalar
        without reading it first (its default value is then never seen)."""
        if not isinstance(decl.resolved, (Bits, Bool)) or nxt is None:
            return False
        if isinstance(nxt, ir.CallStmt):
            k = getattr(nxt.call, "call_kind", None)
            if k and k[0] == "extern_method" and k[1] == "register" and k[2] == "read":
                t = nxt.call.args[0]
                return isinstance(t, ir.Path) and _decl_of(t) is decl and \
                    not CodeGen._mentions(nxt.call.args[1], decl)
            if k and k[0] == "extern_func" and k[1] == "hash" and len(nxt.call.args) == 5:
                t = nxt.call.args[0]
                return isinstance(t, ir.Path) and _decl_of(t) is decl and \
                    not any(CodeGen._mentions(a, decl) for a in nxt.call.args[1:])
        return False

    @staticmethod
    def _mentions(e, decl) -> bool:
        """Whether expression ``e`` may refer to ``decl`` (conservative: True when unsure)."""
        if isinstance(e, ir.Path):
            return _decl_of(e) is decl or _decl_of(e) is None
        if getattr(e, "const", None) is not None or isinstance(e, (ir.IntLit, ir.BoolLit,
                                                                     ir.TypeMember)):
            return False
        if isinstance(e, ir.Member):
            return CodeGen._mentions(e.expr, decl)
        operands = _operands(e)
        if operands is not None:
            return any(CodeGen._mentions(x, decl) for x in operands)
        return True

    def stmt(self, s: ir.Stmt) -> None:
        o = self.out
        if isinstance(s, ir.Block):
            n = len(o.lines)
            stmts = s.stmts
            for i, x in enumerate(stmts):
                if isinstance(x, ir.VarDecl) and x.init is None and \
                        self._assigned_next(x, stmts[i + 1] if i + 1 < len(stmts) else None):
                    # `bit<32> old; r.read(old, i);`: only name the local, no default store
                    self.names[self._find_sym(x)] = self.fresh(f"v_{x.name}_")
                    continue
                self.stmt(x)
            if len(o.lines) == n:
                o.line("pass")
        elif isinstance(s, ir.Assign):
            self.assign(s.target, self.value_for(s.value, s.target.type), s.value.type)
        elif isinstance(s, ir.VarDecl):
            name = self.fresh(f"v_{s.name}_")
            sym = self._find_sym(s)
            self.names[sym] = name
            if s.init is not None:
                val = self.value_for(s.init, s.resolved)
                if isinstance(s.resolved, (StructT, StackT)) and not isinstance(s.init, (ir.ListExpr, ir.StructExpr)):
                    val += ".copy()"
                o.line(f"{name} = {val}")
            else:
                o.line(f"{name} = {self.default_value(s.resolved)}")
        elif isinstance(s, ir.ConstDecl):
            pass
        elif isinstance(s, ir.CallStmt):
            self.call_stmt(s.call)
        elif isinstance(s, ir.If):
            o.line(f"if {self.g(s.cond)}:")
            o.indent()
            self.stmt(s.then)
            o.dedent()
            if s.other is not None:
                o.line("else:")
                o.indent()
                self.stmt(s.other)
                o.dedent()
        elif isinstance(s, ir.Switch):
            self.switch(s)
        elif isinstance(s, ir.Exit):
            o.line("raise RT.ExitControl()")
        elif isinstance(s, ir.Return):
            if s.value is not None:
                o.line(f"return {self.g(s.value)}")
            else:
                o.line("return")
        elif isinstance(s, ir.EmptyStmt):
            o.line("pass")
        else:
            raise unsupported(s, type(s).__name__)

    def switch(self, s: ir.Switch) -> None:
        o = self.out
        t = s.expr.type
        v = self.fresh("sw")
        if isinstance(t, ObjT) and t.kind == "action_run":
            o.line(f"{v} = {self.g(s.expr)}")
            labels = lambda c: self.action_full_name(t.decl, c.label.name)
        else:
            o.line(f"{v} = {self.g(s.expr)}")
            labels = lambda c: self.g(c.label)
        pending: list = []
        first = True
        default_body = None
        for c in s.cases:
            if c.label is None:
                if c.body is None:
                    continue
                default_body = c.body
                pending = []
                continue
            pending.append(labels(c))
            if c.body is None:
                continue
            o.line(f"{'if' if first else 'elif'} {v} in ({', '.join(pending)},):")
            first = False
            o.indent()
            self.stmt(c.body)
            o.dedent()
            pending = []
        if default_body is not None:
            if first:
                self.stmt(default_body)
            else:
                o.line("else:")
                o.indent()
                self.stmt(default_body)
                o.dedent()

    def action_full_name(self, table: ir.TableDecl, action: str) -> str:
        """Python name of the generated action function (tables report the function run)."""
        for sym in table.action_decls:
            if sym.name == action:
                return self.names[sym]
        return action

    def out_args(self, e: ir.Call, params: list) -> tuple:
        """(argument texts, [(index of out param, target expr)])"""
        args, outs = [], []
        for i, (a, p) in enumerate(zip(e.args, params)):
            if p.direction == "out":
                args.append("None" if not isinstance(p.resolved, (StructT, StackT)) else self.g(a))
            else:
                args.append(self.value_for(a, p.resolved))
            if p.direction in ("out", "inout") and not isinstance(p.resolved, (StructT, StackT)):
                outs.append((i, a))
        return args, outs

    def call_stmt(self, e) -> None:
        o = self.out
        if isinstance(e, ir.CtorCall):
            raise unsupported(e, "constructor call as a statement")
        kind = e.call_kind
        k0 = kind[0]
        if k0 == "header":
            h = self.g(e.func.expr)
            if kind[1] == "setValid":
                o.line(f"{h}.set_valid()")
            elif kind[1] == "setInvalid":
                o.line(f"{h}._v = False")
            else:
                o.line(f"{h}._v")
            return
        if k0 == "stack":
            o.line(f"{self.g(e.func.expr)}.{kind[1]}({self.g(e.args[0])})")
            return
        if k0 == "table_apply":
            o.line(self.table_apply(e))
            return
        if k0 == "action" and isinstance(e.func.sym.decl, ir.ActionDecl) \
                and not e.func.sym.decl.params and not has_return(e.func.sym.decl.body):
            # A direct call of a parameterless action: its body inlined (it only touches the
            # enclosing control's closure cells and its own fresh locals), saving a call per
            # action per packet. Tables still call the action function.
            n = len(o.lines)
            self.body_with_hoisting(e.func.sym.decl.body)
            if len(o.lines) == n:
                o.line("pass")
            return
        if k0 in ("action", "function"):
            sym = e.func.sym
            params = sym.decl.params
            args, outs = self.out_args(e, params)
            call = f"{self.names[sym]}({', '.join(args)})"
            if outs:
                r = self.fresh("r")
                o.line(f"{r} = {call}")
                for j, (i, a) in enumerate(outs):
                    self.assign(a, f"{r}[{j}]")
            else:
                o.line(call)
            return
        if k0 == "control_apply":
            inst = e.func.expr.sym
            params = inst.type.decl.params
            args, outs = self.out_args(e, params)
            call = f"{self.names[inst]}({', '.join(args)})"
            if outs:
                r = self.fresh("r")
                o.line(f"{r} = {call}")
                for j, (i, a) in enumerate(outs):
                    self.assign(a, f"{r}[{j}]")
            else:
                o.line(call)
            return
        if k0 == "extern_method":
            self.extern_method(e, kind[1], kind[2])
            return
        if k0 == "extern_func":
            self.extern_func(e, kind[1])
            return
        raise unsupported(e, f"call {expr_text(e.func)}")

    def field_list(self, e: ir.Expr) -> tuple:
        """(python tuple of values, tuple of widths) for a hash/checksum data argument."""
        items = e.items if isinstance(e, ir.ListExpr) else [e]
        vals, widths = [], []
        for x in items:
            t = x.type
            if isinstance(t, StructT):
                for n, ft in t.fields:
                    vals.append(f"{self.g(x)}.{pyfield(n)}")
                    widths.append(width_of(ft))
                continue
            if isinstance(t, InfInt):
                raise unsupported(x, "integer of unknown width in a field list")
            v = self.g(x)
            if isinstance(t, Bits) and t.signed:
                v = f"({v} & {hex(t.mask)})"
            if isinstance(t, Bool):
                v = f"int({v})"
            vals.append(v)
            widths.append(width_of(t))
        return "(" + "".join(v + ", " for v in vals) + ")", tuple(widths)

    def inline_extract(self, target: str, t: StructT) -> None:
        """``pkt.extract(h)`` inlined (the hot path of every parser)."""
        o = self.out
        n = (t.width + 7) // 8
        o.line(f"if C.off + {n} > C.n: raise RT.ParserError(RT.ERR_PACKET_TOO_SHORT)")
        o.line(f"{target}.extract(C.buf, C.off)")
        o.line(f"C.off += {n}")
        o.line(f"if C.trace is not None: C.trace.append('  extract {t.name} ({n} bytes)')")

    def _flatten(self, text: str, t, valid: Optional[str], out: list) -> None:
        """Append (value text, type, validity text or None) for each field of a field list."""
        if isinstance(t, StructT):
            if t.kind == "header":
                valid = f"{text}._v"
            for n, ft in t.fields:
                self._flatten(f"{text}.{pyfield(n)}", ft, valid, out)
        elif isinstance(t, StackT):
            for i in range(t.size):
                self._flatten(f"{text}.items[{i}]", t.elem, valid, out)
        else:
            out.append((text, t, valid))

    def field_parts(self, e: ir.Expr) -> list:
        """Flattened fields of a hash/checksum data argument, with the validity of the header
        each comes from (BMv2 leaves the fields of invalid headers out of the hashed bytes).
        A whole header named in the list stays one part: its bits packed at C speed
        (``packed_int``), and only when it is valid."""
        items = e.items if isinstance(e, ir.ListExpr) else [e]
        parts: list = []
        for x in items:
            if isinstance(x.type, InfInt):
                raise unsupported(x, "integer of unknown width in a field list")
            t = x.type
            if isinstance(t, StructT) and t.kind == "header" and t.fields:
                h = self.g(x)
                parts.append((h, _HeaderBits(t), f"{h}._v"))
                continue
            valid = None
            if isinstance(x, ir.Member) and isinstance(x.expr.type, StructT) and x.expr.type.kind == "header":
                valid = f"{self.g(x.expr)}._v"
            self._flatten(self.g(x), x.type, valid, parts)
        return parts

    @staticmethod
    def _field_value(v: str, t) -> str:
        if isinstance(t, _HeaderBits):
            return f"({v}.packed_int() if {v}._v else 0)"
        if isinstance(t, Bool):
            return f"int({v})"
        if isinstance(t, Bits) and t.signed:
            return f"({v} & {hex(t.mask)})"
        return v

    def packed_field_list(self, e: ir.Expr) -> tuple:
        """(python expression giving ``(packed int, number of bits)``) for a field list.

        When every field comes from always-valid data (metadata) the packing is a constant
        expression; otherwise the fast packing is used when all the headers involved are valid
        and ``RT.pack_valid`` (which drops invalid headers' fields) when some are not."""
        parts = self.field_parts(e)
        total = sum(_part_width(t) for _, t, _ in parts)
        terms, shift = [], total
        for v, t, _ in parts:
            shift -= _part_width(t)
            v = self._field_value(v, t)
            terms.append(f"({v} << {shift})" if shift else v)
        fast = f"(({' | '.join(terms) if terms else '0'}), {total})"
        valids = sorted({valid for _, _, valid in parts if valid})
        if not valids:
            return fast
        slow = "RT.pack_valid((" + "".join(
            f"({valid or 'True'}, {self._field_value(v, t)}, {_part_width(t)}), "
            for v, t, valid in parts) + "))"
        return f"({fast} if {' and '.join(valids)} else {slow})"

    def csum16_residue(self, fields: list) -> str:
        """An expression congruent (mod 0xFFFF) to the value of ``fields`` ((value text, type),
        most significant first) concatenated, and 0 only when they all are: each field weighed by
        2 ** (its bit position from the end, mod 16), since 2 ** 16 = 1 mod 0xFFFF. Fields of the
        same weight are summed first, so a header of 32-bit words costs one sum."""
        by_weight: dict[int, list] = {}
        pos = 0
        for v, t in reversed(fields):
            by_weight.setdefault(pos % 16, []).append(self._field_value(v, t))
            pos += _part_width(t)
        terms = []
        for k, vals in sorted(by_weight.items()):
            total = vals[0] if len(vals) == 1 else "(" + " + ".join(reversed(vals)) + ")"
            terms.append(f"({total} << {k})" if k else total)
        return " + ".join(terms) if terms else "0"

    def csum16_sum(self, e: ir.Expr) -> str:
        """An expression for the ones' sum of a field list (what ``RT.csum16_int`` turns into
        the Internet checksum, ``RT.csum16_parts``): the bytes are never built. Invalid
        headers' fields are left out, as in :meth:`packed_field_list`."""
        parts = self.field_parts(e)

        def residue(v, t):
            if isinstance(t, _HeaderBits):
                return f"({v}.csum16_residue() if {v}._v else 0)"
            return self.csum16_residue([(v, t)])
        if not any(valid for _, _, valid in parts):
            pos, terms = -sum(_part_width(t) for _, t, _ in parts), []
            for v, t, _ in reversed(parts):
                r = residue(v, t)
                terms.append(f"({r} << {pos % 16})" if pos % 16 else r)
                pos += _part_width(t)
            return "(" + " + ".join(terms) + ")" if terms else "0"
        return "RT.csum16_parts((" + "".join(
            f"({valid or 'True'}, {residue(v, t)}, {_part_width(t)}), "
            for v, t, valid in parts) + "))"

    def local_index(self, text: str) -> str:
        """``text`` (an index expression) evaluated once: itself when it is a constant or a
        generated local (``_...``: nothing else can rebind it), else a fresh local."""
        if text.isdigit() or (text.startswith("_") and text.isidentifier()):
            return text
        i = self.fresh("i")
        self.out.line(f"{i} = {text}")
        return i

    def extern_method(self, e: ir.Call, ext: str, method: str) -> None:
        o = self.out
        base = e.func.expr
        if ext == "packet_in":
            if method == "extract":
                if len(e.args) != 1:
                    raise unsupported(e, "extract of variable-size headers")
                a = e.args[0]
                if isinstance(a, ir.Member) and isinstance(a.expr.type, StackT) and a.member == "next":
                    o.line(f"C.extract({self.g(a.expr)}.next_for_extract())")
                elif not isinstance(a.type, StructT) or a.type.kind != "header":
                    raise unsupported(a, f"extract into {a.type}")
                else:
                    self.inline_extract(self.g(a), a.type)
            elif method == "advance":
                o.line(f"C.advance({self.g(e.args[0])})")
            elif method == "lookahead":
                pass
            else:
                raise unsupported(e, f"packet_in.{method}")
            return
        if ext == "packet_out":
            o.line(f"{self.g(e.args[0])}.emit(C.out)")
            return
        inst = self.names.get(base.sym) if isinstance(base, ir.Path) else None
        if inst is None:
            raise unsupported(e, f"{ext}.{method} on this object")
        if ext == "register":
            size = self.reg_sizes.get(inst)
            if method == "read":
                if size is None:
                    self.assign(e.args[0], f"{inst}.read({self.g(e.args[1])})")
                else:           # Register.read inlined: out of range reads give 0
                    i = self.local_index(self.g(e.args[1]))
                    self.assign(e.args[0], f"({inst}_v[{i}] if 0 <= {i} < {size} else 0)")
            elif method == "write":
                if size is None:
                    o.line(f"{inst}.write({self.g(e.args[0])}, {self.g(e.args[1])})")
                else:           # Register.write inlined: out of range writes are ignored
                    i = self.local_index(self.g(e.args[0]))
                    value = self.g(e.args[1])
                    if not pure(e.args[1]):     # evaluated whatever the index, as before
                        w = self.fresh("w")
                        o.line(f"{w} = {value}")
                        value = w
                    o.line(f"if 0 <= {i} < {size}: {inst}_v[{i}] = {value}")
            return
        if ext == "counter":
            o.line(f"{inst}.count({self.g(e.args[0])}, C.length)")
            return
        if ext == "direct_counter":
            return                      # counted by the table on a hit
        if ext == "meter":
            self.assign(e.args[1], f"{inst}.execute({self.g(e.args[0])}, C.length)")
            return
        if ext == "direct_meter":
            self.assign(e.args[0], f"{inst}.color()")
            return
        raise unsupported(e, f"extern {ext}.{method}")

    def extern_func(self, e: ir.Call, name: str) -> None:
        o = self.out
        a = e.args
        if name == "mark_to_drop":
            if not a:
                raise unsupported(e, "mark_to_drop() without standard_metadata")
            s = self.g(a[0])
            o.line(f"{s}.egress_spec = {DROP_PORT}")
            o.line(f"{s}.mcast_grp = 0")
        elif name == "hash":
            mask = e.args[0].type.mask
            algo = getattr(a[1], "const", None)
            if algo == CSUM16 and not isinstance(algo, bool):
                self.assign(a[0], f"RT.hash_csum16_sum({self.g(a[2])}, {self.csum16_sum(a[3])}, "
                                  f"{self.g(a[4])}, {hex(mask)})")
                return
            data = self.packed_field_list(a[3])
            if isinstance(algo, int) and not isinstance(algo, bool) and algo in HASH_BY_ALGO:
                self.assign(a[0], f"RT.{HASH_BY_ALGO[algo]}({self.g(a[2])}, *{data}, "
                                  f"{self.g(a[4])}, {hex(mask)})")
            else:
                self.assign(a[0], f"RT.hash_packed({self.g(a[1])}, {self.g(a[2])}, *{data}, "
                                  f"{self.g(a[4])}, {hex(mask)})")
        elif name in ("verify_checksum", "verify_checksum_with_payload"):
            payload = ", C.payload()" if name.endswith("payload") else ""
            if not payload and getattr(a[3], "const", None) == CSUM16:
                computed = f"RT.csum16_int({self.csum16_sum(a[1])})"
            else:
                computed = (f"RT.checksum_packed({self.g(a[3])}, *{self.packed_field_list(a[1])}"
                            f"{payload})")
            o.line(f"if {self.g(a[0])} and {computed} != {self.g(a[2])}:")
            o.indent()
            o.line("C.checksum_error = 1")
            o.dedent()
        elif name in ("update_checksum", "update_checksum_with_payload"):
            data = self.packed_field_list(a[1])
            payload = ", C.payload()" if name.endswith("payload") else ""
            o.line(f"if {self.g(a[0])}:")
            o.indent()
            algo = getattr(a[3], "const", None)
            if not payload and algo == CSUM16 and not isinstance(algo, bool):
                self.assign(a[2], f"RT.csum16_int({self.csum16_sum(a[1])}) & {hex(a[2].type.mask)}")
            elif not payload and isinstance(algo, int) and not isinstance(algo, bool) \
                    and algo in CHECKSUM_BY_ALGO:
                self.assign(a[2], f"RT.{CHECKSUM_BY_ALGO[algo]}(*{data}) & {hex(a[2].type.mask)}")
            else:
                self.assign(a[2], f"RT.checksum_packed({self.g(a[3])}, *{data}{payload}) "
                                  f"& {hex(a[2].type.mask)}")
            o.dedent()
        elif name == "verify":
            o.line(f"if not {self.g(a[0])}: raise RT.ParserError({self.g(a[1])})")
        elif name == "random":
            self.assign(a[0], f"RT.random_value({self.g(a[1])}, {self.g(a[2])})")
        elif name == "digest":
            t = a[1].type
            bound = getattr(e, "tvars", {}).get(e.method.type_params[0]) if e.method.type_params else None
            if isinstance(bound, StructT):
                t = bound
            if isinstance(t, StructT):
                tname = t.name or "digest"
                if isinstance(a[1], ir.StructExpr):
                    by = dict(zip(a[1].names, a[1].values))
                    vals = "(" + "".join(self.g(by[n]) + ", " for n, _ in t.fields) + ")"
                elif isinstance(a[1], ir.ListExpr):
                    vals = self.field_list(a[1])[0]
                else:
                    vals = f"{self.g(a[1])}.values()"
            else:
                tname = "digest"
                vals, _ = self.field_list(a[1])
            o.line(f"C.digest({tname!r}, lambda: {vals})")
            self.digests.setdefault(tname, t)
        elif name == "clone":
            o.line(f"C.clone({self.g(a[0])}, {self.g(a[1])}, 0)")
        elif name == "clone_preserving_field_list":
            o.line(f"C.clone({self.g(a[0])}, {self.g(a[1])}, {self.g(a[2])})")
        elif name == "resubmit_preserving_field_list":
            o.line(f"C.resubmit = {self.g(a[0])} or -1")
        elif name == "recirculate_preserving_field_list":
            o.line(f"C.recirculate = {self.g(a[0])} or -1")
        elif name in ("resubmit", "recirculate", "clone3"):
            raise unsupported(e, f"{name} (deprecated; use {name.rstrip('3')}_preserving_field_list)")
        elif name == "truncate":
            o.line(f"C.truncate = {self.g(a[0])}")
        elif name == "log_msg":
            vals = self.field_list(a[1])[0] if len(a) > 1 else "()"
            o.line(f"C.log({self.g(a[0]) if not isinstance(a[0], ir.StringLit) else repr(a[0].value)}, {vals})")
        elif name in ("assert", "assume"):
            o.line(f"if not {self.g(a[0])}: C.log('{name} failed', ())")
        else:
            raise unsupported(e, f"extern {name}")


# ---------------------------------------------------------------------------------- program
V1SWITCH_BLOCKS = ("parser", "verify", "ingress", "egress", "compute", "deparser")
# Annotations the program description leaves out (p4c represents them otherwise). @hidden stays:
# hidden objects are P4Runtime symbols that P4Info does not list (softswitch.p4info).
_NOT_COPIED_ANNOTATIONS = {"name", "tableonly", "defaultonly"}


def annotation_text(a: ir.Annotation) -> str:
    def arg(x):
        if isinstance(x, ir.StringLit):
            return '"' + x.value + '"'
        if isinstance(x, ir.IntLit):
            return x.text or str(x.value)
        return expr_text(x)
    return f"@{a.name}(" + ", ".join(arg(x) for x in a.args) + ")" if a.args else f"@{a.name}"


def copied_annotations(anns: list) -> tuple:
    return tuple(annotation_text(a) for a in anns if a.name not in _NOT_COPIED_ANNOTATIONS)


class ProgramGen(CodeGen):
    """Generates the whole program: types, one factory per control/parser, and ``build``."""

    def __init__(self, checker):
        super().__init__(checker)
        self.digests: dict = {}
        self.top_actions: list = []

    def generate(self) -> str:
        o = self.out
        o.line("# Generated by softswitch.engine.codegen: do not edit.")
        self.gen_types()
        o.line("def build(RT, C, REG):")
        o.indent()
        for d in self.ck.program.decls:
            if isinstance(d, ir.ActionDecl):
                self.gen_action(d, in_control=False)
        for d in self.ck.program.decls:
            if isinstance(d, ir.FunctionDecl):
                self.gen_function(d)
            elif isinstance(d, ir.Instantiation) and d is not self.ck.main:
                self.gen_instance(d, None)
        for d in self.ck.program.decls:
            if isinstance(d, ir.ControlDecl):
                self.gen_control(d)
            elif isinstance(d, ir.ParserDecl):
                self.gen_parser(d)
        main = self.ck.main
        if main.type_ref.name != "V1Switch":
            raise unsupported(main, f"package {main.type_ref.name} (only V1Switch is supported)")
        if len(main.args) != len(V1SWITCH_BLOCKS):
            raise unsupported(main, "V1Switch with a number of arguments other than 6")
        o.line("blocks = {}")
        for role, arg in zip(V1SWITCH_BLOCKS, main.args):
            if not isinstance(arg, ir.CtorCall):
                raise unsupported(arg, "V1Switch argument that is not a constructor call")
            name = arg.type_ref.name
            decl = self.ck.controls.get(name) or self.ck.parsers.get(name)
            if decl is None:
                raise unsupported(arg, f"{name} as a V1Switch block")
            o.line(f"blocks[{role!r}] = make_{name}({name!r})")
            o.line(f"REG.block_types[{role!r}] = {name!r}")
        pdecl = self.ck.parsers.get(main.args[0].type_ref.name)
        if pdecl is None or len(pdecl.params) != 4:
            raise unsupported(main, "V1Switch whose first block is not a 4-parameter parser")
        h_t, m_t, std_t = (p.resolved for p in pdecl.params[1:])
        for t in (h_t, m_t, std_t):
            if not isinstance(t, StructT):
                raise unsupported(main, f"V1Switch type argument {t} (expected a struct)")
        o.line(f"REG.classes = ({self.class_of(h_t)}, {self.class_of(m_t)}, {self.class_of(std_t)})")
        lists: dict = {}
        self.collect_field_lists(m_t, (), lists)
        o.line(f"REG.field_lists = {lists!r}")
        o.line(f"REG.error_names = {tuple(self.ck.errors_list)!r}")
        o.line("return blocks")
        o.dedent()
        return o.source()

    def collect_field_lists(self, t: StructT, path: tuple, out: dict) -> None:
        """Fields of the user metadata annotated @field_list(N...), as attribute paths."""
        for n, ft in t.fields:
            p = path + (pyfield(n),)
            if isinstance(ft, StructT):
                self.collect_field_lists(ft, p, out)
                continue
            a = ir.find_annotation(t.field_annotations.get(n, []), "field_list")
            if a is not None:
                for arg in a.args:
                    out.setdefault(arg.value, []).append(p)

    # ------------------------------------------------------------------------------ decls
    def gen_action(self, d: ir.ActionDecl, in_control: bool) -> None:
        """An action as a nested function; registered under its p4c name (``Control.action``
        inside a control instance, the plain name at top level)."""
        o = self.out
        sym = self._find_sym(d)
        fname = f"a_{d.name}"
        self.names[sym] = fname
        name = local_name(d, d.name)
        if name.startswith(".") or not in_control:
            full = repr(qualified_name(name, None))
        else:
            full = f"prefix + {('.' + name)!r}"
        params = []
        pnames = []
        for p in d.params:
            pn = f"p_{p.name}"
            self.names[self._param_sym(p)] = pn
            params.append(pn)
            pnames.append(pn)
        o.line(f"def {fname}({', '.join(params)}):")
        o.indent()
        if self.cells:
            o.line(f"nonlocal {', '.join(self.cells)}")
        self.body_with_hoisting(d.body)
        outs = [f"p_{p.name}" for p in d.params if p.direction in ("out", "inout")
                and not isinstance(p.resolved, (StructT, StackT))]
        if outs:
            self._fix_returns(outs)
        o.dedent()
        widths = tuple(width_of(p.resolved) for p in d.params if not p.direction)
        cp_params = tuple((p.name, width_of(p.resolved), copied_annotations(p.annotations))
                          for p in d.params if not p.direction)
        o.line(f"REG.action({full}, {fname}, {widths!r}, {cp_params!r}, "
               f"{copied_annotations(d.annotations)!r})")

    def _fix_returns(self, outs: list) -> None:
        """Make a generated function return its out/inout scalars (on every return path)."""
        o = self.out
        ret = "return (" + "".join(x + ", " for x in outs) + ")"
        start = len(o.lines) - 1
        while start >= 0 and not o.lines[start].lstrip().startswith("def "):
            start -= 1
        for i in range(start + 1, len(o.lines)):
            if o.lines[i].strip() == "return":
                o.lines[i] = o.lines[i].replace("return", ret)
        o.line(ret)

    def gen_function(self, d: ir.FunctionDecl) -> None:
        o = self.out
        sym = self._find_sym(d)
        fname = f"f_{d.name}"
        self.names[sym] = fname
        params = []
        for p in d.params:
            pn = f"p_{p.name}"
            self.names[self._param_sym(p)] = pn
            params.append(pn)
        if any(p.direction in ("out", "inout") for p in d.params):
            raise unsupported(d, "functions with out/inout parameters")
        o.line(f"def {fname}({', '.join(params)}):")
        o.indent()
        self.stmt(d.body)
        o.dedent()

    def _find_sym(self, d) -> Sym:
        sym = self.ck_syms.get(id(d))
        if sym is None:
            sym = Sym("?", d.name, None, d)
            self.ck_syms[id(d)] = sym
        return sym

    def _param_sym(self, p) -> Sym:
        return self._find_sym(p)

    @property
    def ck_syms(self) -> dict:
        if not hasattr(self, "_ck_syms"):
            self._ck_syms = collect_syms(self.ck.program)
        return self._ck_syms

    def _factory_cells(self, d, instances_allowed: bool) -> tuple[list, list]:
        """Declare the closure cells of a control or parser factory: one per parameter (``p_*``)
        and per local variable (``c_*``). Returns the cell names and the variable declarations
        that ``apply`` re-initialises on every call."""
        o = self.out
        cells = []
        for p in d.params:
            pn = f"p_{p.name}"
            self.names[self._find_sym(p)] = pn
            cells.append(pn)
            o.line(f"{pn} = None")
        var_inits = []
        for loc in d.locals:
            if isinstance(loc, ir.VarDecl):
                cn = f"c_{loc.name}"
                self.names[self._find_sym(loc)] = cn
                cells.append(cn)
                o.line(f"{cn} = {self.default_value(loc.resolved)}")
                var_inits.append(loc)
            elif isinstance(loc, ir.Instantiation) and not instances_allowed:
                raise unsupported(loc, "instantiations inside a parser")
        return cells, var_inits

    def _apply_prologue(self, d, cells: list, var_inits: list) -> None:
        """Open the factory's ``apply``: bind the arguments to their cells and reset the locals
        (left indented for the body)."""
        o = self.out
        o.line("def apply(" + ", ".join(f"a_{p.name}" for p in d.params) + "):")
        o.indent()
        o.line(f"nonlocal {', '.join(cells)}" if cells else "pass")
        for p in d.params:
            o.line(f"p_{p.name} = a_{p.name}")
        for loc in var_inits:
            init = self.value_for(loc.init, loc.resolved) if loc.init is not None else self.default_value(loc.resolved)
            o.line(f"c_{loc.name} = {init}")

    def gen_control(self, d: ir.ControlDecl) -> None:
        o = self.out
        o.line(f"def make_{d.name}(prefix):")
        o.indent()
        saved_cells = self.cells
        cells, var_inits = self._factory_cells(d, instances_allowed=True)
        self.cells = cells
        for loc in d.locals:
            if isinstance(loc, ir.Instantiation):
                self.gen_instance(loc, "prefix")
        for loc in d.locals:
            if isinstance(loc, ir.ActionDecl):
                self.gen_action(loc, in_control=True)
            elif isinstance(loc, ir.FunctionDecl):
                raise unsupported(loc, "functions declared inside a control")
        for loc in d.locals:
            if isinstance(loc, ir.TableDecl):
                self.gen_table(loc)
        self._apply_prologue(d, cells, var_inits)
        self.body_with_hoisting(d.body)
        outs = [f"p_{p.name}" for p in d.params if p.direction in ("out", "inout")
                and not isinstance(p.resolved, (StructT, StackT))]
        if outs:
            self._fix_returns(outs)
        o.dedent()
        if not d.locals and not d.body.stmts:
            o.line("apply.empty = True          # the runtime skips calling it")
        o.line("return apply")
        o.dedent()
        self.cells = saved_cells

    def gen_instance(self, d: ir.Instantiation, prefix_var: str) -> None:
        o = self.out
        sym = self._find_sym(d)
        t = d.resolved
        vn = f"x_{d.name}"
        self.names[sym] = vn
        name = local_name(d, d.name)
        if prefix_var is None or name.startswith("."):
            full = repr(qualified_name(name, None))
        else:
            full = f"{prefix_var} + {('.' + name)!r}"
        if isinstance(t, ExternT):
            args = d.args
            if t.name == "register":
                et = t.type_args[0] if t.type_args else None
                if not isinstance(et, Bits):
                    raise unsupported(d, f"register of {et}")
                size = self.g(args[0])
                o.line(f"{vn} = REG.register({full}, {size}, {et.width}, {et.signed}, "
                       f"{copied_annotations(d.annotations)!r})")
                if size.isdigit():
                    # Register.values is never rebound (reset clears it in place): reads and
                    # writes index the list directly instead of calling read()/write().
                    o.line(f"{vn}_v = {vn}.values")
                    self.reg_sizes[vn] = size
            elif t.name == "counter":
                o.line(f"{vn} = REG.counter({full}, {self.g(args[0])}, {self.g(args[1])})")
            elif t.name == "meter":
                o.line(f"{vn} = REG.meter({full}, {self.g(args[0])}, {self.g(args[1])})")
            elif t.name == "direct_counter":
                o.line(f"{vn} = REG.direct_counter({full}, {self.g(args[0])})")
            elif t.name == "direct_meter":
                o.line(f"{vn} = REG.direct_meter({full}, {self.g(args[0])})")
            else:
                raise unsupported(d, f"extern {t.name}")
        elif isinstance(t, ObjT) and t.kind == "control_type":
            o.line(f"{vn} = make_{t.decl.name}({prefix_var} + {('.' + d.name)!r})")
        else:
            raise unsupported(d, f"instance of {t}")

    def gen_table(self, d: ir.TableDecl) -> None:
        o = self.out
        sym = self._find_sym(d)
        vn = f"t_{d.name}"
        self.names[sym] = vn
        name = local_name(d, d.name)
        full = repr(qualified_name(name, None)) if name.startswith(".") else f"prefix + {('.' + name)!r}"
        fields = []
        for k in d.keys:
            kname = local_name(k, expr_text(k.expr))
            fields.append((kname, width_of(k.expr.type), k.match_kind, copied_annotations(k.annotations)))
        refs = []
        for ref, s in zip(d.actions, d.action_decls):
            scope = "TABLE_AND_DEFAULT"
            if ir.find_annotation(ref.annotations, "tableonly"):
                scope = "TABLE_ONLY"
            if ir.find_annotation(ref.annotations, "defaultonly"):
                scope = "DEFAULT_ONLY"
            refs.append((self.names[s], scope, copied_annotations(
                [a for a in ref.annotations if a.name not in ("tableonly", "defaultonly")])))
        props = d.props
        size = 1024
        if "size" in props:
            size = props["size"][0].const
        default = ("NoAction_fn", ())
        const_default = False
        if "default_action" in props:
            expr, const_default, _ = props["default_action"]
            call = expr if isinstance(expr, ir.Call) else ir.Call(expr, [])
            default = (self.names[call.func.sym], tuple(a.const & ((1 << width_of(a.type)) - 1) for a in call.args))
        else:
            nsym = self.ck.top.lookup("NoAction")
            default = (self.names[nsym], ())
        entries = []
        if d.entries is not None:
            n = len(d.entries)
            for i, e in enumerate(d.entries):
                items = e.keyset.items if isinstance(e.keyset, ir.TupleKs) else [e.keyset]
                if len(items) == 1 and len(d.keys) > 1 and isinstance(items[0], ir.DefaultKs):
                    items = items * len(d.keys)
                matches = []
                for item, k, (_, w, kind, _) in zip(items, d.keys, fields):
                    full_mask = (1 << w) - 1
                    if isinstance(item, ir.DefaultKs):
                        matches.append(None)
                        continue
                    if kind == "exact":
                        matches.append(f"Exact({item.const & full_mask})")
                    elif kind == "ternary":
                        if isinstance(item, ir.Mask):
                            m = item.mask.const & full_mask
                            matches.append(f"Ternary({item.value.const & m}, {m})")
                        else:
                            matches.append(f"Ternary({item.const & full_mask}, {full_mask})")
                    elif kind == "lpm":
                        if isinstance(item, ir.Mask):
                            m = item.mask.const & full_mask
                            plen = bin(m).count("1")
                            matches.append(f"Lpm({item.value.const & m}, {plen})")
                        else:
                            matches.append(f"Lpm({item.const & full_mask}, {w})")
                    elif kind == "range":
                        if isinstance(item, ir.RangeKs):
                            matches.append(f"Range({item.lo.const & full_mask}, {item.hi.const & full_mask})")
                        else:
                            matches.append(f"Range({item.const & full_mask}, {item.const & full_mask})")
                    elif kind == "optional":
                        matches.append(f"Optional_({item.const & full_mask})")
                    else:
                        raise unsupported(item, f"match kind {kind}")
                prio = e.priority.const if e.priority is not None else n - i
                call = e.call
                args = tuple(a.const & ((1 << width_of(a.type)) - 1) for a in call.args)
                entries.append(f"(({''.join(m + ', ' if m else 'None, ' for m in matches)}), "
                               f"{self.names[call.func.sym]}, {args!r}, {prio})")
        counters = props.get("counters")
        meters = props.get("meters")
        if counters:
            self.counted_tables.add(vn)
        o.line(f"{vn} = REG.table({full}, {fields!r}, [" + ", ".join(
            f"({fn}, {sc!r}, {an!r})" for fn, sc, an in refs) + "], "
               f"({default[0]}, {default[1]!r}), {bool(const_default)}, {size}, "
               f"[{', '.join(entries)}], {bool(d.entries_const)}, {d.entries is not None}, "
               f"{self.names[counters[0].sym] if counters else None}, "
               f"{self.names[meters[0].sym] if meters else None}, {copied_annotations(d.annotations)!r})")

    def gen_parser(self, d: ir.ParserDecl) -> None:
        o = self.out
        o.line(f"def make_{d.name}(prefix):")
        o.indent()
        cells, var_inits = self._factory_cells(d, instances_allowed=False)
        saved = self.cells
        self.cells = cells
        for st in d.states:
            o.line(f"def s_{st.name}():")
            o.indent()
            o.line(f"nonlocal {', '.join(cells)}")
            o.line(f"if C.trace is not None: C.trace.append('parser state {st.name}')")
            for s in st.stmts:
                self.stmt(s)
            tr = st.transition
            if tr.target:
                o.line(f"return {self.state_ref(tr.target)}")
            else:
                sel = [self.g(x) if not (isinstance(x.type, Bits) and x.type.signed)
                       else f"({self.g(x)} & {hex(x.type.mask)})" for x in tr.select]
                sv = [self.fresh("k") for _ in sel]
                for v, x in zip(sv, sel):
                    o.line(f"{v} = {x}")
                for ks, target, span in tr.cases:
                    cond = self.keyset_cond(ks, sv, tr.select)
                    o.line(f"if {cond}: return {self.state_ref(target)}")
                o.line("raise RT.ParserError(RT.ERR_NO_MATCH)")
            o.dedent()
        self._apply_prologue(d, cells, var_inits)
        o.line("st = s_start")
        o.line("while st is not None:")
        o.indent()
        o.line("st = st()")
        o.dedent()
        o.dedent()
        o.line("return apply")
        o.dedent()
        self.cells = saved

    @staticmethod
    def state_ref(name: str) -> str:
        if name == "accept":
            return "None"
        if name == "reject":
            return "RT.reject()"
        return f"s_{name}"

    def keyset_cond(self, ks, sv: list, sel: list) -> str:
        if isinstance(ks, ir.DefaultKs):
            return "True"
        items = ks.items if isinstance(ks, ir.TupleKs) else [ks]
        conds = []
        for item, v, x in zip(items, sv, sel):
            t = x.type
            m = t.mask if isinstance(t, Bits) else 1
            if isinstance(item, ir.DefaultKs):
                continue
            if isinstance(item, ir.Mask):
                mk = item.mask.const & m
                conds.append(f"({v} & {hex(mk)}) == {hex(item.value.const & mk)}")
            elif isinstance(item, ir.RangeKs):
                conds.append(f"{item.lo.const & m} <= {v} <= {item.hi.const & m}")
            else:
                c = item.const
                if isinstance(c, bool):
                    conds.append(f"{v} == {c}")
                else:
                    conds.append(f"{v} == {hex(c & m)}")
        return " and ".join(conds) if conds else "True"


def collect_syms(program: ir.Program) -> dict:
    """Map id(declaration) -> Sym by walking every Path the checker resolved."""
    out: dict = {}

    def visit(x):
        if isinstance(x, ir.Path) and getattr(x, "sym", None) is not None:
            if x.sym.decl is not None:
                out.setdefault(id(x.sym.decl), x.sym)
        if isinstance(x, ir.Node):
            for v in vars(x).values():
                visit(v)
        elif isinstance(x, (list, tuple)):
            for v in x:
                visit(v)
        elif isinstance(x, dict):
            for v in x.values():
                visit(v)
    visit(program)
    return out
