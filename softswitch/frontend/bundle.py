"""Programs pushed over P4Runtime: a main file and the files it includes, preprocessed confined.

A pushed program is untrusted input. Its :class:`SourceBundle` is either

* **preprocessed** (the main text starts with a line marker ``# N "file"``, what
  :func:`softswitch.p4runtime_server.make_device_config` sends): cpp is not run at all; the text
  may hold no directive other than line markers, and no other file;
* **raw**: the main file and the bundle's other files (relative paths). cpp runs on them in a
  fresh private directory that holds only the bundle, with only that directory and
  ``softswitch/p4include`` (``core.p4``, ``v1model.p4``) to include from.

Confinement of a raw bundle, in order (each step refuses with a located error that names the
problem and never quotes the content of a file outside the bundle):

1. :func:`check_bundle`: file names are plain relative paths (no ``/`` at the start, no ``..``,
   no symlinks: files are written by us), sizes and counts are bounded;
2. :func:`scan_includes`: every ``#include`` is literal, ``"relative/path"`` naming a bundle file
   (resolved from the including file, never leaving the bundle) or ``<core.p4>`` /
   ``<v1model.p4>``; ``#include_next``, ``#import``, ``#embed``, ``#pragma`` (but ``once``),
   ``__has_include`` and ``_Pragma`` are refused (they can name or open any file);
3. cpp runs with ``-nostdinc`` and a prelude that poisons ``__has_include`` and ``_Pragma`` (so
   they cannot be pasted together from pieces either), under the limits of
   :mod:`.cpp_sandbox` and, where the kernel has Landlock, allowed to read only the bundle
   directory, ``p4include`` and the toolchain;
4. every file named by a line marker in cpp's output must be a bundle file or a ``p4include``
   file, or the whole output is refused; cpp's own errors are reported only for those files.

Example::

    >>> bundle = SourceBundle("main.p4", '#include <core.p4>\\n#include "lib/defs.p4"\\n...',
    ...                       (("lib/defs.p4", "const bit<8> X = 1;\\n"),))
    >>> text = preprocess_bundle(bundle)
"""
from __future__ import annotations

import bisect
import dataclasses
import os
import posixpath
import re
import tempfile
from typing import Optional

from ..api import P4CompileError
from .cpp_sandbox import DEFAULT_LIMITS, CppLimits, clean_env, run_limited
from .preprocess import _CPP_ERROR, P4INCLUDE_DIR, cpp_command, name_stdin

MAX_BUNDLE_FILES = 256            # files besides the main one
MAX_PATH_CHARS = 1024             # a bundle file's relative path
MAX_LABEL_CHARS = 1024            # the main file's name (a label for diagnostics only)
MAX_MESSAGE_CHARS = 300           # of a cpp diagnostic passed on
PRELUDE = "softswitch-prelude.h"  # written next to the bundle directory, outside it
PREPROCESSED_PROBE_LINES = 64     # blank lines allowed before a preprocessed source's first marker
# Identifiers that name (and open) files from inside an expression, and the pragma operator
# (``_Pragma("GCC dependency \"/etc/passwd\"")``). Poisoned in the prelude as well, so that
# token pasting cannot assemble them.
FORBIDDEN_IDENTIFIERS = ("__has_include", "__has_include_next", "__has_include__", "__has_embed",
                         "_Pragma")
# Directives that read or stat files other than through a checked #include.
FORBIDDEN_DIRECTIVES = ("include_next", "import", "embed")
STD_FILES = frozenset(n for n in os.listdir(P4INCLUDE_DIR) if n.endswith(".p4"))
CPP_BUILTIN_NAMES = ("<stdin>", "<built-in>", "<command-line>")

_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*\Z")
_INCLUDE_NAME = re.compile(r"[A-Za-z0-9_./+-]+\Z")
_SPLICE = re.compile(r"\\[ \t\f\v]*\n")
# cpp's lexing, as far as hiding text goes: string and character literals (backslash escapes;
# an unterminated one ends at the end of the line) and comments.
_LEX = re.compile(r'"(?:[^"\\\n]|\\.)*"?|\'(?:[^\'\\\n]|\\.)*\'?|//[^\n]*|/\*.*?(?:\*/|\Z)', re.S)
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_BLANK = re.compile(r"[^\n]")
_HSPACE = " \t\f\v"
_INCLUDE_LINE = re.compile(r'#[ \t\f\v]*include[ \t\f\v]*(?:"([^"\n]*)"|<([^>\n]*)>)[ \t\f\v]*\Z')
_PRAGMA_ONCE = re.compile(r"#[ \t\f\v]*pragma[ \t\f\v]+once[ \t\f\v]*\Z")
_MARKER = re.compile(r'[ \t]*#[ \t]*(?:line[ \t]+)?\d+'
                     r'(?:[ \t]+"(?:[^"\\\n]|\\.)*"(?:[ \t]+\d+)*)?[ \t]*\Z')
