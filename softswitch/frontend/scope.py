"""Names in the checked program: symbols, scopes, and located errors."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ..api import P4CompileError, P4UnsupportedError
from . import ir


def error(node: ir.Node, message: str) -> P4CompileError:
    s = node.span
    return P4CompileError(message, s.file, s.line, s.col)


def unsupported(node: ir.Node, what: str) -> P4UnsupportedError:
    s = node.span
    return P4UnsupportedError(what, s.file, s.line, s.col)


@dataclass(eq=False)
class Sym:
    """A named value: kind is var, param, const, action, table, instance, extern_func, function,
    ctor (a parser/control/extern/package type used as a constructor), state."""
    kind: str
    name: str
    type: Any
    decl: Any = None
    const: Any = None
    direction: str = ""
    owner: Any = None           # the control/parser declaring it (None: top level)
    uid: int = 0


class Scope:
    def __init__(self, parent: Optional["Scope"] = None, owner: Any = None):
        self.parent = parent
        self.values: dict = {}
        self.owner = owner if owner is not None else (parent.owner if parent else None)

    def lookup(self, name: str) -> Optional[Sym]:
        s: Optional[Scope] = self
        while s is not None:
            if name in s.values:
                return s.values[name]
            s = s.parent
        return None

    def declare(self, sym: Sym, node: ir.Node, allow_overload: bool = False) -> None:
        old = self.values.get(sym.name)
        if old is not None and not allow_overload:
            raise error(node, f"{sym.name}: duplicate declaration")
        if old is not None and allow_overload:
            overloads = old.const if isinstance(old.const, list) else [old.decl]
            old.const = overloads + [sym.decl]
            return
        self.values[sym.name] = sym
