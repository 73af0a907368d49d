"""The P4_16 conformance corpus: small ordinary v1model programs, each exercising one feature,
run on both targets with their STF file.

* ``programs/NAME.p4`` with ``programs/NAME.stf``: the embedded target (its own compiler, the
  STF runner on an in-process dataplane) and real BMv2 (``p4c-bm2-ss``, the session's shared
  ``simple_switch_grpc`` driven by the same STF runner through
  :class:`controller.bmv2_dataplane.Bmv2Dataplane`, names taken from the P4Info p4c wrote, not
  from the embedded compiler) must both pass it. Their P4Info is also compared with p4c's by
  ``tests/softswitch/test_p4info_parity.py``, which finds every program here.
* ``malformed/NAME.p4``: programs p4c rejects. Each says where p4c reports the error in a first
  line ``// error: LINE: TEXT``; both compilers must reject it at that file and line, and the
  embedded target's message must contain TEXT.

Where the embedded target does not do what BMv2 does, the program says why in a line
``// xfail-embedded: REASON`` (strict: a case that starts passing fails until the line goes).
Where BMv2 departs from the P4_16 specification (the one case where BMv2 is not the reference),
the program states the specified behaviour and says why BMv2 fails it in a line
``// xfail-bmv2: REASON``. The feature table is in ``docs/p4-conformance.md``.

p4c takes about a second per program: the BMv2 cases' compiles run in a session fixture on
every core at once (``bmv2.compile_p4c`` caches them across sessions too).
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hina.testing.targets import bmv2_missing, close_shared_bmv2, shared_bmv2
from hina.controller import bmv2
from hina.softswitch.api import P4CompileError, P4UnsupportedError
from hina.softswitch.compiler import compile_file
from hina.softswitch.p4info import program_info_from_p4info, read_p4info_text
from hina.softswitch.stf import StfRunner

HERE = Path(__file__).resolve().parent
PROGRAMS = sorted((HERE / "programs").glob("*.p4"))
MALFORMED = sorted((HERE / "malformed").glob("*.p4"))
P4C_TIMEOUT_S = 120
BMV2_QUIET_S = 0.2
_EXPECTED_ERROR = re.compile(r"//\s*error:\s*(\d+):\s*(.*)")
#: A program p4c-bm2-ss compiles to JSON but refuses to describe in P4Info (an error naming no
#: line): ``// p4c-p4runtime: TEXT``, p4c's message with ``--p4runtime-files``.
_P4RUNTIME_ERROR = re.compile(r"^// p4c-p4runtime: (.*)$", re.MULTILINE)

#: A program the embedded target does not run as BMv2 does says why in a line of its own:
#: ``// xfail-embedded: REASON`` (``tests/softswitch/test_p4info_parity.py`` reads it too).
_EMBEDDED_XFAIL = re.compile(r"^// xfail-embedded: (.*)$", re.MULTILINE)
#: A program whose STF file states what the P4_16 specification says where BMv2 does otherwise.
_BMV2_XFAIL = re.compile(r"^// xfail-bmv2: (.*)$", re.MULTILINE)


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_bmv2():
    """The session's BMv2 switch (``hina.testing.targets.shared_bmv2``, which the first BMv2 case
    starts) goes with the session. (No conftest.py here: the tests of tests/softswitch import
    theirs as ``conftest``.)"""
    yield
    close_shared_bmv2()


@pytest.fixture(scope="session")
def p4c_builds():
    """Every program compiled by p4c, in parallel (a thread per core drives one p4c process);
    a program p4c refuses maps to the exception, raised by its own case."""
    if shutil.which(bmv2.P4C_BM2_SS) is None:
        return {}

    def build(program):
        try:
            return bmv2.compile_p4c(program, timeout=P4C_TIMEOUT_S)
        except Exception as exc:        # reported by the program's own case
            return exc

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        return dict(zip(PROGRAMS, pool.map(build, PROGRAMS)))


def _cases():
    for program in PROGRAMS:
        text = program.read_text()
        xfails = {"embedded": _EMBEDDED_XFAIL.search(text), "bmv2": _BMV2_XFAIL.search(text)}
        for kind in ("embedded", "bmv2"):
            reason = xfails[kind].group(1) if xfails[kind] else None
            marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
            yield pytest.param(program, kind, marks=marks, id=f"{program.stem}-{kind}")


def _run_stf(dataplane, program: Path):
    stf = program.with_suffix(".stf")
    return StfRunner(dataplane, filename=str(stf)).run_text(stf.read_text())


def test_every_program_has_an_stf_file():
    assert PROGRAMS, "no programs found"
    assert [p.name for p in PROGRAMS if not p.with_suffix(".stf").exists()] == []
    assert [p.name for p in MALFORMED if not _EXPECTED_ERROR.match(p.read_text())] == []
    both = [p.name for p in PROGRAMS
            if _EMBEDDED_XFAIL.search(p.read_text()) and _BMV2_XFAIL.search(p.read_text())]
    assert both == [], "a program must pass on one target at least"


@pytest.mark.parametrize("program, kind", list(_cases()))
def test_program(program, kind, request):
    if kind == "embedded":
        result = _run_stf(compile_file(str(program)).instantiate(), program)
    else:
        reason = bmv2_missing()
        if reason:
            pytest.skip(reason)
        build = request.getfixturevalue("p4c_builds").get(program) or bmv2.compile_p4c(program)
        if isinstance(build, Exception):
            raise build
        p4info = read_p4info_text(str(build.p4info))
        dataplane = shared_bmv2()
        dataplane.load(program, {}, info=program_info_from_p4info(p4info))
        # an STF packet says nothing of the frames it causes: each send waits until BMv2 is
        # quiet, longer than the shared switch's default (a loaded machine delays frames)
        quiet_s, dataplane.quiet_s = dataplane.quiet_s, max(dataplane.quiet_s, BMV2_QUIET_S)
        try:
            result = _run_stf(dataplane, program)
        finally:
            dataplane.quiet_s = quiet_s
    assert result.passed, result.report()


@pytest.mark.parametrize("program", MALFORMED, ids=lambda p: p.stem)
def test_rejected_by_both(program):
    line, text = _EXPECTED_ERROR.match(program.read_text()).groups()
    with pytest.raises(P4CompileError) as exc:
        compile_file(str(program))
    assert not isinstance(exc.value, P4UnsupportedError), str(exc.value)
    assert (Path(exc.value.file).name, exc.value.line) == (program.name, int(line)), str(exc.value)
    assert text in str(exc.value)
    if shutil.which(bmv2.P4C_BM2_SS) is None:
        pytest.skip(bmv2.missing() or "p4c-bm2-ss is missing")
    p4runtime = _P4RUNTIME_ERROR.search(program.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        extra = ["--p4runtime-files", str(Path(tmp) / "p4info.txt")] if p4runtime else []
        p4c = subprocess.run([bmv2.P4C_BM2_SS, "--arch", "v1model", "-o", str(Path(tmp) / "out.json"),
                              *extra, str(program)],
                             capture_output=True, text=True, timeout=P4C_TIMEOUT_S)
    assert p4c.returncode != 0, f"p4c accepts {program.name}"
    if p4runtime:           # p4c names no line there
        assert p4runtime.group(1) in p4c.stderr, p4c.stderr
    else:
        assert f"{program.name}({line})" in p4c.stderr, p4c.stderr


def test_table_capacity_is_bmv2s_max_size(p4c_builds):
    """A table's capacity on the embedded target is BMv2's ``max_size`` (which an STF file
    cannot check: its commands have no expected failure): for a table with ``entries`` and no
    ``size`` p4c-bm2-ss writes the number of entries, while P4Info says 1024."""
    programs = [p for p in PROGRAMS if re.search(r"\bentries\s*=", p.read_text())]
    assert programs
    if not p4c_builds:
        pytest.skip(bmv2.missing() or "p4c-bm2-ss is missing")
    compared = 0
    for program in programs:
        build = p4c_builds[program]
        if isinstance(build, Exception):
            raise build
        tables = compile_file(str(program)).instantiate().REG.tables
        for t in json.loads(build.json.read_text())["pipelines"][0]["tables"] + \
                json.loads(build.json.read_text())["pipelines"][1]["tables"]:
            if t["name"] in tables:
                assert (program.name, t["name"], tables[t["name"]].capacity) == \
                       (program.name, t["name"], t["max_size"])
                compared += 1
    assert compared >= len(programs)
