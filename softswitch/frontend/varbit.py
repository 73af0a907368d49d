"""``varbit<N>`` header fields, checked as p4c checks them: at most one per header, extracted
with ``extract(hdr, bits)`` only (and a header without one with ``extract(hdr)`` only), no
arithmetic (``varbit`` values are assigned and compared, nothing else), ``minSizeInBits`` and
``maxSizeInBits`` (and ``...Bytes``) of such a header but not ``sizeInBits``."""
from __future__ import annotations

from . import ir
from .exprs import expr_text
from .scope import error
from .types import StructT, Varbit


class VarbitChecker:
    """varbit checks of :class:`.typecheck.Checker`."""

    def check_varbit_field(self, d: ir.StructLike, f: ir.FieldDecl, ft: Varbit,
                           t: StructT) -> None:
        if d.kind != "header":
            raise error(f, f"field {f.name} of {d.kind} {d.name}: varbit fields are allowed in "
                           "headers only")
        if t.varbit is not None:
            raise error(f, f"header {d.name}: a header may have one varbit field only")
        if ft.width <= 0:
            raise error(f, f"invalid width {ft.width} for varbit<>")

    def check_extract_varbit(self, e: ir.Call, t: StructT) -> None:
        a = e.args[0]
        if len(e.args) == 1 and t.varbit is not None:
            raise error(a, f"{expr_text(a)}: argument cannot contain varbit fields "
                           "(extract it with extract(hdr, bits))")
        if len(e.args) == 2 and t.varbit is None:
            raise error(a, f"{expr_text(a)}: argument should contain a varbit field")

    def check_size_method(self, e: ir.Member, t: StructT) -> None:
        if t.varbit is not None and e.member in ("sizeInBits", "sizeInBytes"):
            raise error(e, f"Field {e.member} is not a member of header {t.name} (its size "
                           "varies: use minSizeInBits or maxSizeInBits)")

    @staticmethod
    def size_in_bits(t: StructT, method: str) -> int:
        """The bits a header or struct size method counts (varbit fields: none for the
        minimum, their maximum for the maximum)."""
        bits = t.width
        if method.startswith("max"):
            bits += sum(_max_varbits(ft) for _, ft in t.fields)
        return bits


def _max_varbits(t) -> int:
    if isinstance(t, Varbit):
        return t.width
    if isinstance(t, StructT):
        return sum(_max_varbits(ft) for _, ft in t.fields)
    return 0
