"""Public entry points: P4_16 v1model source -> :class:`softswitch.api.CompiledProgram`.

Example::

    >>> from softswitch.compiler import compile_file
    >>> prog = compile_file("tests/golden/ops.p4")
    >>> dp = prog.instantiate()
    >>> result = dp.process(1, frame)

The pipeline: ``cpp`` (as p4c runs it, with our ``p4include/core.p4`` and ``v1model.p4``) ->
lark LALR parser -> IR -> type checker -> Python code generator -> one ``exec`` per program.
The program's P4Runtime objects (``CompiledProgram.info``) are what p4c's P4Info lists
(``softswitch.frontend.controlplane``).
"""
from __future__ import annotations

import functools
import os
from typing import Iterable, Mapping, Optional, Union

from .api import (CompiledProgram, ControllerHeaderInfo, Exact, Lpm, Optional_, P4CompileError,
                  P4UnsupportedError, Range, StructFieldInfo, Ternary)
from .engine import runtime
from .engine.codegen import ProgramGen
from .engine.runtime import V1Dataplane
from .engine.runtime_tna import TnaDataplane
from .frontend import ir
from .frontend.controlplane import control_plane_view
from .frontend.bundle import SourceBundle, preprocess_bundle
from .frontend.cpp_sandbox import DEFAULT_LIMITS, CppLimits
from .frontend.parser import parse
from .frontend.preprocess import run_cpp
from .frontend.typecheck import Checker
from .frontend.types import StructT, width_of

__all__ = ["compile_file", "compile_source", "compile_bundle", "preprocess", "generate_python"]

COMPILE_CACHE_SIZE = 16      # distinct (preprocessed source, file name) pairs kept compiled


def preprocess(path_or_text: str, filename: Optional[str] = None, include_dirs: Iterable[str] = (),
               defines: Optional[Mapping[str, object]] = None) -> str:
    """Run the C preprocessor as p4c does; returns text with ``# N "file"`` line markers.

    Args:
        path_or_text: a path to a ``.p4`` file, or P4 source text (then give ``filename``).
        filename: the name used in line markers and errors for text input.
        include_dirs: extra ``-I`` directories (the file's own directory comes first).
        defines: ``-D`` macros (value ``None`` defines the name without a value).
    """
    if filename is None and "\n" not in path_or_text and os.path.exists(path_or_text):
        with open(path_or_text) as f:
            return run_cpp(f.read(), path_or_text, include_dirs, defines)
    return run_cpp(path_or_text, filename or "<input>", include_dirs, defines)


def _front_end(text: str, filename: str) -> Checker:
    program = parse(text, filename)
    checker = Checker(program)
    checker.check()
    return checker


def generate_python(text: str, filename: str = "<input>") -> str:
    """The Python source generated for preprocessed ``text`` (for debugging and inspection)."""
    checker = _front_end(text, filename)
    return ProgramGen(checker).generate()


def _controller_headers(checker: Checker) -> tuple:
    out = []
    for name, t in checker.types.items():
        if isinstance(t, StructT) and t.kind == "header":
            a = ir.find_annotation(t.annotations, "controller_header")
            if a is not None and a.args and isinstance(a.args[0], ir.StringLit):
                out.append(ControllerHeaderInfo(a.args[0].value, name, tuple(
                    StructFieldInfo(n, width_of(ft)) for n, ft in t.fields)))
    return tuple(out)


def compile_source(text: str, filename: str = "<input>", include_dirs: Iterable[str] = (),
                   defines: Optional[Mapping[str, object]] = None) -> CompiledProgram:
    """Compile P4_16 v1model source text (raw, or already preprocessed with line markers).

    Raises:
        P4CompileError: the program is invalid (``file:line:col: error: ...``).
        P4UnsupportedError: a valid construct this target does not implement.
    """
    pre = run_cpp(text, filename, include_dirs, defines)
    return _compile_preprocessed(pre, filename)


def compile_bundle(bundle: SourceBundle, limits: CppLimits = DEFAULT_LIMITS) -> CompiledProgram:
    """Compile a program pushed over P4Runtime: untrusted input, preprocessed confined to its
    bundle and ``p4include`` (see :mod:`softswitch.frontend.bundle`).

    Args:
        bundle: the main file (raw, or preprocessed with line markers) and its other files.
        limits: the preprocessor's limits.

    Returns:
        the program; only Python generated here from the checked P4 is executed.

    Raises:
        CppLimitError: the preprocessor hit a limit.
        P4CompileError: a refused include or directive, or an invalid program.
        P4UnsupportedError: a valid construct this target does not implement.

    Example::

        >>> compile_bundle(SourceBundle("main.p4", text, (("lib/defs.p4", defs),)))
    """
    return _compile_preprocessed(preprocess_bundle(bundle, limits), bundle.name)


@functools.lru_cache(maxsize=COMPILE_CACHE_SIZE)
def _compile_preprocessed(pre: str, filename: str) -> CompiledProgram:
    """Front end + code generation of preprocessed text. Memoised: a CompiledProgram is
    immutable (each ``instantiate()`` builds fresh state), and programs are often loaded again
    (a controller pushing the same pipeline, tests compiling the same file)."""
    gen_checker = _front_end(pre, filename)
    gen = ProgramGen(gen_checker)
    source = gen.generate()
    try:
        code = compile(source, f"<softswitch:{filename}>", "exec")
    except SyntaxError as exc:     # a code generator bug: report it located, not as a traceback
        raise P4UnsupportedError(f"code generation failed ({exc.msg})", filename, 0, 0) from exc
    namespace: dict = {"RT": runtime, "Exact": Exact, "Ternary": Ternary, "Lpm": Lpm, "Range": Range,
                       "Optional_": Optional_}
    exec(code, namespace)
    digests = {name: [(n, width_of(ft)) for n, ft in t.fields] for name, t in gen.digests.items()
               if isinstance(t, StructT)}
    ctl_headers = _controller_headers(gen_checker)
    view = control_plane_view(gen_checker)

    cls = TnaDataplane if gen_checker.main.type_ref.name == "Switch" else V1Dataplane

    def factory() -> V1Dataplane:
        return cls(namespace, digests, ctl_headers, view)

    first = factory()
    return CompiledProgram(info=first.info, source=pre, name=filename, factory=factory)


def compile_file(path: Union[str, os.PathLike], include_dirs: Iterable[str] = (),
                 defines: Optional[Mapping[str, object]] = None) -> CompiledProgram:
    """Compile a ``.p4`` file (see :func:`compile_source`)."""
    path = os.fspath(path)
    try:
        with open(path) as f:
            text = f.read()
    except OSError as exc:
        raise P4CompileError(f"cannot read {path}: {exc.strerror}", path, 0, 0) from None
    return compile_source(text, path, include_dirs, defines)