_OUTPUT_MARKER = re.compile(r'^#[ \t]*(?:line[ \t]+)?\d+[ \t]+"((?:[^"\\\n]|\\.)*)"', re.M)
_DIRECTIVE_NAME = re.compile(r"[ \t\f\v]*#[ \t\f\v]*([A-Za-z_]\w*)?")


@dataclasses.dataclass(frozen=True)
class SourceBundle:
    """A pushed P4 program.

    Attributes:
        name: the main file's name: a label for diagnostics and line markers, never opened.
        source: the main file's text.
        files: ``(relative path, text)`` of every other file the main file may include.
    """
    name: str
    source: str
    files: tuple = ()

    @property
    def preprocessed(self) -> bool:
        """Whether ``source`` is cpp output (its first non-blank line is a line marker)."""
        for line in self.source.split("\n", PREPROCESSED_PROBE_LINES)[:PREPROCESSED_PROBE_LINES]:
            if line.strip():
                return _MARKER.match(line) is not None and '"' in line
        return False


def check_bundle(bundle: SourceBundle) -> None:
    """Check names, counts and the kind of every file of ``bundle``.

    Raises:
        ValueError: the rule broken, naming the file.
    """
    if not bundle.name or len(bundle.name) > MAX_LABEL_CHARS or _has_control(bundle.name):
        raise ValueError(f"the main file's name must be 1 to {MAX_LABEL_CHARS} printable "
                         f"characters, got {_shorten(bundle.name)!r}")
    if len(bundle.files) > MAX_BUNDLE_FILES:
        raise ValueError(f"a bundle holds at most {MAX_BUNDLE_FILES} files besides the main one, "
                         f"got {len(bundle.files)}")
    if bundle.files and bundle.preprocessed:
        raise ValueError("a preprocessed source (one that starts with a line marker) comes alone: "
                         "send the raw files to have them included")
    seen: set = set()
    for path, text in bundle.files:
        check_bundle_path(path)
        if not isinstance(text, str):
            raise ValueError(f"bundle file {path!r}: its content must be text")
        if path in seen:
            raise ValueError(f"bundle file {path!r} is given twice")
        seen.add(path)
    for path in seen:        # "a" and "a/b" cannot both be files
        parent = posixpath.dirname(path)
        while parent:
            if parent in seen:
                raise ValueError(f"bundle file {parent!r} is also the directory of {path!r}")
            parent = posixpath.dirname(parent)


def check_bundle_path(path: object) -> None:
    """A bundle file's path: relative, ``/``-separated, each part a plain name.

    Raises:
        ValueError: naming the path and the rule.
    """
    if not isinstance(path, str) or not path or len(path) > MAX_PATH_CHARS:
        raise ValueError(f"bundle file name {_shorten(path)!r} must be 1 to {MAX_PATH_CHARS} "
                         "characters")
    if path.startswith("/"):
        raise ValueError(f"bundle file name {_shorten(path)!r} is absolute; names are relative "
                         "to the main file's directory")
    for part in path.split("/"):
        if part in ("", ".", ".."):
            raise ValueError(f"bundle file name {_shorten(path)!r}: empty, '.' and '..' parts "
                             "are not allowed")
        if not _COMPONENT.match(part):
            raise ValueError(f"bundle file name {_shorten(path)!r}: each part is letters, digits "
                             "and '_.+-', starting with a letter, digit or '_'")


def normalize_text(text: str, file: str) -> str:
    """``text`` with CRLF line ends made LF; NUL and a lone CR are refused (cpp and this check
    would read them differently)."""
    text = text.replace("\r\n", "\n")
    for char, what in (("\0", "a NUL character"), ("\r", "a carriage return not followed by a "
                                                             "line feed")):
        index = text.find(char)
        if index >= 0:
            raise P4CompileError(f"{what} is not allowed in a pushed program", file,
                                 text.count("\n", 0, index) + 1, 1)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise P4CompileError("the program is not valid Unicode text (lone surrogate)", file,
                             text.count("\n", 0, exc.start) + 1, 1) from None
    return text


