"""Code generation of header and struct types: one Python class each, with their
extract/emit code (precompiled ``struct`` formats)."""
from __future__ import annotations

import re

from ..frontend import ir
from ..frontend.scope import unsupported
from ..frontend.types import (Bits, Bool, EnumT, ErrorT, InfInt, StackT, StringT, StructT, Varbit,
                              width_of)
from .gen_base import pyfield


class TypesGen:
    """Type classes of :class:`.codegen.CodeGen`."""

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
        if isinstance(t, Varbit):
            return "(0, 0)"             # a varbit value: (length in bits, value)
        raise unsupported(ir.Node(), f"variables of type {t}")

    def gen_types(self) -> None:
        o = self.out
        for name, t in self.ck.types.items():
            if isinstance(t, StructT):
                # a generic type's instances are named gh_t<bit<16>>: H_gh_t_bit_16__
                self.struct_classes[name] = (("H_" if t.kind == "header" else "S_")
                                             + re.sub(r"\W", "_", name))
        for name, t in self.ck.types.items():
            if not isinstance(t, StructT) or name not in self.struct_classes:
                continue
            cls = self.struct_classes[name]
            fields = [pyfield(n) for n, _ in t.fields]
            is_hdr = t.kind == "header"
            slots = (["_v"] if is_hdr else []) + fields
            o.line(f"class {cls}:")
            o.indent()
            o.line(f"__slots__ = {tuple(slots)!r}")
            o.line(f"TYPE_NAME = {name!r}")
            o.line(f"FIELDS = {tuple(n for n, _ in t.fields)!r}")
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
            if is_hdr and t.varbit is not None:
                self.gen_varbit_header_io(t, fields)
            elif is_hdr:
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
                if t.kind == "header_union":      # isValid(): one of its headers is valid
                    o.line("@property")
                    o.line("def _v(self):")
                    o.indent()
                    o.line("return " + " or ".join(f"self.{pf}._v" for pf in fields))
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
        self.gen_values_and_set_valid(t, fields)

    def gen_values_and_set_valid(self, t: StructT, fields: list) -> None:
        """A header class's ``values()`` (its fields, in order) and ``set_valid()`` (an invalid
        header made valid gets every field's default; TNA: the fields are kept)."""
        o = self.out
        o.line("def values(self):")
        o.indent()
        o.line("return (" + "".join(f"self.{pf}, " for pf in fields) + ")")
        o.dedent()
        o.line("def set_valid(self):")
        o.indent()
        o.line("if not self._v:")
        o.indent()
        o.line("self._v = True")
        # TNA: validity is a bit of its own (Tofino's POV bit); setValid() sets it and leaves
        # the header's fields (PHV containers) as they are, written or not (docs/dataplane.md,
        # "TNA on the embedded target")
        if not (self.ck.main is not None and self.ck.main.type_ref.name == "Switch"):
            for (n, ft), pf in zip(t.fields, fields):
                if isinstance(ft, Varbit):
                    # BMv2 zeroes a varbit field's value and keeps its length (the length the
                    # header was last extracted with in this packet; 0 if it was not):
                    # programs/packet_length_varbit
                    o.line(f"self.{pf} = (self.{pf}[0], 0)")
                else:
                    o.line(f"self.{pf} = {self.default_value(ft)}")
        o.dedent()
        o.dedent()
