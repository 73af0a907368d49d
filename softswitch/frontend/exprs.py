"""Type checking and constant folding of expressions (the :class:`ExprChecker` half of
:class:`.typecheck.Checker`), and the source text of expressions that p4c uses as names."""
from __future__ import annotations

from typing import Optional

from . import ir
from .scope import Scope, error, unsupported
from .types import (Bits, Bool, DontCareT, EnumT, ErrorT, ExternT, InfInt, ListT, ObjT, P4Type,
                    StackT, StringT, StructT, TypeVar, Varbit, Void)

BITS_PER_BYTE = 8
# Symbols that are values (a member of one is a field, not an enum member).
VALUE_KINDS = ("var", "param", "const", "instance")
# Size methods of headers and structs (fixed-size types: minimum == actual size).
SIZE_METHODS = ("minSizeInBits", "minSizeInBytes", "sizeInBits", "sizeInBytes", "maxSizeInBits",
                "maxSizeInBytes")


class ExprChecker:
    """Expression checks of :class:`.typecheck.Checker` (which provides ``resolve_type``,
    ``types``, ``extern_tvars``, ``pick_overload``, ``unify_int``)."""

    # ------------------------------------------------------------------------------ expressions
    def check_expr(self, e: ir.Expr, scope: Scope, expected: Optional[P4Type] = None) -> P4Type:
        t = self._check_expr(e, scope, expected)
        e.type = t
        if expected is not None and isinstance(t, InfInt) and isinstance(expected, Bits):
            self.unify_int(e, expected)
        if not hasattr(e, "const"):
            e.const = None
        return e.type

    def _check_expr(self, e: ir.Expr, scope: Scope, expected) -> P4Type:
        if isinstance(e, ir.IntLit):
            if e.width is not None:
                t = Bits(e.width, e.signed)
                if e.width == 0:
                    raise error(e, "zero-width integer literal")
                if e.value > t.mask:
                    raise error(e, f"value {e.value} does not fit in {t}")
                e.const = wrap(e.value, t)
                return t
            e.const = e.value
            return InfInt()
        if isinstance(e, ir.BoolLit):
            e.const = e.value
            return Bool()
        if isinstance(e, ir.StringLit):
            e.const = e.value
            return StringT()
        if isinstance(e, ir.Path):
            sym = (self.top if e.top else scope).lookup(e.name)
            if sym is None:
                raise error(e, f"{e.name}: undeclared identifier")
            e.sym = sym
            if sym.kind == "const":
                e.const = sym.const
            if sym.kind in VALUE_KINDS:
                return sym.type
            return ObjT(sym.kind, sym.decl)
        if isinstance(e, ir.TypeMember):
            if e.type_name == "error":
                if e.member not in self.errors_list:
                    raise error(e, f"error.{e.member}: no such error")
                e.const = self.errors_list.index(e.member)
                return ErrorT()
            sym = scope.lookup(e.type_name)
            if sym is not None and sym.kind in VALUE_KINDS:
                # `hdr.h` where a parameter (or variable) `hdr` shadows `header hdr`: the lexer
                # saw a type name (as p4c's does), the innermost declaration is the value
                return self.check_member(ir.value_member(e), scope)
            t = self.types.get(e.type_name)
            if isinstance(t, EnumT):
                if e.member not in t.members:
                    raise error(e, f"{e.type_name}.{e.member}: no such enum member")
                e.const = t.values[e.member]
                return t
            if isinstance(t, StructT) and e.member in SIZE_METHODS:
                self.check_size_method(e, t)        # h_t.minSizeInBytes(): the type's size
                return ObjT("method", (t, e.member))
            raise error(e, f"{e.type_name}.{e.member}: not an enum member")
        if isinstance(e, ir.Member):
            return self.check_member(e, scope)
        if isinstance(e, ir.Index):
            bt = self.check_expr(e.expr, scope)
            it = self.check_expr(e.index, scope)
            if isinstance(bt, ListT):
                # a tuple: indexed by a compile-time constant only
                i = getattr(e.index, "const", None)
                if not isinstance(i, int) or isinstance(i, bool):
                    raise error(e.index, "a tuple index must be a compile-time constant")
                if not 0 <= i < len(bt.items):
                    raise error(e.index, f"index {i} out of bounds for {bt}")
                c = getattr(e.expr, "const", None)
                if isinstance(c, tuple):            # an element of a tuple constructor argument
                    e.const = c[i]
                return bt.items[i]
            if not isinstance(bt, StackT):
                raise error(e, f"cannot index a value of type {bt}")
            if not isinstance(it, (Bits, InfInt)):
                raise error(e.index, f"index of type {it} is not an integer")
            if e.index.const is not None and not (0 <= e.index.const < bt.size):
                raise error(e.index, f"index {e.index.const} out of bounds for {bt}")
            return bt.elem
        if isinstance(e, ir.Slice):
            bt = self.check_expr(e.expr, scope)
            if not isinstance(bt, Bits):
                raise error(e, f"cannot slice a value of type {bt}")
            hi, lo = self.const_int(e.hi, scope), self.const_int(e.lo, scope)
            if not (0 <= lo <= hi < bt.width):
                raise error(e, f"slice [{hi}:{lo}] out of range for {bt}")
            e.hi_v, e.lo_v = hi, lo
            if e.expr.const is not None:
                e.const = (e.expr.const >> lo) & ((1 << (hi - lo + 1)) - 1)
            return Bits(hi - lo + 1)
        if isinstance(e, ir.Call):
            return self.check_call(e, scope, expected)
        if isinstance(e, ir.CtorCall):
            t = self.resolve_type(e.type_ref)
            if isinstance(t, ObjT) and t.kind in ("control_type", "parser_type") \
                    and not isinstance(t.decl, ir.TypeDeclOnly):
                decl = t.decl
                if e.args or decl.ctor_params:
                    decl = self.specialize(e, decl, e.args, scope)
                e.decl = decl
                return ObjT(t.kind[:-5], decl)
            if isinstance(t, ExternT) and isinstance(expected, ExternT):
                # an extern constructed in a control's or parser's constructor arguments: the
                # specialised copy declares it (ctors.CtorChecker.specialize), which checks it
                return t
            raise unsupported(e, f"constructor call of {t} in an expression")
        if isinstance(e, ir.Unary):
            return self.check_unary(e, scope, expected)
        if isinstance(e, ir.Binary):
            return self.check_binary(e, scope, expected)
        if isinstance(e, ir.Cond):
            ct = self.check_expr(e.cond, scope, Bool())
            if not isinstance(ct, Bool):
                raise error(e.cond, f"condition has type {ct}, expected bool")
            a = self.check_expr(e.then, scope, expected)
            b = self.check_expr(e.other, scope, expected)
            t = self.join(e, a, b)
            self.unify_int(e.then, t)
            self.unify_int(e.other, t)
            if e.cond.const is not None and e.then.const is not None and e.other.const is not None:
                e.const = e.then.const if e.cond.const else e.other.const
            return t
        if isinstance(e, ir.Cast):
            return self.check_cast(e, scope)
        if isinstance(e, ir.ListExpr):
            exp_items = None
            if isinstance(expected, StructT) and len(expected.fields) == len(e.items):
                exp_items = [ft for _, ft in expected.fields]
            ts = [self.check_expr(x, scope, exp_items[i] if exp_items else None) for i, x in enumerate(e.items)]
            return ListT(ts)
        if isinstance(e, ir.StructExpr):
            if isinstance(expected, StructT):
                names = [n for n, _ in expected.fields]
                if sorted(names) != sorted(e.names):
                    raise error(e, f"struct initializer fields {e.names} do not match {expected}")
                for n, v in zip(e.names, e.values):
                    ft = expected.field_type(n)
                    vt = self.check_expr(v, scope, ft)
                    self.assignable(v, vt, ft)
                return expected
            fields = [(n, self.check_expr(v, scope)) for n, v in zip(e.names, e.values)]
            return StructT("struct", "", fields)
        if isinstance(e, ir.DontCare):
            return DontCareT()
        if isinstance(e, ir.InvalidHeader):
            if not (isinstance(expected, StructT) and expected.kind in ("header", "header_union")):
                raise error(e, "{#}: cannot infer the type of an invalid header here "
                               "(cast it: (H){#})")
            return expected
        raise unsupported(e, f"expression {type(e).__name__}")

    def check_compare_initializer(self, e: ir.Binary, scope: Scope) -> P4Type:
        """``s == {a, b}``, ``s != {f = a, g = b}``, ``h == {#}``: the initializer takes the
        struct or header type of the other operand (p4c compares them field by field; a list
        or struct initializer for a header makes a valid header)."""
        lit, other = (e.left, e.right) if _is_initializer(e.left) else (e.right, e.left)
        if isinstance(lit, ir.ListExpr) and isinstance(other, ir.ListExpr):
            # two lists (p4c: tuples), element by element
            a, b = self.check_expr(lit, scope), self.check_expr(other, scope)
            if len(a.items) != len(b.items):
                raise error(e, f"operator {e.op}: lists of {len(a.items)} and {len(b.items)} elements")
            for x, y in zip(lit.items, other.items):
                t = self.join(e, x.type, y.type)
                self.unify_int(x, t)
                self.unify_int(y, t)
            return Bool()
        if _is_initializer(other):
            raise error(e, f"operator {e.op}: cannot infer the type of either operand")
        ot = self.check_expr(other, scope)
        if not isinstance(ot, StructT):
            raise error(e, f"operator {e.op}: cannot compare {ot} with an initializer")
        lt = self.check_expr(lit, scope, ot)
        self.assignable(lit, lt, ot)
        e.cmp_type = ot                 # both sides are generated as values of this type
        return Bool()

    def join(self, node, a: P4Type, b: P4Type) -> P4Type:
        if isinstance(a, InfInt):
            return b
        if isinstance(b, InfInt):
            return a
        if a == b:
            return a
        if isinstance(a, EnumT) and isinstance(b, EnumT) and a.name == b.name:
            return a
        if isinstance(a, StructT) and isinstance(b, StructT) and a.name == b.name:
            return a
        if (isinstance(a, StackT) and isinstance(b, StackT) and a.size == b.size
                and a.elem.name == b.elem.name):
            return a                # two stacks of one type (== compares them element-wise)
        raise error(node, f"operands have different types: {a} and {b}")

    def check_member(self, e: ir.Member, scope: Scope) -> P4Type:
        bt = self.check_expr(e.expr, scope)
        if isinstance(bt, StructT):
            ft = bt.field_type(e.member)
            if ft is None:
                if (bt.kind == "header" and e.member in ("isValid", "setValid", "setInvalid")
                        or bt.kind == "header_union" and e.member == "isValid"):
                    return ObjT("method", (bt, e.member))
                if e.member in SIZE_METHODS:
                    self.check_size_method(e, bt)
                    return ObjT("method", (bt, e.member))
                raise error(e, f"{e.member}: no such field in {bt.kind} {bt.name or 'struct'}")
            c = getattr(e.expr, "const", None)
            if isinstance(c, dict):                 # a field of a struct constant
                e.const = c[e.member]
            return ft
        if isinstance(bt, StackT):
            if e.member in ("next", "last"):
                if not self.in_parser:
                    raise error(e, f"{e.member} of a header stack can only be used in a parser")
                return bt.elem
            if e.member == "nextIndex":
                # P4_16 names it, p4c 1.2.5 does not implement it (anywhere)
                raise error(e, f"Cannot extract field nextIndex from {expr_text(e.expr)} which "
                               f"has type header {bt.elem.name}[{bt.size}]")
            if e.member == "lastIndex" and not self.in_parser:
                raise error(e, "'lastIndex' for stacks can only be used in a parser")
            if e.member in ("size", "lastIndex"):
                if e.member == "size":
                    e.const = bt.size
                return Bits(32)
            if e.member in ("push_front", "pop_front"):
                return ObjT("method", (bt, e.member))
            raise error(e, f"{e.member}: no such member of header stack")
        if isinstance(bt, ExternT):
            ms = [m for m in bt.decl.methods if m.ret is not None and m.name == e.member]
            if not ms:
                raise error(e, f"{e.member}: no such method of extern {bt.name}")
            return ObjT("method", (bt, e.member))
        if isinstance(bt, ObjT):
            if bt.kind == "table" and e.member == "apply":
                return ObjT("method", (bt, "apply"))
            if bt.kind in ("control", "parser") and e.member == "apply":
                return ObjT("method", (bt, "apply"))
            if bt.kind == "apply_result":
                if e.member in ("hit", "miss"):
                    return Bool()
                if e.member == "action_run":
                    return ObjT("action_run", bt.decl)
            raise error(e, f"{e.member}: no such member of {bt.kind}")
        if isinstance(bt, EnumT):
            raise error(e, f"{e.member}: use {bt.name}.{e.member} for enum members")
        raise error(e, f"{e.member}: a value of type {bt} has no members")

    def check_unary(self, e: ir.Unary, scope: Scope, expected) -> P4Type:
        t = self.check_expr(e.expr, scope, expected if e.op != "!" else None)
        c = e.expr.const
        if e.op == "!":
            if not isinstance(t, Bool):
                raise error(e, f"operator ! expects bool, got {t}")
            e.const = (not c) if c is not None else None
            return t
        if not isinstance(t, (Bits, InfInt)):
            raise error(e, f"operator {e.op} expects an integer, got {t}")
        if e.op == "~" and isinstance(t, InfInt):
            raise error(e, "operator ~ on an integer of unknown width")
        if c is not None:
            v = {"-": -c, "+": c, "~": ~c}[e.op]
            e.const = wrap(v, t) if isinstance(t, Bits) else v
        return t

    ARITH = ("+", "-", "*", "/", "%", "|+|", "|-|")
    BITWISE = ("&", "|", "^")
    COMPARE = ("==", "!=", "<", ">", "<=", ">=")

    def check_binary(self, e: ir.Binary, scope: Scope, expected) -> P4Type:
        op = e.op
        if op in ("&&", "||"):
            for side in (e.left, e.right):
                st = self.check_expr(side, scope, Bool())
                if not isinstance(st, Bool):
                    raise error(side, f"operator {op} expects bool, got {st}")
            if e.left.const is not None and e.right.const is not None:
                e.const = (e.left.const and e.right.const) if op == "&&" else (e.left.const or e.right.const)
            return Bool()
        if op in ("<<", ">>"):
            lt = self.check_expr(e.left, scope, expected)
            rt = self.check_expr(e.right, scope)
            if not isinstance(lt, (Bits, InfInt)):
                raise error(e.left, f"operator {op} expects an integer, got {lt}")
            if isinstance(rt, Bits) and rt.signed:
                raise error(e.right, f"shift amount must be unsigned, got {rt}")
            if not isinstance(rt, (Bits, InfInt)):
                raise error(e.right, f"shift amount must be an integer, got {rt}")
            if isinstance(rt, InfInt) and e.right.const is not None and e.right.const < 0:
                raise error(e.right, "negative shift amount")
            if isinstance(lt, InfInt) and e.right.const is None:
                raise error(e, "shift of an integer of unknown width by a run-time amount")
            if e.left.const is not None and e.right.const is not None:
                v = e.left.const << e.right.const if op == "<<" else e.left.const >> e.right.const
                e.const = wrap(v, lt) if isinstance(lt, Bits) else v
            return lt
        if op == "++":
            lt = self.check_expr(e.left, scope)
            rt = self.check_expr(e.right, scope)
            for side, st in ((e.left, lt), (e.right, rt)):
                if not isinstance(st, Bits):
                    raise error(side, f"operator ++ expects bit<> or int<> operands, got {st}")
            t = Bits(lt.width + rt.width, lt.signed)
            if e.left.const is not None and e.right.const is not None:
                e.const = wrap(((e.left.const & lt.mask) << rt.width) | (e.right.const & rt.mask), t)
            return t
        if op in ("==", "!=") and (_is_initializer(e.left) or _is_initializer(e.right)):
            return self.check_compare_initializer(e, scope)
        hint = expected if op not in self.COMPARE else None
        lt = self.check_expr(e.left, scope, hint)
        rt = self.check_expr(e.right, scope, lt if isinstance(lt, Bits) else hint)
        lt, rt = _enum_as_base(e.left, lt, rt), _enum_as_base(e.right, rt, lt)
        if isinstance(lt, InfInt) and isinstance(rt, Bits):
            self.unify_int(e.left, rt)
            lt = rt
        if op in self.COMPARE and op in ("==", "!="):
            t = self.join(e, lt, rt)
            self.unify_int(e.left, t)
            self.unify_int(e.right, t)
            if e.left.const is not None and e.right.const is not None:
                e.const = (e.left.const == e.right.const) == (op == "==")
            return Bool()
        for side, st in ((e.left, lt), (e.right, rt)):
            if not isinstance(st, (Bits, InfInt)):
                raise error(side, f"operator {op} expects integer operands, got {st}")
        if isinstance(lt, Bits) and isinstance(rt, Bits) and lt != rt:
            raise error(e, f"operator {op}: operands have different types {lt} and {rt}; use a cast")
        t = lt if isinstance(lt, Bits) else rt
        self.unify_int(e.right, t)
        if op in ("/", "%"):
            if isinstance(t, Bits) and t.signed:
                raise error(e, f"operator {op} is not defined on signed values")
            if e.right.const == 0:
                raise error(e.right, "division by zero")
            rc = e.right.const
            folded = isinstance(e.left.const, int) and isinstance(rc, int)
            if isinstance(t, Bits) and not folded and (
                    not isinstance(rc, int) or rc <= 0 or rc & (rc - 1)):
                # p4c-bm2-ss: "could not evaluate expression at compilation time"; BMv2 has
                # no division: / and % by a power of two become shifts and masks
                raise error(e, f"operator {op}: could not evaluate expression at compilation "
                               f"time (a run-time {op} needs a constant power of two on the right)")
        if op in ("|+|", "|-|") and isinstance(t, InfInt):
            raise error(e, f"saturating operator {op} needs a fixed-width type")
        lc, rc = e.left.const, e.right.const
        if lc is not None and rc is not None:
            if op in self.COMPARE:
                e.const = {"<": lc < rc, ">": lc > rc, "<=": lc <= rc, ">=": lc >= rc}[op]
            else:
                e.const = fold(op, lc, rc, t)
        if op in self.COMPARE:
            return Bool()
        return t

    def check_cast(self, e: ir.Cast, scope: Scope) -> P4Type:
        to = self.resolve_type(e.to)
        # the operand is typed on its own (p4c): (bit<32>)(8 * x) multiplies in x's type and
        # (bit<16>)-(c ? 2 : 3w1) negates a bit<3>; only an initializer takes the target's type
        hint = to if _is_initializer(e.expr) else None
        src = self.check_expr(e.expr, scope, hint)
        if _is_initializer(e.expr) and isinstance(to, StructT):
            self.assignable(e.expr, src, to)       # (S){a, b}, (H){#}: an initializer of S
            e.const = struct_const(e.expr, to)
            return to
        ok = False
        if isinstance(to, Bits) and isinstance(src, (Bits, InfInt)):
            ok = True
        elif isinstance(to, Bits) and isinstance(src, Bool) and to.width == 1 and not to.signed:
            ok = True
        elif isinstance(to, Bool) and isinstance(src, Bits) and src.width == 1:
            ok = True
        elif isinstance(to, Bits) and isinstance(src, EnumT) and src.base is not None:
            ok = True
        elif isinstance(to, EnumT) and to.base is not None and isinstance(src, (Bits, InfInt)):
            ok = True
        elif src == to or (isinstance(src, StructT) and isinstance(to, StructT) and src.name == to.name):
            ok = True
        if not ok:
            raise error(e, f"cannot cast {src} to {to}")
        c = e.expr.const
        if c is not None and isinstance(to, Bits):
            e.const = wrap(int(c), to)
        elif c is not None and isinstance(to, Bool):
            e.const = bool(c)
        elif c is not None and isinstance(to, EnumT):
            e.const = c & to.base.mask
        return to

    # ------------------------------------------------------------------------------ calls
    def check_call_args(self, call: ir.Call, params: list, args: list, scope: Scope, what: str,
                        tvars: Optional[dict] = None, skip_ctl_params: bool = False) -> None:
        args = self.order_named_args_of_call(call, params, args, what)
        required = [p for p in params if p.default is None
                    and ir.find_annotation(p.annotations, "optional") is None]
        if not (len(required) <= len(args) <= len(params)):
            raise error(call, f"{what}: expected {len(params)} arguments, got {len(args)}")
        tvars = {} if tvars is None else tvars
        # (ctors.SeoModel: which arguments p4c's SideEffectOrdering copies)
        call.param_dirs = [p.direction for p in params[:len(args)]]
        for a, p in zip(args, params):
            pt = self.resolve_type(p.type_ref, tvars) if p.type_ref.kind != "named" or p.type_ref.name not in tvars or not isinstance(tvars.get(p.type_ref.name), TypeVar) else TypeVar(p.type_ref.name)
            at = self.check_expr(a, scope, pt if not isinstance(pt, TypeVar) else None)
            if isinstance(pt, TypeVar):
                if pt.name in tvars and not isinstance(tvars[pt.name], TypeVar):
                    self.assignable(a, at, tvars[pt.name])
                else:
                    tvars[pt.name] = at
            else:
                self.assignable(a, at, pt)
            if p.direction in ("out", "inout") and not isinstance(a, ir.DontCare):
                self.check_lvalue(a, scope)

    @staticmethod
    def order_named_args_of_call(call: ir.Call, params: list, args: list, what: str) -> list:
        """Named arguments (``f(b = x, a = y)``) put in parameter order, in place; returns the
        arguments."""
        names = getattr(call, "arg_names", None) or []
        if any(names):
            if not all(names):
                raise error(call, f"{what}: cannot mix named and positional arguments")
            by_name = {p.name: p for p in params}
            for n in names:
                if n not in by_name:
                    raise error(call, f"{what}: no parameter named {n}")
            order = {n: i for i, n in enumerate(names)}
            ordered = [args[order[p.name]] for p in params if p.name in order]
            if len(ordered) != len(params) and any(p.default is None and p.name not in order for p in params):
                raise error(call, f"{what}: missing arguments")
            call.args[:] = ordered
            call.arg_names = [""] * len(ordered)
            args = call.args
        return args

    def check_call(self, e: ir.Call, scope: Scope, expected) -> P4Type:
        f = e.func
        ft = self.check_expr(f, scope)
        e.call_kind = None
        if isinstance(ft, ObjT) and ft.kind == "method":
            base, name = ft.decl
            if isinstance(base, StructT):        # header methods
                if e.args:
                    raise error(e, f"{name} takes no arguments")
                if name in SIZE_METHODS:
                    bits = self.size_in_bits(base, name)
                    e.const = bits if name.endswith("Bits") else (bits + BITS_PER_BYTE - 1) // BITS_PER_BYTE
                    e.call_kind = ("const",)
                    return InfInt()
                if isinstance(getattr(f.expr, "const", None), dict):
                    # a header constructor parameter ((p_t){5, 6}): valid, and constant
                    if name != "isValid":
                        raise error(e, f"{expr_text(f.expr)}: cannot change a constant "
                                       f"header ({name})")
                    e.const = True
                    e.call_kind = ("const",)
                    return Bool()
                e.call_kind = ("header", name)
                return Bool() if name == "isValid" else Void()
            if isinstance(base, StackT):
                if len(e.args) != 1:
                    raise error(e, f"{name} takes one argument")
                self.const_int(e.args[0], scope)
                e.call_kind = ("stack", name)
                return Void()
            if isinstance(base, ExternT):
                ms = [m for m in base.decl.methods if m.ret is not None and m.name == name
                      and not m.abstract]
                m = self.pick_overload(e, ms, e.args, f"{base.name}.{name}")
                tv = self.extern_tvars(base, e)
                for tp, ta in zip(m.type_params, e.type_args):
                    tv[tp] = self.resolve_type(ta)
                for tp in m.type_params:
                    tv.setdefault(tp, TypeVar(tp))
                self.check_call_args(e, m.params, e.args, scope, f"{base.name}.{name}", tv)
                self.check_parser_extern_call(e, base)
                if base.name == "packet_in" and name == "extract":
                    at = e.args[0].type if e.args else None
                    if not (isinstance(at, StructT) and at.kind == "header"):
                        raise error(e.args[0], f"{expr_text(e.args[0])}: argument must be a header")
                    self.check_extract_varbit(e, at)
                if base.name == "packet_in" and name == "lookahead" and e.type_args:
                    lt = self.resolve_type(e.type_args[0])
                    if isinstance(lt, Varbit) or isinstance(lt, StructT) and lt.varbit is not None:
                        # p4c: "vh_t: type argument must be a fixed-width type"
                        raise error(e, f"{lt}: type argument must be a fixed-width type "
                                       "(lookahead of a varbit)")
                e.call_kind = ("extern_method", base.name, name)
                e.method = m
                rt = self.resolve_type(m.ret, tv) if m.ret.kind != "void" else Void()
                if isinstance(rt, TypeVar):
                    if name == "lookahead" and e.type_args:
                        return self.resolve_type(e.type_args[0])
                    raise error(e, f"cannot infer the type of {base.name}.{name}")
                return rt
            if isinstance(base, ObjT) and base.kind == "table":
                if e.args:
                    raise error(e, "apply takes no arguments")
                e.call_kind = ("table_apply",)
                return ObjT("apply_result", base.decl)
            if isinstance(base, ObjT) and base.kind in ("control", "parser"):
                decl = base.decl
                self.check_call_args(e, decl.params, e.args, scope, f"{decl.name}.apply")
                e.call_kind = ("control_apply",)
                return Void()
        if isinstance(ft, ObjT) and ft.kind == "action":
            d = ft.decl
            dir_params = [p for p in d.params if p.direction]
            if len(e.args) != len(d.params):
                if len(e.args) == len(dir_params):
                    raise error(e, f"action {d.name}: control-plane arguments are missing in a direct call")
            self.check_call_args(e, d.params, e.args, scope, f"action {d.name}")
            e.call_kind = ("action",)
            return Void()
        if isinstance(ft, ObjT) and ft.kind == "function":
            d = ft.decl
            if d.type_params:
                return self.call_generic_function(e, d, scope)
            self.check_call_args(e, d.params, e.args, scope, f"function {d.name}")
            e.call_kind = ("function",)
            return d.ret_resolved
        if isinstance(ft, ObjT) and ft.kind == "extern_func":
            sym = f.sym
            cands = sym.const if isinstance(sym.const, list) else [sym.decl]
            d = self.pick_overload(e, cands, e.args, sym.name)
            tv = {tp: TypeVar(tp) for tp in d.type_params}
            for tp, ta in zip(d.type_params, e.type_args):
                tv[tp] = self.resolve_type(ta)
            self.check_call_args(e, d.params, e.args, scope, sym.name, tv)
            e.tvars = tv
            e.call_kind = ("extern_func", sym.name)
            e.method = d
            if sym.name == "static_assert":
                self.static_assert(e)
            return self.resolve_type(d.ret, tv) if d.ret.kind != "void" else Void()
        raise error(e, f"{expr_text(f)} is not callable")


    def static_assert(self, e: ir.Call) -> None:
        """``static_assert(check[, message])`` (core.p4): ``check`` must be known when compiling;
        false fails the compile with the message, as p4c does; true makes the call a constant."""
        check = e.args[0].const
        if not isinstance(check, bool):
            raise error(e, "static_assert: the condition must be a compile-time constant")
        if not check:
            message = e.args[1].value if len(e.args) > 1 and isinstance(
                e.args[1], ir.StringLit) else None
            shown = "false" + (f', "{message}"' if message is not None else "")
            raise error(e, f"static_assert({shown}): {message or 'static assertion failed'}")
        e.const = True
        e.call_kind = ("const",)