def scan_includes(path: str, text: str, files: frozenset, label: Optional[str] = None) -> None:
    """Refuse every directive of a raw bundle file that could reach a file outside the bundle.

    Args:
        path: the file's bundle path ("" for the main file).
        text: its text (as :func:`normalize_text` left it).
        files: the bundle's file paths.
        label: the name errors are located in (defaults to ``path``).

    Raises:
        P4CompileError: located at the offending line; names the directive and the rule.
    """
    where = label or path
    spliced, splices = _splice(text)
    kept, code = _strip(spliced)

    def fail(message: str, pos: int):
        line = spliced.count("\n", 0, pos) + 1 + bisect.bisect_right(splices, pos)
        raise P4CompileError(message, where, line, 1)

    for m in _WORD.finditer(code):
        word = m.group()
        if word in FORBIDDEN_IDENTIFIERS:
            fail(f"{word} is not allowed in a pushed program (it reaches files outside the "
                 "bundle)", m.start())
        if word not in ("include", "pragma") + FORBIDDEN_DIRECTIVES:
            continue
        hash_pos = _introducer(code, m.start())
        if hash_pos is None:
            continue                 # an identifier, not a directive name
        if word in FORBIDDEN_DIRECTIVES:
            fail(f"#{word} is not allowed in a pushed program", m.start())
        end = kept.find("\n", m.end())
        directive = kept[hash_pos:end if end >= 0 else len(kept)].rstrip(_HSPACE)
        if word == "pragma":
            if not _PRAGMA_ONCE.match(directive):
                fail("#pragma is not allowed in a pushed program (except #pragma once)", m.start())
            continue
        include = _INCLUDE_LINE.match(directive)
        if include is None:
            fail('#include must name a file literally, as #include "path" or #include <path>, '
                 "on one line", m.start())
        problem = _include_problem(path, include.group(1), include.group(2), files)
        if problem:
            fail(problem, m.start())


def check_preprocessed(bundle: SourceBundle) -> None:
    """A preprocessed source may hold line markers, but no other directive (it is not run
    through cpp again, so a directive would be silently ignored)."""
    for number, line in enumerate(bundle.source.split("\n"), 1):
        if line.lstrip(_HSPACE).startswith("#") and not _MARKER.match(line):
            name = _DIRECTIVE_NAME.match(line).group(1) or ""
            raise P4CompileError(f"#{name} in a preprocessed program: a source that starts with "
                                 "a line marker must be cpp's complete output (push the raw "
                                 "files as a bundle to have them preprocessed here)",
                                 bundle.name, number, 1)


def preprocess_bundle(bundle: SourceBundle, limits: CppLimits = DEFAULT_LIMITS) -> str:
    """Preprocess a pushed program, confined to its bundle and ``p4include``.

    Returns:
        text with line markers: the main file is named ``bundle.name``, bundle files by their
        bundle path, standard files by their path in ``p4include``.

    Raises:
        CppLimitError: cpp hit a limit.
        P4CompileError: a refused directive or file, or a preprocessor error (located).
    """
    try:
        check_bundle(bundle)
    except ValueError as exc:
        raise P4CompileError(str(exc), bundle.name, 0, 0) from None
    if bundle.preprocessed:
        check_preprocessed(bundle)
        return bundle.source
    names = frozenset(p for p, _ in bundle.files)
    main = normalize_text(bundle.source, bundle.name)
    scan_includes("", main, names, label=bundle.name)
    texts = {}
    for path, text in bundle.files:
        texts[path] = normalize_text(text, path)
        scan_includes(path, texts[path], names)
    with tempfile.TemporaryDirectory(prefix="softswitch-push-") as tmp:
        root = os.path.join(tmp, "bundle")
        os.mkdir(root, 0o700)
        for path, text in texts.items():
            _write_new(root, path, text)
        _write_new(tmp, PRELUDE, "#pragma GCC poison " + " ".join(FORBIDDEN_IDENTIFIERS) + "\n")
        prelude = posixpath.join("..", PRELUDE)
        cmd = cpp_command() + ["-w", "-fno-diagnostics-show-caret", "-include", prelude]
        result = run_limited(cmd, main.encode("utf-8"), bundle.name, limits=limits, cwd=root,
                             env=clean_env(), sandbox_paths=(tmp, P4INCLUDE_DIR))
    allowed = _allowed_files(names, prelude)
    if result.returncode != 0:
        raise _cpp_failure(result.stderr.decode("utf-8", "replace"), bundle.name, allowed)
    try:
        out = result.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise P4CompileError("the preprocessor's output is not UTF-8 text", bundle.name,
                             0, 0) from None
    for m in _OUTPUT_MARKER.finditer(out):
        if not allowed(m.group(1)):
            line = out.count("\n", 0, m.start()) + 1
            raise P4CompileError(f"the preprocessed program names {_shorten(m.group(1))!r} (line "
                                 f"{line} of cpp's output), which is not a file of the bundle or "
                                 "of p4include", bundle.name, 0, 0)
    return name_stdin(out, bundle.name)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------
