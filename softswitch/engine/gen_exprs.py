"""Code generation of expressions and l-values."""
from __future__ import annotations

from ..frontend import ir
from ..frontend.exprs import expr_text
from ..frontend.scope import unsupported
from ..frontend.types import Bits, Bool, EnumT, ListT, ObjT, StackT, StringT, StructT, width_of
from .gen_base import pyfield
from .gen_tna import TNA_EXTERNS


class _CallBeforeStatement(Exception):
    """A call that must go before the statement (a function with out/inout parameters) met in
    an operand that runs only sometimes (:meth:`ExprGen._lazily`)."""


class ExprGen:
    """Expressions of :class:`.codegen.CodeGen`."""

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
        if sym.kind == "const" and isinstance(sym.const, dict):
            return self.struct_literal(sym.const, sym.type)
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
        if isinstance(e.expr.type, ListT):          # a tuple (a Python tuple)
            return f"{self.g(e.expr)}[{e.index.const}]"
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
        cond = self.g(e.cond)
        try:
            then, other = self._lazily(e.then), self._lazily(e.other)
        except _CallBeforeStatement:
            if self._lazy:                    # itself in an operand that runs only sometimes
                raise
            # a branch calls a function with out/inout parameters, which goes before the
            # statement: the choice becomes statements too, so only the branch taken runs
            o, v = self.out, self.fresh("c")
            o.line(f"if {cond}:")
            o.indent()
            o.line(f"{v} = {self.g(e.then)}")
            o.dedent()
            o.line("else:")
            o.indent()
            o.line(f"{v} = {self.g(e.other)}")
            o.dedent()
            return v
        return f"({then} if {cond} else {other})"

    def _lazily(self, e: ir.Expr) -> str:
        """``e``, which runs only sometimes (a branch of ?:, the right of && and ||). Raises
        :class:`_CallBeforeStatement` (nothing emitted) where ``e`` calls a function with
        out/inout parameters: the caller then guards it with statements of its own."""
        self._lazy += 1
        mark = len(self.out.lines)
        try:
            return self.g(e)
        except _CallBeforeStatement:
            del self.out.lines[mark:]
            raise
        finally:
            self._lazy -= 1

    def _short_circuit(self, op: str, a: str, right: ir.Expr) -> str:
        """``a && right`` or ``a || right``, ``right`` calling a function with out/inout
        parameters (its call goes before the statement): it runs, side effects included, only
        where ``a`` does not decide the result (P4_16 8.6: short-circuit evaluation)."""
        if self._lazy:                        # itself in an operand that runs only sometimes
            raise _CallBeforeStatement()
        o, v = self.out, self.fresh("sc")
        o.line(f"{v} = {a}")
        o.line(f"if {v}:" if op == "&&" else f"if not {v}:")
        o.indent()
        o.line(f"{v} = {self.g(right)}")
        o.dedent()
        return v

    @staticmethod
    def wrap(x: str, t) -> str:
        if isinstance(t, Bits):
            if t.signed:
                h = 1 << (t.width - 1)
                # parenthesised whole: it may be an operand ("a - wrap(b)")
                return f"(((({x}) + {h}) & {hex(t.mask)}) - {h})"
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
        ct = getattr(e, "cmp_type", None)
        if ct is not None:          # a struct or header compared with an initializer
            a, b = self.value_for(e.left, ct), self.value_for(e.right, ct)
            return f"({'' if op == '==' else 'not '}RT.equal({a}, {b}))"
        a = self.g(e.left)
        if op in ("&&", "||"):
            try:
                b = self._lazily(e.right)
            except _CallBeforeStatement:
                return self._short_circuit(op, a, e.right)
        else:
            b = self.g(e.right)
        t = e.type
        lt = e.left.type
        if op == "&&":
            return f"({a} and {b})"
        if op == "||":
            return f"({a} or {b})"
        if op in ("==", "!=") and isinstance(lt, (StructT, StackT)):
            return f"({'' if op == '==' else 'not '}RT.equal({a}, {b}))"
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
        if isinstance(e.type, StructT):     # (S){a, b}, (H){#}
            return self.value_for(e.expr, e.type)
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

    def g_InvalidHeader(self, e: ir.InvalidHeader) -> str:
        return f"{self.class_of(e.type)}()"       # a new header (or union): invalid

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
            if isinstance(t, StructT) and t.kind == "header" and t.varbit is None:
                return f"C.peek({self.class_of(t)})"
            if not isinstance(t, Bits):
                raise unsupported(e, f"lookahead<{t}> (only bit<N> and headers are supported)")
            return f"C.lookahead({width_of(t)})"
        if kind[0] == "extern_method" and kind[1] == "packet_in" and kind[2] == "length":
            return "len(C.buf)"
        if kind[0] == "function":
            d = e.func.sym.decl
            if any(p.direction in ("out", "inout") and not isinstance(p.resolved, (StructT, StackT))
                   for p in d.params):
                return self.call_value_with_outs(e, d)
            # an initializer for a struct or header parameter ({ { 1, 2 } }) is a value of it
            args = [self.value_for(a, p.resolved) for a, p in zip(e.args, d.params)]
            return f"{self.names[e.func.sym]}({', '.join(args)})"
        if kind[0] == "extern_method" and kind[1] in TNA_EXTERNS:
            return self.tna_method_value(e, kind[1], kind[2])
        if kind[0] == "extern_method" and kind[1] == "register" and kind[2] == "read":
            return f"{self.names[e.func.expr.sym]}.read({self.g(e.args[0])})"
        raise unsupported(e, f"call of {expr_text(e.func)} in an expression")

    def call_value_with_outs(self, e: ir.Call, d) -> str:
        """A function with out/inout parameters called in an expression: the call goes before
        the statement (its out arguments copied back there), the expression reads its value."""
        if self._lazy:
            raise _CallBeforeStatement()      # the lazy operand's caller guards it (_lazily)
        args, outs, fresh = self.out_args(e, d.params)
        r = self.fresh("r")
        self.out.line(f"{r} = {self.names[e.func.sym]}({', '.join(args)})")
        for j, (_, a) in enumerate(outs):
            self.assign(a, f"{r}[{1 + j}]")
        self.copy_back_fresh(fresh)
        return f"{r}[0]"

    def table_apply(self, e: ir.Call) -> str:
        table = e.func.expr.sym.decl
        tname = self.names[e.func.expr.sym]
        indirect = "implementation" in table.props
        keys = "(" + "".join(self.key_expr(k) + ", " for k in table.keys
                             if indirect or k.match_kind != "selector") + ")"
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

    def struct_literal(self, value: dict, t) -> str:
        """A new struct of type ``t`` holding a struct constant (``frontend.exprs.struct_const``)."""
        vals = [self.struct_literal(value[n], ft) if isinstance(ft, StructT) else repr(value[n])
                for n, ft in t.fields]
        return f"{self.class_of(t)}.of({', '.join(vals)})"

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
