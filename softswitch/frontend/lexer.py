"""Tokens for the P4_16 grammar (``p4.lark``), retyped as p4c's lexer does.

:class:`TypeNamePostLex` runs after lark's basic lexer: identifiers that name a type become
``TYPE_NAME``; a ``<`` that opens a type-argument list becomes ``TLT`` and its closing ``>``
becomes ``TGT`` (a ``>>`` closing two lists becomes two ``TGT``). :func:`lalr` builds the
LALR(1) parser with it.
"""
from __future__ import annotations

import functools
import os
from typing import Iterator

from lark import Lark, Token

GRAMMAR_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "p4.lark")

# Keywords after which the next identifier is the name of a new type.
_TYPE_DECL_KEYWORDS = {"header", "struct", "header_union", "enum", "extern", "parser", "control",
                       "package"}
# Tokens that can start a type (so that a preceding '<' opens a type-argument list).
_TYPE_START = {"BIT", "INT", "VARBIT", "BOOL", "ERROR", "STRING", "TYPE_NAME", "TUPLE", "DONTCARE"}
_KEYWORD_TYPES = {"bit": "BIT", "int": "INT", "varbit": "VARBIT", "bool": "BOOL", "error": "ERROR",
                  "string": "STRING", "tuple": "TUPLE", "_": "DONTCARE"}


def _kw(tok: Token) -> str:
    """Normalised kind of a token: keyword text upper-cased, else the terminal name."""
    if tok.type == "NAME" or tok.type == "TYPE_NAME":
        return tok.type
    return _KEYWORD_TYPES.get(str(tok), tok.type)


class TypeNamePostLex:
    """Retype NAME/'<'/'>' tokens using a pre-scan of the declared type names.

    Declared types (header, struct, enum, extern, parser, control, package, typedef, type) are
    type names from their declaration to the end of the program, as p4c's lexer has them (it
    asks the parser's symbol table, which knows the declarations read so far): a name declared
    later is still an ordinary identifier before it, so a program may declare ``header hdr`` or
    ``parser p`` although core.p4 and v1model.p4 (included first) use ``hdr`` and ``p`` as
    parameter names. Type parameters (``extern register<T, I>``, ``T lookahead<T>()``) are type
    names only inside the declaration that introduces them, so ``T`` may still name a variable.
    """

    always_accept = ("NAME", "LT", "GT", "SHR")

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        toks = list(stream)
        type_names, scoped = _scan_type_names(toks)
        n = len(toks)

        def is_type(i: int) -> bool:
            name = str(toks[i])
            if type_names.get(name, n) <= i:
                return True
            return any(lo <= i <= hi for lo, hi in scoped.get(name, ()))

        depth = 0
        prev = None
        for i, tok in enumerate(toks):
            if tok.type == "NAME" and is_type(i):
                # `Type.member` / `Type(` / `Type x` / `Type<`: a type name unless it is clearly
                # used as a value (a member right after '.').
                if not (prev is not None and prev.type == "DOT"):
                    tok = Token.new_borrow_pos("TYPE_NAME", str(tok), tok)
            if tok.type == "LT" and prev is not None and i + 1 < n:
                nxt = toks[i + 1]
                nxt_kind = "TYPE_NAME" if (nxt.type == "NAME" and is_type(i + 1)) else _kw(nxt)
                opens = (_kw(prev) in ("BIT", "INT", "VARBIT", "TUPLE") or prev.type == "TYPE_NAME"
                         or (prev.type == "NAME" and nxt_kind in _TYPE_START)
                         or (prev.type == "VALUE_SET"))
                if opens:
                    depth += 1
                    tok = Token.new_borrow_pos("TLT", "<", tok)
            elif tok.type == "GT" and depth > 0:
                depth -= 1
                tok = Token.new_borrow_pos("TGT", ">", tok)
            elif tok.type == "SHR" and depth > 0:
                first = Token.new_borrow_pos("TGT", ">", tok)
                yield first
                depth -= 1
                prev = first
                kind = "TGT" if depth > 0 else "GT"
                depth = max(0, depth - 1)
                tok = Token(kind, ">", tok.start_pos + 1, tok.line, tok.column + 1,
                            tok.end_line, tok.end_column, tok.end_pos)
            prev = tok
            yield tok


