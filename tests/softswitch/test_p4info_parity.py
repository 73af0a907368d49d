"""P4Info parity with real p4c: for every P4 program in the repository, the P4Info the embedded
target derives (``build_p4info(compile_file(...).info)``) is the message ``p4c-bm2-ss
--p4runtime-files`` writes: the same objects in the same order, ids, aliases, annotations,
documentation and all.

Programs are found, not listed: every ``.p4`` file under ``PROGRAM_ROOTS`` that instantiates
``main``, except the ones under a ``malformed`` folder (they must not compile). A file that only
gets included (``p4/include/*.p4``) has no ``main``. p4c's output is cached on disk
(``controller.bmv2.compile_p4c``): ``hina.p4`` at its default 128 words compiles for about a minute
the first time, then not again until it changes.
"""
from __future__ import annotations

import difflib
import functools
import re
import shutil
from pathlib import Path

import pytest

from hina.controller import bmv2
from hina.softswitch.api import P4CompileError
from hina.softswitch.compiler import compile_file
from hina.softswitch.p4info import build_p4info, p4info_to_text, read_p4info_text
from hina.softswitch.p4runtime_server import Pipeline

REPO = Path(__file__).resolve().parents[2]
PROGRAM_ROOTS = ("p4", "bench", "tests")
#: Defines a program is also built with, besides its defaults (the BMv2 tests' sizes).
EXTRA_DEFINES = {"p4/hina.p4": ({"HINA_WORDS": 64},)}
_INSTANTIATES_MAIN = re.compile(r"\)\s*main\s*;")
#: Tofino programs (TNA/T2NA): tests/tofino and tests/controller/test_tofino_ctl check them
_INCLUDES_TNA = re.compile(r'^\s*#\s*include\s*[<"]t2?na\.p4[>"]', re.MULTILINE)
_EMBEDDED_XFAIL = re.compile(r"^// xfail-embedded: (.*)$", re.MULTILINE)
_DIFF_LINES = 400


def discover_programs() -> list[str]:
    """Repository-relative paths of the P4 programs (see the module docstring), sorted."""
    found = []
    for root in PROGRAM_ROOTS:
        for path in (REPO / root).rglob("*.p4"):
            rel = path.relative_to(REPO)
            if "malformed" in rel.parts:
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            if "tna" in rel.parts or _INCLUDES_TNA.search(text):
                continue
            if _INSTANTIATES_MAIN.search(text):
                found.append(rel.as_posix())
    return sorted(found)


def _builds() -> list:
    builds = []
    for program in discover_programs():
        for defines in ({},) + EXTRA_DEFINES.get(program, ()):
            label = ",".join(f"{k}={v}" for k, v in sorted(defines.items()))
            builds.append(pytest.param(program, defines, id=f"{program}[{label}]" if label else program))
    return builds


@functools.lru_cache(maxsize=None)
def _build(program: str, defines: tuple):
    """The embedded target's build of ``program``, once for both tests of a build (or the
    compile error it raised)."""
    try:
        return compile_file(REPO / program, defines=dict(defines))
    except P4CompileError as exc:
        return exc


def _compiled(program: str, defines: tuple):
    """:func:`_build`'s program. A program the embedded target cannot compile says so with
    ``// xfail-embedded: REASON`` (tests/conformance): its compile error is an xfail here, any
    other's a failure. One that it compiles but runs differently from BMv2 says so too, and its
    P4Info is still checked (no xfail, so no XPASS either)."""
    built = _build(program, defines)
    if isinstance(built, P4CompileError):
        unsupported = _EMBEDDED_XFAIL.search((REPO / program).read_text(encoding="utf-8"))
        if unsupported:
            pytest.xfail(f"{unsupported.group(1)} ({built})")
        raise built
    return built


def test_every_program_is_found():
    programs = discover_programs()
    assert {"p4/hina.p4", "bench/programs/basic.p4", "tests/golden/tables.p4",
            "tests/golden/ops.p4", "tests/softswitch/programs/l3fwd.p4",
            "tests/softswitch/programs/p4rt_cpu.p4", "tests/softswitch/programs/p4info_view.p4",
            "tests/softswitch/stf/features.p4"} <= set(programs)
    assert not [p for p in programs if "/include/" in p or "/malformed/" in p]


needs_p4c = pytest.mark.skipif(shutil.which(bmv2.P4C_BM2_SS) is None, reason=bmv2.missing() or "")


@needs_p4c
@pytest.mark.parametrize("program, defines", _builds())
def test_p4info_is_the_one_p4c_writes(program, defines):
    path = REPO / program
    expected = read_p4info_text(str(bmv2.compile_p4c(path, defines).p4info))
    derived = build_p4info(_compiled(program, tuple(sorted(defines.items()))).info)
    if derived != expected:
        diff = list(difflib.unified_diff(p4info_to_text(expected).splitlines(),
                                         p4info_to_text(derived).splitlines(),
                                         "p4c", "softswitch", lineterm=""))
        more = f"\n... {len(diff) - _DIFF_LINES} more lines" if len(diff) > _DIFF_LINES else ""
        built = f"{program} with {defines}" if defines else program
        pytest.fail(f"{built}: the softswitch's P4Info differs from p4c's:\n"
                    + "\n".join(diff[:_DIFF_LINES]) + more, pytrace=False)


@needs_p4c
@pytest.mark.parametrize("program, defines", _builds())
def test_the_p4runtime_server_takes_p4cs_p4info(program, defines):
    """A controller may push p4c's P4Info with the program: every object it names is there."""
    path = REPO / program
    p4info = read_p4info_text(str(bmv2.compile_p4c(path, defines).p4info))
    pipeline = Pipeline(p4info, b"", 0, _compiled(program, tuple(sorted(defines.items()))))
    assert set(pipeline.action_ids) == {a.preamble.name for a in p4info.actions}
