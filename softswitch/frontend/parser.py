"""Parse preprocessed P4_16 text into IR (:mod:`softswitch.frontend.ir`).

Three steps:

1. lark's basic lexer tokenises the text (``p4.lark``);
2. :class:`.lexer.TypeNamePostLex` retypes tokens as p4c's lexer does (type names, the angle
   brackets of type-argument lists);
3. the LALR parser builds a tree that :class:`IRBuilder` turns into IR nodes with spans.
"""
from __future__ import annotations

from lark import Token, Transformer, Tree, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError

from ..api import P4CompileError, P4UnsupportedError
from . import ir
from .lexer import lalr
from .preprocess import LineMap


def _int_literal(text: str) -> tuple:
    """(value, width or None, signed) of a P4 integer literal like ``8w0x1F`` or ``16s-3``."""
    width, signed = None, False
    body = text.replace("_", "")
    for sep in ("w", "s"):
        if sep in body and not body.lower().startswith("0x"):
            left, right = body.split(sep, 1)
            if left.isdigit():
                width, signed, body = int(left), sep == "s", right
                break
    low = body.lower()
    if low.startswith("0x"):
        value = int(low[2:], 16)
    elif low.startswith("0b"):
        value = int(low[2:], 2)
    elif low.startswith("0o"):
        value = int(low[2:], 8)
    elif low.startswith("0d"):
        value = int(low[2:], 10)
    else:
        value = int(low, 10)
    return value, width, signed