_DECL_BOUNDARY = ("SEMICOLON", "LBRACE", "RBRACE")


def _decl_start(toks: list, i: int) -> int:
    """Index of the first token of the declaration containing toks[i]."""
    while i > 0 and toks[i - 1].type not in _DECL_BOUNDARY:
        i -= 1
    return i


def _decl_end(toks: list, i: int) -> int:
    """Index of the ';' or the closing '}' that ends the declaration starting at or before i."""
    depth = 0
    n = len(toks)
    while i < n:
        t = toks[i].type
        if t == "LBRACE":
            depth += 1
        elif t == "RBRACE":
            depth -= 1
            if depth <= 0:
                return i
        elif t == "SEMICOLON" and depth == 0:
            return i
        i += 1
    return n - 1


def _type_params(toks: list, i: int) -> list:
    """Names in `<A, B>` if toks[i] is '<' followed by a plain name list, else []."""
    if i >= len(toks) or toks[i].type != "LT":
        return []
    out = []
    k = i + 1
    while k + 1 < len(toks) and toks[k].type == "NAME" and toks[k + 1].type in ("COMMA", "GT"):
        out.append(str(toks[k]))
        if toks[k + 1].type == "GT":
            return out
        k += 2
    return []


def _scan_type_names(toks: list) -> tuple:
    """({global type name: index of its first declaration's name token},
    {type parameter: [(first, last) token index ranges]})."""
    names: dict = {}
    scoped: dict = {}

    def add_scoped(params: list, lo: int, hi: int) -> None:
        for p in params:
            scoped.setdefault(p, []).append((lo, hi))

    n = len(toks)
    for i, tok in enumerate(toks):
        text = str(tok)
        if tok.type == "NAME":
            # a generic method or function: `R name<T...>(`, preceded by its return type
            params = _type_params(toks, i + 1)
            if params and i > 0 and (toks[i - 1].type in ("NAME", "GT") or str(toks[i - 1]) in
                                     ("void", "bool", "bit", "int")):
                after = i + 2 + 2 * len(params)
                if after < n and toks[after].type == "LPAR":
                    add_scoped(params, _decl_start(toks, i), _decl_end(toks, i))
            continue
        if text in _TYPE_DECL_KEYWORDS and i + 1 < n:
            j = i + 1
            if text == "enum" and str(toks[j]) in ("bit", "int"):
                while j < n and toks[j].type != "GT":        # enum bit<8> Name {
                    j += 1
                j += 1
            elif text == "enum" and j + 1 < n and toks[j + 1].type == "NAME":
                j += 1                                       # enum TypedefName Name {
            if text == "extern" and j + 1 < n and toks[j + 1].type in ("NAME", "LT") \
                    and toks[j].type != "NAME":
                continue                                     # extern function: handled above
            if text == "extern" and j + 1 < n and toks[j].type == "NAME" and toks[j + 1].type == "NAME":
                continue                                     # extern R name(...): R is a type
            if j < n and toks[j].type == "NAME":
                names.setdefault(str(toks[j]), j)
                add_scoped(_type_params(toks, j + 1), i, _decl_end(toks, j))
        elif text in ("typedef", "type") and (i == 0 or toks[i - 1].type != "DOT"):
            j = i + 1
            while j < n and toks[j].type != "SEMICOLON":
                j += 1
            if j - 1 > i + 1 and toks[j - 1].type == "NAME":
                names.setdefault(str(toks[j - 1]), j - 1)
    return names, scoped


@functools.lru_cache(maxsize=1)
def lalr() -> Lark:
    """The LALR(1) parser of ``p4.lark`` with :class:`TypeNamePostLex` (built once)."""
    with open(GRAMMAR_FILE) as f:
        grammar = f.read()
    return Lark(grammar, parser="lalr", lexer="basic", postlex=TypeNamePostLex(),
                propagate_positions=True, maybe_placeholders=True)
