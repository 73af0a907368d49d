"""Shared pieces of the code generator: output, Python names, and IR queries."""
from __future__ import annotations

import keyword
from typing import Optional

from ..frontend import ir
from ..frontend.scope import Sym
from ..frontend.types import StackT, StructT, width_of
from .externs import HASH_ALGOS


CSUM16 = HASH_ALGOS.index("csum16")     # v1model HashAlgorithm.csum16

DROP_PORT = 511
INDENT = "    "
# Names a generated struct class defines itself (a field may not shadow them: renamed).
CLASS_MEMBERS = {"TYPE_NAME", "FIELDS", "NBYTES", "WIDTH", "MAXBITS", "copy", "of", "emit",
                 "extract", "extract_from", "bits", "packed_int", "csum16_residue", "values",
                 "set_valid", "_ST", "_unpack", "_pack", "_v"}


class HeaderBits:
    """The type of a whole header in a field list: its fields' bits as one unsigned value."""

    def __init__(self, header: StructT):
        self.width = width_of(header)


def part_width(t) -> int:
    return t.width if isinstance(t, HeaderBits) else width_of(t)


def pyfield(name: str) -> str:
    """The Python attribute of a field: not a keyword, nor a member of the generated class (a
    field named ``copy`` or ``emit``)."""
    clash = keyword.iskeyword(name) or name.startswith("_") or name in CLASS_MEMBERS
    return name + "_" if clash else name


class Names(dict):
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


def decl_of(path) -> object:
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


def may_exit(s) -> bool:
    """Whether running statement ``s`` may execute ``exit`` (itself, or an action, control or
    table it runs)."""
    if isinstance(s, ir.Exit):
        return True
    if isinstance(s, ir.Block):
        return any(may_exit(x) for x in s.stmts)
    if isinstance(s, ir.If):
        return _expr_may_exit(s.cond) or may_exit(s.then) or (s.other is not None
                                                               and may_exit(s.other))
    if isinstance(s, ir.Switch):
        return _expr_may_exit(s.expr) or any(c.body is not None and may_exit(c.body)
                                             for c in s.cases)
    if isinstance(s, ir.CallStmt):
        return _expr_may_exit(s.call)
    return False


def _expr_may_exit(e) -> bool:
    """Whether evaluating ``e`` may execute ``exit``: it calls an action or applies a control
    or a table whose actions may."""
    if isinstance(e, ir.Call):
        kind = getattr(e, "call_kind", None)
        if kind == ("action",):
            d = decl_of(e.func)
            if isinstance(d, ir.ActionDecl) and may_exit(d.body):
                return True
        elif kind == ("control_apply",):
            d = getattr(getattr(e.func.expr.sym, "type", None), "decl", None)
            if isinstance(d, ir.ControlDecl) and may_exit(d.body):
                return True
        elif kind == ("table_apply",):
            table = e.func.expr.sym.decl
            if any(may_exit(a.decl.body) for a in table.action_decls
                   if isinstance(a.decl, ir.ActionDecl)):
                return True
    operands = operands_of(e) if isinstance(e, ir.Expr) else None
    children = list(operands or ()) + (list(e.args) if isinstance(e, ir.Call) else [])
    if isinstance(e, ir.Member):
        children.append(e.expr)
    return any(_expr_may_exit(x) for x in children)


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


def operands_of(e: ir.Expr) -> Optional[tuple]:
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