class IRBuilder(Transformer):
    """lark tree -> IR nodes. Spans are mapped back through cpp's line markers."""

    def __init__(self, linemap: LineMap):
        super().__init__()
        self.linemap = linemap

    def _span(self, meta) -> ir.Span:
        if getattr(meta, "empty", True) and not hasattr(meta, "line"):
            return ir.NOSPAN
        f, line = self.linemap.locate(meta.line)
        return ir.Span(f, line, meta.column)

    def _tspan(self, tok: Token) -> ir.Span:
        f, line = self.linemap.locate(tok.line)
        return ir.Span(f, line, tok.column)

    # --------------------------------------------------------------------------- generic
    def __default__(self, data, children, meta):
        return Tree(data, children, meta)

    @v_args(meta=True)
    def start(self, meta, children):
        return ir.Program([c for c in children if c is not None], span=self._span(meta))

    def empty_decl(self, _):
        return None

    def annotations(self, children):
        return list(children)

    @v_args(meta=True)
    def annotation(self, meta, children):
        name = children[0]
        args = children[1] if len(children) > 1 and children[1] is not None else []
        return ir.Annotation(name, args, span=self._span(meta))

    def ann_body(self, children):
        return [c for c in children if c is not None]

    def name(self, children):
        return str(children[0])

    # every kind of name is its one token's text
    any_name = type_decl_name = decl_name = member = name

    def kw_name(self, children):
        return str(children[0]) if children else ""

    # --------------------------------------------------------------------------- types
    @v_args(meta=True)
    def type_ref(self, meta, children):
        return children[0]

    @v_args(meta=True)
    def bool_type(self, meta, _):
        return ir.TypeRef("bool", span=self._span(meta))

    @v_args(meta=True)
    def error_type(self, meta, _):
        return ir.TypeRef("error", span=self._span(meta))

    @v_args(meta=True)
    def string_type(self, meta, _):
        return ir.TypeRef("string", span=self._span(meta))

    @v_args(meta=True)
    def match_kind_type(self, meta, _):
        return ir.TypeRef("match_kind", span=self._span(meta))

    @v_args(meta=True)
    def bit1_type(self, meta, _):
        return ir.TypeRef("bit", ir.IntLit(1, span=self._span(meta)), span=self._span(meta))

    @v_args(meta=True)
    def bit_type(self, meta, children):
        return ir.TypeRef("bit", children[1], span=self._span(meta))

    @v_args(meta=True)
    def int_type(self, meta, children):
        return ir.TypeRef("int", children[1], span=self._span(meta))

    @v_args(meta=True)
    def varbit_type(self, meta, children):
        return ir.TypeRef("varbit", children[1], span=self._span(meta))

    @v_args(meta=True)
    def infint_type(self, meta, _):
        return ir.TypeRef("infint", span=self._span(meta))

    @v_args(meta=True)
    def width(self, meta, children):
        c = children[0]
        if isinstance(c, Token):
            if c.type == "INT_LIT":
                v, w, s = _int_literal(str(c))
                return ir.IntLit(v, w, s, str(c), span=self._tspan(c))
            return ir.Path(str(c), span=self._tspan(c))
        return c

    @v_args(meta=True)
    def named_type(self, meta, children):
        args = []
        if len(children) > 1 and children[2] is not None:
            args = children[2]
        return ir.TypeRef("named", name=str(children[0]), args=args, span=self._span(meta))

    def type_args(self, children):
        return list(children)

    @v_args(meta=True)
    def dontcare_type(self, meta, _):
        return ir.TypeRef("dontcare", span=self._span(meta))

    @v_args(meta=True)
    def int_type_arg(self, meta, children):
        raise P4CompileError("an integer is not a type", *self._loc(meta))

    @v_args(meta=True)
    def stack_type(self, meta, children):
        return ir.TypeRef("stack", elem=children[0], size=children[1], span=self._span(meta))

    @v_args(meta=True)
    def tuple_type(self, meta, children):
        return ir.TypeRef("tuple", args=children[1], span=self._span(meta))

    def type_params(self, children):
        return [str(c) for c in children if c.type == "TYPE_NAME"]

    def ret_type(self, children):
        return children[0]

    @v_args(meta=True)
    def void_type(self, meta, _):
        return ir.TypeRef("void", span=self._span(meta))

    def _loc(self, meta):
        s = self._span(meta)
        return s.file, s.line, s.col

    # --------------------------------------------------------------------------- declarations
    @v_args(meta=True)
    def const_decl(self, meta, c):
        return ir.ConstDecl(c[2], c[1], c[3], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def typedef_decl(self, meta, c):
        return ir.Typedef(c[2], c[1], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def newtype_decl(self, meta, c):
        return ir.Typedef(c[2], c[1], newtype=True, annotations=c[0], span=self._span(meta))

    def _struct_like(self, kind, meta, c):
        tparams = c[2] or []
        fields = list(c[3:])
        return ir.StructLike(str(c[1]), kind, fields, tparams, annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def header_decl(self, meta, c):
        return self._struct_like("header", meta, c)

    @v_args(meta=True)
    def struct_decl(self, meta, c):
        return self._struct_like("struct", meta, c)

    @v_args(meta=True)
    def union_decl(self, meta, c):
        return self._struct_like("header_union", meta, c)

    @v_args(meta=True)
    def field(self, meta, c):
        return ir.FieldDecl(c[2], c[1], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def enum_decl(self, meta, c):
        return ir.EnumDecl(str(c[1]), list(c[2:]), annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def ser_enum_decl(self, meta, c):
        c = [x for x in c if not (isinstance(x, Token) and x.type in ("TLT", "TGT"))]
        return self._ser_enum_fixed(meta, c, "bit")

    @v_args(meta=True)
    def ser_enum_decl_signed(self, meta, c):
        c = [x for x in c if not (isinstance(x, Token) and x.type in ("TLT", "TGT"))]
        return self._ser_enum_fixed(meta, c, "int")

    def _ser_enum_fixed(self, meta, c, kind):
        # c: annotations, width, TYPE_NAME, members...
        members = [m for m in c[3:]]
        base = ir.TypeRef(kind, c[1], span=self._span(meta))
        return ir.EnumDecl(str(c[2]), [m[0] for m in members], [m[1] for m in members], base,
                           annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def ser_enum_decl_typedef(self, meta, c):
        base = ir.TypeRef("named", name=str(c[1]), span=self._span(meta))
        members = c[3:]
        return ir.EnumDecl(str(c[2]), [m[0] for m in members], [m[1] for m in members], base,
                           annotations=c[0], span=self._span(meta))

    def enum_member(self, c):
        return (c[0], c[1])

    @v_args(meta=True)
    def error_decl(self, meta, c):
        return ir.ErrorDecl("error", list(c), span=self._span(meta))

    @v_args(meta=True)
    def match_kind_decl(self, meta, c):
        return ir.MatchKindDecl("match_kind", list(c), span=self._span(meta))

    @v_args(meta=True)
    def extern_decl(self, meta, c):
        tparams = c[2] or []
        methods = list(c[3:])
        return ir.ExternDecl(str(c[1]), methods, tparams, annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def ctor_decl(self, meta, c):
        return ir.MethodDecl(str(c[1]), None, c[2], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def method_decl(self, meta, c):
        return ir.MethodDecl(c[2], c[1], c[4], c[3] or [], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def abstract_method_decl(self, meta, c):
        # annotations, ret, name, type_params, params: an instance implements it in its
        # initializer block (RegisterAction's apply)
        return ir.MethodDecl(c[2], c[1], c[4], c[3] or [], annotations=c[0], span=self._span(meta),
                             abstract=True)

    @v_args(meta=True)
    def extern_func_decl(self, meta, c):
        return ir.ExternFuncDecl(c[2], c[1], c[4], c[3] or [], annotations=c[0], span=self._span(meta))

    def params(self, c):
        return [p for p in c if p is not None]

    @v_args(meta=True)
    def param(self, meta, c):
        direction = str(c[1].children[0]) if isinstance(c[1], Tree) else ""
        return ir.Param(c[3], direction, c[2], c[4], annotations=c[0], span=self._span(meta))

    def _type_decl(self, kind, meta, c):
        tparams = c[2] or []
        return ir.TypeDeclOnly(str(c[1]), kind, c[3], tparams, annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def parser_type_decl(self, meta, c):
        return self._type_decl("parser", meta, c)

    @v_args(meta=True)
    def control_type_decl(self, meta, c):
        return self._type_decl("control", meta, c)

    @v_args(meta=True)
    def package_decl(self, meta, c):
        return self._type_decl("package", meta, c)

    def ctor_params(self, c):
        return c[0]

    @v_args(meta=True)
    def parser_decl(self, meta, c):
        tparams = c[2] or []
        params = c[3]
        ctor = c[4] or []
        rest = c[5:]
        states = [x for x in rest if isinstance(x, ir.ParserState)]
        local = [x for x in rest if not isinstance(x, ir.ParserState)]
        return ir.ParserDecl(str(c[1]), params, ctor, local, states, tparams, annotations=c[0],
                             span=self._span(meta))

    @v_args(meta=True)
    def value_set_decl(self, meta, c):
        # annotations, TLT, element type, TGT, size, name
        parts = [x for x in c[1:] if not isinstance(x, Token)]
        return ir.ValueSetDecl(parts[-1], parts[0], parts[1], annotations=c[0],
                               span=self._span(meta))

    @v_args(meta=True)
    def parser_state(self, meta, c):
        trans = c[-1] if isinstance(c[-1], ir.Transition) or c[-1] is None else None
        stmts = [s for s in c[2:] if isinstance(s, ir.Stmt)]
        return ir.ParserState(c[1], stmts, trans, annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def transition_direct(self, meta, c):
        return ir.Transition(target=c[0], span=self._span(meta))

    @v_args(meta=True)
    def transition_select(self, meta, c):
        sel = c[0]
        return ir.Transition(select=sel[0], cases=sel[1], span=self._span(meta))

    def select_expr(self, c):
        exprs = [x for x in c if isinstance(x, ir.Expr)]
        cases = [x for x in c if isinstance(x, tuple)]
        return (exprs, cases)

    @v_args(meta=True)
    def select_case(self, meta, c):
        return (c[0], c[1], self._span(meta))

    def keyset(self, c):
        return c[0]

    @v_args(meta=True)
    def tuple_keyset(self, meta, c):
        return ir.TupleKs(list(c), span=self._span(meta))

    @v_args(meta=True)
    def ks_mask(self, meta, c):
        return ir.Mask(c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def ks_range(self, meta, c):
        return ir.RangeKs(c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def ks_default(self, meta, c):
        return ir.DefaultKs(span=self._span(meta))

    @v_args(meta=True)
    def ks_dontcare(self, meta, c):
        return ir.DefaultKs(span=self._span(meta))

    @v_args(meta=True)
    def control_decl(self, meta, c):
        tparams = c[2] or []
        params = c[3]
        ctor = c[4] or []
        body = c[-1]
        local = _hoist_implementations([x for x in c[5:-1] if x is not None])
        return ir.ControlDecl(str(c[1]), params, ctor, local, body, tparams, annotations=c[0],
                              span=self._span(meta))

    @v_args(meta=True)
    def action_decl(self, meta, c):
        return ir.ActionDecl(c[1], c[2], c[3], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def function_decl(self, meta, c):
        return ir.FunctionDecl(c[2], c[1], c[4], c[5], c[3] or [], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def void_function_decl(self, meta, c):
        void = ir.TypeRef("void", span=self._span(meta))
        return ir.FunctionDecl(c[1], void, c[3], c[4], c[2] or [], annotations=c[0], span=self._span(meta))

    @v_args(meta=True)
    def instantiation(self, meta, c):
        t = ir.TypeRef("named", name=str(c[1]), span=self._tspan(c[1]))
        d = ir.Instantiation(c[3], t, c[2][0], annotations=c[0], span=self._span(meta))
        d.initializer = c[4] if len(c) > 4 and c[4] is not None else []
        return _named(d, c[2][1])

    @v_args(meta=True)
    def generic_instantiation(self, meta, c):
        # annotations, TYPE_NAME, TLT, type_args, TGT, args, name
        c = [x for x in c if not (isinstance(x, Token) and x.type in ("TLT", "TGT"))]
        t = ir.TypeRef("named", name=str(c[1]), args=c[2], span=self._tspan(c[1]))
        d = ir.Instantiation(c[4], t, c[3][0], annotations=c[0], span=self._span(meta))
        d.initializer = c[5] if len(c) > 5 and c[5] is not None else []
        return _named(d, c[3][1])

    def instance_init(self, c):
        return list(c)

    @v_args(meta=True)
    def table_decl(self, meta, c):
        t = ir.TableDecl(c[1], annotations=c[0], span=self._span(meta))
        for prop in c[2:]:
            kind = prop[0]
            if kind == "key":
                t.keys = prop[1]
            elif kind == "actions":
                t.actions = prop[1]
            elif kind == "entries":
                t.entries, t.entries_const = prop[1], prop[2]
            else:
                t.props[prop[1]] = (prop[2], prop[3], prop[4])
                t.prop_annotations[prop[1]] = prop[5]
        return t

    def key_prop(self, c):
        return ("key", list(c))

    def actions_prop(self, c):
        return ("actions", list(c))

    def const_kw(self, c):
        return True if c else False

    def entries_prop(self, c):
        return ("entries", [e for e in c[2:]], c[1])

    @v_args(meta=True)
    def generic_prop(self, meta, c):
        return ("prop", c[2], c[3], c[1], self._span(meta), c[0])

    @v_args(meta=True)
    def key_elem(self, meta, c):
        return ir.KeyElem(c[0], c[1], c[2], span=self._span(meta))

    @v_args(meta=True)
    def action_ref_item(self, meta, c):
        return ir.ActionRef(c[1], c[2][0] if c[2] is not None else None, c[0], span=self._span(meta))

    @v_args(meta=True)
    def entry(self, meta, c):
        prio = c[0]
        ref = ir.ActionRef(c[3], c[4][0] if c[4] is not None else None, c[2], span=self._span(meta))
        return ir.EntryDecl(c[1], ref, prio, c[5], span=self._span(meta))

    def entry_priority(self, c):
        return c[0]

    # --------------------------------------------------------------------------- statements
    @v_args(meta=True)
    def block(self, meta, c):
        return ir.Block(list(c), span=self._span(meta))

    @v_args(meta=True)
    def block_stmt(self, meta, c):
        return ir.Block(list(c[1:]), span=self._span(meta))

    @v_args(meta=True)
    def assign_stmt(self, meta, c):
        return ir.Assign(c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def call_stmt(self, meta, c):
        if not isinstance(c[0], (ir.Call, ir.CtorCall)):
            raise P4CompileError("expression statement must be a method or function call",
                                 *self._loc(meta))
        return ir.CallStmt(c[0], span=self._span(meta))

    @v_args(meta=True)
    def if_stmt(self, meta, c):
        return ir.If(c[0], c[1], c[2], span=self._span(meta))

    @v_args(meta=True)
    def switch_stmt(self, meta, c):
        return ir.Switch(c[0], list(c[1:]), span=self._span(meta))

    @v_args(meta=True)
    def switch_case(self, meta, c):
        label = None if c[0] == "default" else c[0]
        return ir.SwitchCase(label, c[1], span=self._span(meta))

    def default_label(self, c):
        return "default"

    def switch_label(self, c):
        return c[0]

    @v_args(meta=True)
    def exit_stmt(self, meta, c):
        return ir.Exit(span=self._span(meta))

    @v_args(meta=True)
    def return_stmt(self, meta, c):
        return ir.Return(c[0], span=self._span(meta))

    @v_args(meta=True)
    def empty_stmt(self, meta, c):
        return ir.EmptyStmt(span=self._span(meta))

    @v_args(meta=True)
    def var_decl(self, meta, c):
        return ir.VarDecl(c[1], c[0], c[2], span=self._span(meta))

    @v_args(meta=True)
    def local_var_decl(self, meta, c):
        return ir.VarDecl(c[2], c[1], c[3], annotations=c[0], span=self._span(meta))

    # --------------------------------------------------------------------------- expressions
    @v_args(meta=True)
    def cond(self, meta, c):
        return ir.Cond(c[0], c[1], c[2], span=self._span(meta))

    def _bin(self, op, meta, c):
        return ir.Binary(op, c[0], c[-1], span=self._span(meta))

    @v_args(meta=True)
    def lor(self, meta, c):
        return self._bin("||", meta, c)

    @v_args(meta=True)
    def land(self, meta, c):
        return self._bin("&&", meta, c)

    @v_args(meta=True)
    def bor(self, meta, c):
        return self._bin("|", meta, c)

    @v_args(meta=True)
    def bxor(self, meta, c):
        return self._bin("^", meta, c)

    @v_args(meta=True)
    def band(self, meta, c):
        return self._bin("&", meta, c)

    @v_args(meta=True)
    def binop(self, meta, c):
        return ir.Binary(str(c[1]), c[0], c[2], span=self._tspan(c[1]))

    @v_args(meta=True)
    def lnot(self, meta, c):
        return ir.Unary("!", c[0], span=self._span(meta))

    @v_args(meta=True)
    def bnot(self, meta, c):
        return ir.Unary("~", c[0], span=self._span(meta))

    @v_args(meta=True)
    def neg(self, meta, c):
        return ir.Unary("-", c[0], span=self._span(meta))

    @v_args(meta=True)
    def pos(self, meta, c):
        return ir.Unary("+", c[0], span=self._span(meta))

    @v_args(meta=True)
    def cast(self, meta, c):
        return ir.Cast(c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def member_access(self, meta, c):
        return ir.Member(c[0], c[1], span=self._span(meta))

    def kw_member(self, c):
        return str(c[0]) if c else ""

    @v_args(meta=True)
    def index(self, meta, c):
        return ir.Index(c[0], c[1], span=self._span(meta))

    @v_args(meta=True)
    def slice(self, meta, c):
        return ir.Slice(c[0], c[1], c[2], span=self._span(meta))

    @v_args(meta=True)
    def call(self, meta, c):
        args, names = c[1]
        return ir.Call(c[0], args, [], names, span=self._span(meta))

    @v_args(meta=True)
    def generic_call(self, meta, c):
        c = [x for x in c if not (isinstance(x, Token) and x.type in ("TLT", "TGT"))]
        args, names = c[2]
        return ir.Call(c[0], args, c[1], names, span=self._span(meta))

    @v_args(meta=True)
    def int_lit(self, meta, c):
        v, w, s = _int_literal(str(c[0]))
        return ir.IntLit(v, w, s, str(c[0]), span=self._tspan(c[0]))

    @v_args(meta=True)
    def true_lit(self, meta, c):
        return ir.BoolLit(True, span=self._span(meta))

    @v_args(meta=True)
    def false_lit(self, meta, c):
        return ir.BoolLit(False, span=self._span(meta))

    @v_args(meta=True)
    def string_lit(self, meta, c):
        raw = str(c[0])[1:-1]
        return ir.StringLit(bytes(raw, "utf-8").decode("unicode_escape"), span=self._tspan(c[0]))

    @v_args(meta=True)
    def path(self, meta, c):
        return ir.Path(c[0], span=self._span(meta))

    @v_args(meta=True)
    def top_path(self, meta, c):
        return ir.Path(c[0], top=True, span=self._span(meta))

    @v_args(meta=True)
    def type_member(self, meta, c):
        return ir.TypeMember(str(c[0]), c[1], span=self._span(meta))

    @v_args(meta=True)
    def error_member(self, meta, c):
        return ir.TypeMember("error", c[0], span=self._span(meta))

    @v_args(meta=True)
    def ctor_call(self, meta, c):
        t = ir.TypeRef("named", name=str(c[0]), span=self._tspan(c[0]))
        return _named(ir.CtorCall(t, c[1][0], span=self._span(meta)), c[1][1])

    @v_args(meta=True)
    def generic_ctor_call(self, meta, c):
        c = [x for x in c if not (isinstance(x, Token) and x.type in ("TLT", "TGT"))]
        t = ir.TypeRef("named", name=str(c[0]), args=c[1], span=self._tspan(c[0]))
        return _named(ir.CtorCall(t, c[2][0], span=self._span(meta)), c[2][1])

    @v_args(meta=True)
    def list_expr(self, meta, c):
        return ir.ListExpr([x for x in c if x is not None], span=self._span(meta))

    @v_args(meta=True)
    def struct_expr(self, meta, c):
        return ir.StructExpr([k for k, _ in c], [v for _, v in c], span=self._span(meta))

    @v_args(meta=True)
    def invalid_header(self, meta, c):
        return ir.InvalidHeader(span=self._tspan(c[0]))

    def kv_pair(self, c):
        return (c[0], c[1])

    def args(self, c):
        items = [x for x in c if x is not None]
        names = []
        out = []
        for x in items:
            if isinstance(x, tuple):
                names.append(x[0])
                out.append(x[1])
            else:
                names.append("")
                out.append(x)
        return (out, names)

    @v_args(meta=True)
    def dontcare_arg(self, meta, c):
        return ir.DontCare(span=self._span(meta))

    def named_arg(self, c):
        return (c[0], c[1])


def _named(node, names: list):
    """``node`` (an instantiation or constructor call) with the names of its arguments
    (``V1Switch(p = MyParser(), ...)``; '' for a positional one)."""
    node.arg_names = list(names)
    return node


def parse(text: str, filename: str = "<input>") -> ir.Program:
    """Parse preprocessed text. Raises P4CompileError located in the original file."""
    linemap = LineMap(text, filename)
    try:
        tree = lalr().parse(text)
    except UnexpectedInput as exc:
        line = getattr(exc, "line", 0) or 0
        col = getattr(exc, "column", 0) or 0
        f, orig_line = linemap.locate(line)
        if isinstance(exc, UnexpectedToken):
            tok = exc.token
            what = "end of file" if tok.type == "$END" else repr(str(tok))
            if tok.type == "NAME" and "TYPE_NAME" in getattr(exc, "expected", ()):
                what += " (not a declared type)"
            raise P4CompileError(f"syntax error, unexpected {what}", f, orig_line, col) from None
        if isinstance(exc, UnexpectedCharacters):
            ch = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else "?"
            raise P4CompileError(f"syntax error, unexpected character {ch!r}", f, orig_line, col) from None
        raise P4CompileError("syntax error", f, orig_line, col) from None
    try:
        program = IRBuilder(linemap).transform(tree)
    except VisitError as exc:      # an error raised while building a node: report it as is
        if isinstance(exc.orig_exc, P4CompileError):
            raise exc.orig_exc from None
        raise
    program.span = ir.Span(filename, linemap.last_line(filename), 1)
    return program


def _hoist_implementations(local: list) -> list:
    """A table's ``implementation = action_profile(32w128);`` (a constructor call, as p4c's
    samples write it) becomes an instance declared just before the table and named by the
    property: p4c's P4Info calls the profile by the property's ``@name`` exactly as written (a
    leading dot dropped, never qualified by the control), so the instance gets ``@name(".N")``.
    Without ``@name`` p4c writes no P4Info ("anonymous table property 'implementation' with no
    name annotation"): the checker refuses it (``Instantiation.anonymous_implementation_of``)."""
    out = []
    for loc in local:
        expr = loc.props.get("implementation", (None,))[0] if isinstance(loc, ir.TableDecl) else None
        if isinstance(expr, ir.CtorCall):
            anns = loc.prop_annotations.get("implementation", [])
            name = ir.find_annotation(anns, "name")
            inst = ir.Instantiation(f"__impl_{loc.name}", expr.type_ref, expr.args, span=expr.span)
            if name and name.args and isinstance(name.args[0], ir.StringLit):
                inst.annotations = [ir.Annotation("name", [ir.StringLit(
                    "." + name.args[0].value.lstrip("."), span=name.span)], span=name.span)]
            else:
                inst.anonymous_implementation_of = loc
            out.append(inst)
            _, is_const, span = loc.props["implementation"]
            loc.props["implementation"] = (ir.Path(inst.name, span=expr.span), is_const, span)
        out.append(loc)
    return out
