"""Code generation of extern calls: hashes, checksums, registers, counters, meters,
clone/resubmit/recirculate, digests, and their field lists."""
from __future__ import annotations

from typing import Optional

from ..frontend import ir
from ..frontend.scope import unsupported
from ..frontend.types import Bits, Bool, InfInt, StackT, StructT, Varbit, width_of
from .externs import CHECKSUM_BY_ALGO, HASH_BY_ALGO
from .gen_tna import TNA_EXTERNS
from .gen_base import CSUM16, DROP_PORT, HeaderBits, part_width, pure, pyfield


#: Why a varbit in a digest's data is refused (established on simple_switch_grpc 1.15.5, see
#: docs/p4-conformance.md): p4c compiles it, but BMv2's P4Runtime server refuses the pipeline.
VARBIT_DIGEST = ("varbit fields in a digest's data (p4c compiles them, but BMv2's P4Runtime "
                 "server refuses such a pipeline: PI's digests carry bit<W> members only)")


class ExternGen:
    """Extern calls of :class:`.codegen.CodeGen`."""


    def field_list(self, e: ir.Expr, varbit_refused: str) -> tuple:
        """(python tuple of values, tuple of widths) of a digest's data or ``log_msg``'s
        arguments; a varbit among them is refused with ``varbit_refused`` (why)."""
        items = e.items if isinstance(e, ir.ListExpr) else [e]
        vals, widths = [], []
        for x in items:
            t = x.type
            if isinstance(t, Varbit) or isinstance(t, StructT) and t.varbit is not None:
                raise unsupported(x, varbit_refused)
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
            if isinstance(t, StructT) and t.kind == "header" and t.fields and t.varbit is None:
                h = self.g(x)
                parts.append((h, HeaderBits(t), f"{h}._v"))
                continue
            valid = None
            if isinstance(x, ir.Member) and isinstance(x.expr.type, StructT) and x.expr.type.kind == "header":
                valid = f"{self.g(x.expr)}._v"
            self._flatten(self.g(x), x.type, valid, parts)
        return parts

    @staticmethod
    def _varbit_parts(parts: list, value) -> Optional[str]:
        """A field list with a varbit field (a ``(bits, value)`` pair: its width is known when
        the packet runs): the ``(valid, value, width)`` parts ``RT.pack_valid`` and
        ``RT.csum16_parts`` take, ``value(v, t)`` giving a fixed field's; None without one."""
        if not any(isinstance(t, Varbit) for _, t, _ in parts):
            return None
        return "((" + "".join(
            f"({valid or 'True'}, {v}[1], {v}[0]), " if isinstance(t, Varbit)
            else f"({valid or 'True'}, {value(v, t)}, {part_width(t)}), "
            for v, t, valid in parts) + "))"

    @staticmethod
    def _field_value(v: str, t) -> str:
        if isinstance(t, HeaderBits):
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
        dynamic = self._varbit_parts(parts, self._field_value)
        if dynamic is not None:
            return f"RT.pack_valid{dynamic}"
        total = sum(part_width(t) for _, t, _ in parts)
        terms, shift = [], total
        for v, t, _ in parts:
            shift -= part_width(t)
            v = self._field_value(v, t)
            terms.append(f"({v} << {shift})" if shift else v)
        fast = f"(({' | '.join(terms) if terms else '0'}), {total})"
        valids = sorted({valid for _, _, valid in parts if valid})
        if not valids:
            return fast
        slow = "RT.pack_valid((" + "".join(
            f"({valid or 'True'}, {self._field_value(v, t)}, {part_width(t)}), "
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
            pos += part_width(t)
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
            if isinstance(t, HeaderBits):
                return f"({v}.csum16_residue() if {v}._v else 0)"
            return self.csum16_residue([(v, t)])
        dynamic = self._varbit_parts(parts, residue)
        if dynamic is not None:
            return f"RT.csum16_parts{dynamic}"
        if not any(valid for _, _, valid in parts):
            pos, terms = -sum(part_width(t) for _, t, _ in parts), []
            for v, t, _ in reversed(parts):
                r = residue(v, t)
                terms.append(f"({r} << {pos % 16})" if pos % 16 else r)
                pos += part_width(t)
            return "(" + " + ".join(terms) + ")" if terms else "0"
        return "RT.csum16_parts((" + "".join(
            f"({valid or 'True'}, {residue(v, t)}, {part_width(t)}), "
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
                a = e.args[0]
                if len(e.args) == 2:        # a header with a varbit field, and its length
                    self.extract_varbit(a, e.args[1])
                    return
                if isinstance(a, ir.Member) and isinstance(a.expr.type, StackT) and a.member == "next":
                    o.line(f"C.extract({self.g(a.expr)}.next_for_extract())")
                elif (isinstance(a, ir.Member) and isinstance(a.expr, ir.Member)
                      and a.expr.member == "next" and isinstance(a.expr.expr.type, StackT)):
                    # a member of the next element of a stack of header unions: the element
                    # is taken (nextIndex moves on) once, then the member is extracted into it
                    u = self.fresh("u")
                    o.line(f"{u} = {self.g(a.expr.expr)}.next_for_extract()")
                    self.inline_extract(f"{u}.{pyfield(a.member)}", a.type)
                    for name, _ in a.expr.type.fields:
                        if name != a.member:
                            o.line(f"{u}.{pyfield(name)}._v = False")
                elif not isinstance(a.type, StructT) or a.type.kind != "header":
                    raise unsupported(a, f"extract into {a.type}")
                else:
                    self.inline_extract(self.g(a), a.type)
                    self.union_siblings_invalid(a)
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
        if ext in TNA_EXTERNS:
            self.tna_method_stmt(e, ext, method)
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
            # the table executed the meter (last: None when no table ran it)
            self.out.line(f"if {inst}.last is not None:")
            self.out.indent()
            self.assign(e.args[0], f"{inst}.last")
            self.out.dedent()
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
                self.assign(a[0], f"RT.hash_v1model({self.g(a[1])}, {self.g(a[2])}, *{data}, "
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
                if any(isinstance(ft, Varbit) for _, ft in t.fields):
                    raise unsupported(a[1], VARBIT_DIGEST)
                if isinstance(a[1], ir.StructExpr):
                    by = dict(zip(a[1].names, a[1].values))
                    vals = "(" + "".join(self.g(by[n]) + ", " for n, _ in t.fields) + ")"
                elif isinstance(a[1], ir.ListExpr):
                    vals = self.field_list(a[1], VARBIT_DIGEST)[0]
                else:
                    vals = f"{self.g(a[1])}.values()"
                masks = tuple((1 << width_of(ft)) - 1 for _, ft in t.fields)
            else:
                tname = "digest"
                vals, widths = self.field_list(a[1], VARBIT_DIGEST)
                masks = tuple((1 << w) - 1 for w in widths)
            # p4c copies the data into temporaries at the call (one BMv2 learn list per call):
            # the digest carries the values of the call, not those at the end of ingress; a
            # signed field is sent as its bits
            o.line(f"C.digest({tname!r}, {vals}, {masks!r})")
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
            o.line(f"C.truncate = RT.truncate(C.truncate, {self.g(a[0])})")
        elif name == "log_msg":
            vals = (self.field_list(a[1], "varbit fields in log_msg's arguments")[0]
                    if len(a) > 1 else "()")
            o.line(f"C.log({self.g(a[0]) if not isinstance(a[0], ir.StringLit) else repr(a[0].value)}, {vals})")
        elif name in ("assert", "assume"):
            o.line(f"if not {self.g(a[0])}: C.log('{name} failed', ())")
        else:
            raise unsupported(e, f"extern {name}")
