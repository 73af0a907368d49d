"""P4_16 types as the type checker computes them (not as written: see ``ir.TypeRef``)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional


class P4Type:
    def __str__(self) -> str:
        return self.__class__.__name__


@dataclass(frozen=True)
class Bits(P4Type):
    width: int
    signed: bool = False

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1

    def __str__(self) -> str:
        return f"{'int' if self.signed else 'bit'}<{self.width}>"


@dataclass(frozen=True)
class Varbit(P4Type):
    width: int

    def __str__(self) -> str:
        return f"varbit<{self.width}>"


class _Singleton(P4Type):
    NAME = ""

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))

    def __str__(self):
        return self.NAME


class InfInt(_Singleton):
    NAME = "int"


class Bool(_Singleton):
    NAME = "bool"


class ErrorT(_Singleton):
    NAME = "error"


class StringT(_Singleton):
    NAME = "string"


class Void(_Singleton):
    NAME = "void"


class MatchKindT(_Singleton):
    NAME = "match_kind"


class DontCareT(_Singleton):
    NAME = "_"


@dataclass(eq=False)
class StructT(P4Type):
    """struct, header or header_union."""
    kind: str
    name: str
    fields: list = field(default_factory=list)      # [(name, P4Type)]
    annotations: list = field(default_factory=list)
    field_annotations: dict = field(default_factory=dict)

    def field_type(self, name: str) -> Optional[P4Type]:
        for n, t in self.fields:
            if n == name:
                return t
        return None

    @property
    def width(self) -> int:
        """Bits of the fixed-size fields (a header's varbit field counts for none)."""
        return sum(width_of(t) for _, t in self.fields if not isinstance(t, Varbit))

    @property
    def varbit(self) -> Optional[tuple]:
        """(name, Varbit) of a header's varbit field, or None."""
        for n, t in self.fields:
            if isinstance(t, Varbit):
                return n, t
        return None

    def __str__(self):
        return self.name


@dataclass(eq=False)
class StackT(P4Type):
    elem: StructT
    size: int

    def __str__(self):
        return f"{self.elem}[{self.size}]"


@dataclass(eq=False)
class EnumT(P4Type):
    name: str
    members: list
    base: Optional[Bits] = None
    values: dict = field(default_factory=dict)      # member -> int

    def __str__(self):
        return self.name


@dataclass(eq=False)
class ExternT(P4Type):
    name: str
    decl: Any
    type_args: list = field(default_factory=list)

    def __str__(self):
        if self.type_args:
            return f"{self.name}<{', '.join(str(t) for t in self.type_args)}>"
        return self.name


@dataclass(eq=False)
class TypeVar(P4Type):
    name: str

    def __str__(self):
        return self.name


@dataclass(eq=False)
class ListT(P4Type):
    items: list

    def __str__(self):
        return "list<" + ", ".join(map(str, self.items)) + ">"


@dataclass(eq=False)
class ObjT(P4Type):
    """A non-data object: parser, control, package, table, action, apply result, method."""
    kind: str
    decl: Any = None

    def __str__(self):
        return self.kind


def is_numeric(t: P4Type) -> bool:
    return isinstance(t, (Bits, InfInt))


def width_of(t: P4Type) -> int:
    if isinstance(t, Bits):
        return t.width
    if isinstance(t, Bool):
        return 1
    if isinstance(t, EnumT) and t.base is not None:
        return t.base.width
    if isinstance(t, StructT):
        return t.width
    if isinstance(t, StackT):
        return t.size * width_of(t.elem)
    if isinstance(t, ErrorT):
        return 32
    raise TypeError(f"type {t} has no fixed width")
