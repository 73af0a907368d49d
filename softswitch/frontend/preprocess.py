"""The C preprocessor step, run the way p4c runs it, and the line map back to original files.

p4c runs ``cpp -C -undef -nostdinc -x assembler-with-cpp -I<p4include>``; we do the same without
``-C`` (comments are dropped; the lexer would skip them anyway) and keep cpp's line markers
(``# N "file"``) so that every diagnostic points at the original file, line and column.

cpp runs under the limits of :mod:`.cpp_sandbox` (memory, CPU, output size, wall clock, its own
process group). Programs pushed over P4Runtime are preprocessed by :mod:`.bundle` instead, which
also confines their includes.
"""
from __future__ import annotations

import os
import re
import shutil
from typing import Iterable, Mapping, Optional

from ..api import P4CompileError
from .cpp_sandbox import DEFAULT_LIMITS, CppLimits, run_limited

P4INCLUDE_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "p4include")
_LINEMARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:[^"\\]|\\.)*)"')
_CPP_ERROR = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?:(?P<col>\d+):)?\s*(?:fatal )?error:\s*(?P<msg>.*)$",
                        re.M)


def cpp_command(include_dirs: Iterable[str] = (), defines: Optional[Mapping[str, object]] = None) -> list:
    cpp = shutil.which("cpp")
    if cpp is None:
        raise P4CompileError("the C preprocessor 'cpp' is not installed", "<cpp>", 0, 0)
    cmd = [cpp, "-undef", "-nostdinc", "-x", "assembler-with-cpp"]
    for d in include_dirs:
        cmd.append(f"-I{d}")
    cmd.append(f"-I{P4INCLUDE_DIR}")
    for key, value in (defines or {}).items():
        cmd.append(f"-D{key}" if value is None else f"-D{key}={value}")
    return cmd


def run_cpp(text: str, filename: str, include_dirs: Iterable[str] = (),
            defines: Optional[Mapping[str, object]] = None,
            limits: CppLimits = DEFAULT_LIMITS) -> str:
    """Preprocess ``text`` (the contents of ``filename``); returns cpp's output with line markers.

    The directory of ``filename`` comes first on the include path: use this for files of the
    local checkout only (a pushed program goes through :func:`.bundle.preprocess_bundle`).

    Raises:
        CppLimitError: cpp hit a limit of ``limits`` (its process group is killed).
        P4CompileError: cpp failed (missing include, bad directive), located at the line cpp names.
    """
    dirs = list(include_dirs)
    base = os.path.dirname(os.path.abspath(filename)) if not filename.startswith("<") else None
    if base:
        dirs.insert(0, base)
    result = run_limited(cpp_command(dirs, defines), text.encode("utf-8"), filename, limits=limits)
    stderr = result.stderr.decode("utf-8", "replace")
    if result.returncode != 0:
        m = _CPP_ERROR.search(stderr)
        if m:
            efile = filename if m.group("file") == "<stdin>" else m.group("file")
            raise P4CompileError(f"preprocessor: {m.group('msg').strip()}", efile,
                                 int(m.group("line")), int(m.group("col") or 1))
        raise P4CompileError(f"preprocessor failed: {stderr.strip()}", filename, 0, 0)
    return name_stdin(result.stdout.decode("utf-8", "replace"), filename)


def name_stdin(text: str, filename: str) -> str:
    """cpp read stdin: name the real file in its line markers."""
    quoted = filename.replace("\\", "\\\\").replace('"', '\\"')
    return text.replace('"<stdin>"', f'"{quoted}"')


class LineMap:
    """Maps a line of preprocessed text to (original file, original line)."""

    def __init__(self, text: str, default_file: str):
        self._map: list = [(default_file, 1)]       # index: preprocessed line number (1-based)
        cur_file, cur_line = default_file, 1
        for raw in text.split("\n"):
            m = _LINEMARKER.match(raw)
            if m:
                self._map.append((cur_file, cur_line))
                cur_line, cur_file = int(m.group(1)), m.group(2)
                continue
            self._map.append((cur_file, cur_line))
            cur_line += 1

    def last_line(self, file: str) -> int:
        """The last line of ``file`` that reached the parser (for end-of-program errors)."""
        lines = [ln for f, ln in self._map if f == file]
        return max(lines) if lines else 1

    def locate(self, line: int) -> tuple:
        if 0 < line < len(self._map):
            return self._map[line]
        return self._map[-1] if self._map else ("<input>", line)


def has_line_markers(text: str) -> bool:
    return any(_LINEMARKER.match(line) for line in text.split("\n", 50)[:50])