def _splice(text: str) -> tuple:
    """Backslash-newline splices removed (as cpp's phase 2), and where they were."""
    positions, pieces, last, removed = [], [], 0, 0
    for m in _SPLICE.finditer(text):
        pieces.append(text[last:m.start()])
        removed += m.end() - m.start()
        positions.append(m.end() - removed)
        last = m.end()
    pieces.append(text[last:])
    return "".join(pieces), positions


def _strip(text: str) -> tuple:
    """``(kept, code)``, both as long as ``text``: ``kept`` has comments blanked, ``code`` has
    comments and literals blanked (newlines stay, so positions and lines match)."""
    kept, code, last = [], [], 0
    for m in _LEX.finditer(text):
        token = m.group()
        kept.append(text[last:m.start()])
        code.append(text[last:m.start()])
        blank = _BLANK.sub(" ", token)
        if token[0] in "\"'":
            kept.append(token)
            code.append(token[0] + blank[1:])
        else:
            kept.append(blank)
            code.append(blank)
        last = m.end()
    kept.append(text[last:])
    code.append(text[last:])
    return "".join(kept), "".join(code)


def _introducer(code: str, pos: int) -> Optional[int]:
    """Where the ``#`` (or ``%:``, ``??=``) that makes the word at ``pos`` a directive name
    starts, or None. Whitespace and comments, newlines included, may come between."""
    k = pos - 1
    while k >= 0 and code[k] in " \t\f\v\n":
        k -= 1
    if k >= 0 and code[k] == "#":
        return k
    if k >= 1 and code[k - 1:k + 1] == "%:":
        return k - 1
    if k >= 2 and code[k - 2:k + 1] == "??=":
        return k - 2
    return None


def _include_problem(including: str, quoted: Optional[str], angled: Optional[str],
                     files: frozenset) -> Optional[str]:
    """Why an ``#include`` in bundle file ``including`` may not be followed, or None."""
    name = quoted if quoted is not None else angled
    shown = f'"{name}"' if quoted is not None else f"<{name}>"
    if name.startswith("/"):
        return f"#include {shown}: absolute paths are not allowed in a pushed program"
    if not _INCLUDE_NAME.match(name):
        return (f"#include {_shorten(shown)}: a path is letters, digits and '_./+-' (relative to "
                "the including file)")
    if angled is not None:
        if name in STD_FILES:
            return None
        return (f"#include {shown}: only the standard files "
                f"{', '.join(f'<{n}>' for n in sorted(STD_FILES))} are included with <>")
    target = posixpath.normpath(posixpath.join(posixpath.dirname(including), name))
    if target == ".." or target.startswith("../"):
        return f"#include {shown}: the path leads out of the bundle"
    if target in files or name in STD_FILES:
        return None
    return f"#include {shown}: no such file in the bundle"


def _allowed_files(names: frozenset, prelude: str):
    """A test of the file names cpp may print: its own, the prelude, ``p4include``'s files and
    the bundle's (as cpp spells them, e.g. ``lib/../a.p4``: the bundle directory has no
    symlinks, so the spelling normalises to the file opened)."""
    fixed = {*CPP_BUILTIN_NAMES, posixpath.normpath(prelude),
             *(os.path.join(P4INCLUDE_DIR, n) for n in STD_FILES)}

    def allowed(name: str) -> bool:
        norm = posixpath.normpath(name)
        if name in fixed or norm in fixed:
            return True
        return not name.startswith("/") and norm in names
    return allowed


def _cpp_failure(stderr: str, label: str, allowed) -> P4CompileError:
    """cpp's first error, passed on only when it is located in the bundle."""
    m = _CPP_ERROR.search(stderr)
    if m is None:
        return P4CompileError("the preprocessor failed", label, 0, 0)
    efile = m.group("file")
    if not allowed(efile):
        return P4CompileError("preprocessor error in a file outside the bundle", label, 0, 0)
    efile = label if efile == "<stdin>" else efile
    message = m.group("msg").strip()
    if "poisoned" in message:
        message = (f"{message.replace('attempt to use poisoned', '').strip()} is not allowed in a "
                   "pushed program (it reaches files outside the bundle)")
    return P4CompileError(f"preprocessor: {_shorten(message, MAX_MESSAGE_CHARS)}", efile,
                          int(m.group("line")), int(m.group("col") or 1))


def _write_new(directory: str, path: str, text: str) -> None:
    """Write a new regular file (never through an existing name or a symlink)."""
    full = os.path.join(directory, *path.split("/"))
    os.makedirs(os.path.dirname(full), mode=0o700, exist_ok=True)
    fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _has_control(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7f for c in text)


def _shorten(value: object, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "..."