def struct_const(e: ir.Expr, t: P4Type, header_ok: bool = False) -> Optional[dict]:
    """The compile-time value of ``e`` as a struct of type ``t`` (``{3, 0x0F}``,
    ``{add = 3, mask = 0x0F}``, ``(cfg_t){...}``, a constant): a dict field -> value, nested
    structs as dicts; None when a field is not constant or not of a scalar or struct type.
    With ``header_ok`` also a header (a constructor argument ``(p_t){5, 6}``: valid)."""
    if not (isinstance(t, StructT) and (t.kind == "struct" or header_ok and t.kind == "header")):
        return None
    c = getattr(e, "const", None)
    if isinstance(c, dict):
        return c
    if isinstance(e, ir.Cast):
        e = e.expr
    if isinstance(e, ir.ListExpr) and len(e.items) == len(t.fields):
        pairs = [(n, x) for (n, _), x in zip(t.fields, e.items)]
    elif isinstance(e, ir.StructExpr) and sorted(e.names) == sorted(n for n, _ in t.fields):
        by = dict(zip(e.names, e.values))
        pairs = [(n, by[n]) for n, _ in t.fields]
    else:
        return None
    out = {}
    for n, x in pairs:
        ft = t.field_type(n)
        if isinstance(ft, StructT):
            v = struct_const(x, ft)
        elif isinstance(ft, (Bits, Bool, EnumT, ErrorT)):
            v = getattr(x, "const", None)
            if isinstance(ft, Bits) and isinstance(v, int) and not isinstance(v, bool):
                v = wrap(v, ft)
        else:
            v = None
        if v is None:
            return None
        out[n] = v
    return out


