"""Code generation of headers with a ``varbit<N>`` field: extract with a length
(``extract(hdr, bits)``), emit, copy and compare. A varbit value is the pair
``(length in bits, value)``; the header's bits are read and written as one integer.

The checks of ``extract(hdr, bits)`` are BMv2's, in its order (measured with
``tests/conformance/programs/varbit_extract``): a packet too short for the header's fixed
fields and ``bits`` is ``error.PacketTooShort``; then ``bits`` not a multiple of 8 is
``error.ParserInvalidArgument``; then ``bits`` beyond the field's maximum is
``error.HeaderTooShort``. The header stays invalid.
"""
from __future__ import annotations

from ..frontend import ir
from ..frontend.types import Bits, Bool, StackT, StructT, Varbit, width_of


class VarbitGen:
    """Varbit headers of :class:`.codegen.CodeGen` (``gen_types`` calls
    :meth:`gen_varbit_header_io` for a header with a varbit field)."""

    def gen_varbit_header_io(self, t: StructT, fields: list) -> None:
        o = self.out
        fixed = t.width
        max_bits = t.varbit[1].width
        o.line(f"NBYTES = {(fixed + 7) // 8}")
        o.line(f"WIDTH = {fixed}")
        o.line(f"MAXBITS = {max_bits}")
        o.line("def extract_from(self, C, vbits):")
        o.indent()
        o.line(f"n = ({fixed} + vbits + 7) >> 3")
        o.line("if C.off + n > C.n: raise RT.ParserError(RT.ERR_PACKET_TOO_SHORT)")
        o.line("if vbits & 7: raise RT.ParserError(RT.ERR_PARSER_INVALID_ARGUMENT)")
        o.line(f"if vbits > {max_bits}: raise RT.ParserError(RT.ERR_HEADER_TOO_SHORT)")
        o.line("x = int.from_bytes(C.buf[C.off:C.off + n], 'big')")
        for (name, ft), pf in reversed(list(zip(t.fields, fields))):
            if isinstance(ft, Varbit):
                o.line(f"self.{pf} = (vbits, x & ((1 << vbits) - 1))")
                o.line("x >>= vbits")
                continue
            w = width_of(ft)
            if isinstance(ft, Bool):
                o.line(f"self.{pf} = bool(x & 1)")
            elif isinstance(ft, Bits) and ft.signed:
                o.line(f"v = x & {hex((1 << w) - 1)}")
                o.line(f"self.{pf} = v - {1 << w} if v >> {w - 1} else v")
            else:
                o.line(f"self.{pf} = x & {hex((1 << w) - 1)}")
            o.line(f"x >>= {w}")
        o.line("self._v = True")
        o.line("C.off += n")
        o.line(f"if C.trace is not None: C.trace.append(f'  extract {t.name} ({{n}} bytes)')")
        o.dedent()
        o.line("def bits(self):")
        o.indent()
        o.line("x = 0")
        for (name, ft), pf in zip(t.fields, fields):
            if isinstance(ft, Varbit):
                o.line(f"x = (x << self.{pf}[0]) | self.{pf}[1]")
                continue
            w = width_of(ft)
            v = f"int(self.{pf})" if isinstance(ft, Bool) else f"self.{pf}"
            o.line(f"x = (x << {w}) | ({v} & {hex((1 << w) - 1)})")
        vf = fields[[n for n, _ in t.fields].index(t.varbit[0])]
        o.line(f"return x, ({fixed} + self.{vf}[0]) >> 3")
        o.dedent()
        o.line("def emit(self, out):")
        o.indent()
        o.line("if not self._v: return")
        o.line("x, n = self.bits()")
        o.line("out.append(x.to_bytes(n, 'big'))")
        o.dedent()
        self.gen_values_and_set_valid(t, fields)

    def extract_varbit(self, a, bits) -> None:
        """``pkt.extract(a, bits)``: a header (or the next element of a stack) with a varbit
        field of ``bits`` bits."""
        n = self.fresh("vb")
        self.out.line(f"{n} = {self.g(bits)}")
        if isinstance(a, ir.Member) and isinstance(a.expr.type, StackT) and a.member == "next":
            self.out.line(f"{self.g(a.expr)}.next_for_extract().extract_from(C, {n})")
        else:
            self.out.line(f"{self.g(a)}.extract_from(C, {n})")
            self.union_siblings_invalid(a)
