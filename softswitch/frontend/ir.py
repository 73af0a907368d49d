"""Typed intermediate representation of a P4_16 program.

Every node carries a :class:`Span` pointing into the original (pre-cpp) source. Expression nodes
get their type (``.type``, a :mod:`softswitch.frontend.types` object) from the type checker;
the code generator only reads checked IR.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Optional


@dataclass(frozen=True)
class Span:
    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


NOSPAN = Span("<builtin>", 0, 0)


@dataclass
class Node:
    span: Span = field(default=NOSPAN, repr=False, compare=False, kw_only=True)


@dataclass
class Annotation(Node):
    name: str
    args: list = field(default_factory=list)     # expressions (usually literals)


def find_annotation(annotations: list, name: str) -> Optional[Annotation]:
    for a in annotations:
        if a.name == name:
            return a
    return None


# ------------------------------------------------------------------------------------ types
@dataclass
class TypeRef(Node):
    """A type as written. ``kind``: bit, int, varbit, bool, error, string, infint, named,
    stack, tuple, void, dontcare, match_kind."""
    kind: str
    width: Any = None               # expression for bit/int/varbit
    name: str = ""                  # named
    args: list = field(default_factory=list)     # type arguments (TypeRef)
    elem: Optional["TypeRef"] = None            # stack element
    size: Any = None                             # stack size expression


# ------------------------------------------------------------------------------------ expressions
@dataclass
class Expr(Node):
    type: Any = field(default=None, init=False, repr=False, compare=False)


@dataclass
class IntLit(Expr):
    value: int
    width: Optional[int] = None      # 8w5 -> 8
    signed: bool = False
    text: str = ""


@dataclass
class BoolLit(Expr):
    value: bool


@dataclass
class StringLit(Expr):
    value: str


@dataclass
class Path(Expr):
    name: str
    top: bool = False                # .name (top-level scope)
    decl: Any = field(default=None, init=False, repr=False, compare=False)


@dataclass
class TypeMember(Expr):
    """``TypeName.member`` (enum members, error.X)."""
    type_name: str
    member: str


@dataclass
class Member(Expr):
    expr: Expr
    member: str


def value_member(e: TypeMember) -> Member:
    """Turn ``e`` (``Name.member`` parsed with ``Name`` as a type) into the Member of the value
    ``Name``, in place, so that its parent now holds the Member; returns it."""
    name, member = e.type_name, e.member
    del e.type_name
    e.__class__ = Member
    e.expr, e.member = Path(name, span=e.span), member
    return e


@dataclass
class Index(Expr):
    expr: Expr
    index: Expr


@dataclass
class Slice(Expr):
    expr: Expr
    hi: Expr
    lo: Expr


@dataclass
class Call(Expr):
    func: Expr
    args: list
    type_args: list = field(default_factory=list)
    arg_names: list = field(default_factory=list)     # for named arguments ('' when positional)


@dataclass
class CtorCall(Expr):
    type_ref: TypeRef
    args: list


@dataclass
class Unary(Expr):
    op: str                          # '!', '~', '-', '+'
    expr: Expr


@dataclass
class Binary(Expr):
    op: str
    left: Expr
    right: Expr


@dataclass
class Cond(Expr):
    cond: Expr
    then: Expr
    other: Expr


@dataclass
class Cast(Expr):
    to: TypeRef
    expr: Expr


@dataclass
class ListExpr(Expr):
    items: list


@dataclass
class StructExpr(Expr):
    names: list
    values: list


@dataclass
class DontCare(Expr):
    pass


@dataclass
class InvalidHeader(Expr):
    """``{#}``: an invalid header (or header union) of the type the context gives."""


@dataclass
class Mask(Expr):
    value: Expr
    mask: Expr


@dataclass
class RangeKs(Expr):
    lo: Expr
    hi: Expr


@dataclass
class DefaultKs(Expr):
    pass


@dataclass
class TupleKs(Expr):
    items: list


# ------------------------------------------------------------------------------------ statements
@dataclass
class Stmt(Node):
    pass


@dataclass
class Block(Stmt):
    stmts: list


@dataclass
class Assign(Stmt):
    target: Expr
    value: Expr


@dataclass
class CallStmt(Stmt):
    call: Expr


@dataclass
class If(Stmt):
    cond: Expr
    then: Stmt
    other: Optional[Stmt]


@dataclass
class SwitchCase(Node):
    label: Optional[Expr]            # None: default
    body: Optional[Block]            # None: fall through


@dataclass
class Switch(Stmt):
    expr: Expr
    cases: list


@dataclass
class Exit(Stmt):
    pass


@dataclass
class Return(Stmt):
    value: Optional[Expr]


@dataclass
class EmptyStmt(Stmt):
    pass


# ------------------------------------------------------------------------------------ declarations
@dataclass
class Decl(Node):
    name: str
    annotations: list = field(default_factory=list, kw_only=True)


@dataclass
class VarDecl(Decl, Stmt):
    type_ref: TypeRef
    init: Optional[Expr]


@dataclass
class ConstDecl(Decl, Stmt):
    type_ref: TypeRef
    value: Expr


@dataclass
class Typedef(Decl):
    type_ref: TypeRef
    newtype: bool = False


@dataclass
class FieldDecl(Decl):
    type_ref: TypeRef


@dataclass
class StructLike(Decl):
    kind: str                        # header, struct, header_union
    fields: list
    type_params: list = field(default_factory=list)


@dataclass
class EnumDecl(Decl):
    members: list                    # names
    values: list = field(default_factory=list)        # expressions for serializable enums
    base: Optional[TypeRef] = None


@dataclass
class ErrorDecl(Decl):
    members: list


@dataclass
class MatchKindDecl(Decl):
    members: list


@dataclass
class Param(Decl):
    direction: str                   # '', in, out, inout
    type_ref: TypeRef
    default: Optional[Expr] = None


@dataclass
class MethodDecl(Decl):
    ret: Optional[TypeRef]           # None for constructors
    params: list
    type_params: list = field(default_factory=list)
    abstract: bool = False           # implemented by each instance's initializer block


@dataclass
class ExternDecl(Decl):
    methods: list
    type_params: list = field(default_factory=list)


@dataclass
class ExternFuncDecl(Decl):
    ret: TypeRef
    params: list
    type_params: list = field(default_factory=list)


@dataclass
class TypeDeclOnly(Decl):
    """parser / control / package type declarations (no body)."""
    kind: str
    params: list
    type_params: list = field(default_factory=list)


@dataclass
class Transition(Node):
    target: Optional[str] = None
    select: list = field(default_factory=list)       # expressions
    cases: list = field(default_factory=list)        # (keyset expr, state name, span)


@dataclass
class ParserState(Decl):
    stmts: list
    transition: Optional[Transition]


@dataclass
class ParserDecl(Decl):
    params: list
    ctor_params: list
    locals: list
    states: list
    type_params: list = field(default_factory=list)


@dataclass
class ActionDecl(Decl):
    params: list
    body: Block


@dataclass
class FunctionDecl(Decl):
    ret: TypeRef
    params: list
    body: Block
    type_params: list = field(default_factory=list)


@dataclass
class KeyElem(Node):
    expr: Expr
    match_kind: str
    annotations: list = field(default_factory=list)


@dataclass
class ActionRef(Node):
    name: str
    args: Optional[list]
    annotations: list = field(default_factory=list)


@dataclass
class EntryDecl(Node):
    keyset: Expr
    action: ActionRef
    priority: Optional[Expr] = None
    annotations: list = field(default_factory=list)


@dataclass
class TableDecl(Decl):
    keys: list = field(default_factory=list)
    actions: list = field(default_factory=list)
    entries: Optional[list] = None
    entries_const: bool = False
    props: dict = field(default_factory=dict)          # name -> (expr, is_const, span)
    prop_annotations: dict = field(default_factory=dict)   # name -> the property's annotations


@dataclass
class Instantiation(Decl):
    type_ref: TypeRef
    args: list
    # the methods of an initializer block, ``RegisterAction<..>(r) ra = { void apply(..) {..} };``
    initializer: list = field(default_factory=list)
    # the table whose ``implementation`` property, a constructor call without ``@name``, made
    # this instance (parser._hoist_implementations); None for a declared instance
    anonymous_implementation_of: Any = None


@dataclass
class ControlDecl(Decl):
    params: list
    ctor_params: list
    locals: list
    body: Block
    type_params: list = field(default_factory=list)


@dataclass
class ValueSetDecl(Decl):
    elem: TypeRef
    size: Expr


@dataclass
class Program(Node):
    decls: list


#: fields that point back, aside or at types, not down the tree: :func:`walk` skips them
_NOT_CHILDREN = ("span", "type", "decl", "annotations", "sym")


def walk(node) -> Iterator[Node]:
    """``node`` (a node or a list of them) and every IR node under it, parents first."""
    if isinstance(node, list):
        for x in node:
            yield from walk(x)
        return
    if not isinstance(node, Node):
        return
    yield node
    for f in fields(node):
        if f.name not in _NOT_CHILDREN:
            yield from walk(getattr(node, f.name, None))