def _is_initializer(e: ir.Expr) -> bool:
    """A list, struct or invalid-header initializer: its type comes from the context."""
    return isinstance(e, (ir.ListExpr, ir.StructExpr, ir.InvalidHeader))


def wrap(v: int, t: P4Type) -> int:
    """Reduce ``v`` to the range of ``t`` (two's complement for int<N>)."""
    if isinstance(v, bool):
        return v
    if not isinstance(t, Bits):
        return v
    v &= t.mask
    if t.signed and v >> (t.width - 1):
        v -= 1 << t.width
    return v


def fold(op: str, a: int, b: int, t: P4Type) -> int:
    if op == "+":
        v = a + b
    elif op == "-":
        v = a - b
    elif op == "*":
        v = a * b
    elif op == "/":
        v = a // b if (a >= 0 and b > 0) or not isinstance(t, InfInt) else int(a / b)
    elif op == "%":
        v = a % b
    elif op == "&":
        v = a & b
    elif op == "|":
        v = a | b
    elif op == "^":
        v = a ^ b
    elif op in ("|+|", "|-|"):
        v = a + b if op == "|+|" else a - b
        if isinstance(t, Bits):
            lo, hi = (-(1 << (t.width - 1)), (1 << (t.width - 1)) - 1) if t.signed else (0, t.mask)
            return max(lo, min(hi, v))
    else:
        raise ValueError(op)
    return wrap(v, t) if isinstance(t, Bits) else v


def _enum_as_base(node: ir.Expr, t: P4Type, other: P4Type) -> P4Type:
    """An operand of a serializable enum type beside one of another type is a value of the
    enum's underlying type (P4_16 8.11.2: the one implicit cast besides integer literals)."""
    if isinstance(t, EnumT) and t.base is not None and not isinstance(other, EnumT):
        node.type = t.base
        return t.base
    return t


def expr_text(e: ir.Expr) -> str:
    """Source-like text of an expression (p4c's names for table keys)."""
    if isinstance(e, ir.Path):
        return ("." if e.top else "") + e.name
    if isinstance(e, ir.Member):
        return f"{expr_text(e.expr)}.{e.member}"
    if isinstance(e, ir.Index):
        return f"{expr_text(e.expr)}[{expr_text(e.index)}]"
    if isinstance(e, ir.Slice):
        return f"{expr_text(e.expr)}[{expr_text(e.hi)}:{expr_text(e.lo)}]"
    if isinstance(e, ir.IntLit):
        return e.text or str(e.value)
    if isinstance(e, ir.Call):
        return f"{expr_text(e.func)}()"
    if isinstance(e, ir.TypeMember):
        return f"{e.type_name}.{e.member}"
    return type(e).__name__
