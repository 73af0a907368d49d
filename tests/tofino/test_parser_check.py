"""The parser the Tofino compiler emits: hina.tofino_build.parser_states / parser_defects, and
the compiler bug they catch (p4c issue #5752: selects lose their match registers, so every
transition of a select reads ``*`` and only the first is taken).

The reader is checked on assembler input written out here (no compiler needed); the compiler
itself on a probe program whose parser must branch (tests/tofino/data/select_probe.p4, about
2 s a compile) and on the cached build of p4/tna. Both are expected failures while the
installed bf-p4c has the bug (strict: a fixed compiler makes them fail until the marks go).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from hina import tofino_build

PROBE = Path(__file__).parent / "data" / "select_probe.p4"
needs_compiler = pytest.mark.skipif(shutil.which("bf-p4c") is None,
                                    reason="bf-p4c (../shared/p4tools-tofino) is not installed")
COMPILER_BUG = pytest.mark.xfail(strict=True, reason=f"bf-p4c 9.13.4: {tofino_build.PARSER_BUG}")

# As bf-p4c 9.13.4 wrote p4/tna's Tofino 1 parser (abridged): the select of parse_pass on
# (msg_type, op) lost its match registers, its four rows all read '*'.
DEAD_ROWS = """\
parser ingress:
  start: $init_match
  states:
    $init_match:
      *:
        0..3: W32  # ingress::ig_intr_md.ingress_port
        shift: 16
        next: parse_pass
    parse_pass.$split_2:
      *:
        shift: 20
        next: parse_thc_rest
      *:
        shift: 20
        next: parse_words
      *:
        # a comment between rows
        next: parse_pairs
      *:
        next: end
deparser ingress:
  dictionary:
    clot 0:
      pov: hdr.words_b.$valid
"""

# A parser that matches (as the compiler writes parser counters): a match line, a value row and
# a last row that takes the rest.
MATCHING = """\
parser egress:
  start: $entry_point.start
  states:
    $entry_point.start.$split_0:
      match: [ ctr_neg, ctr_zero ]
      option: ignore_max_depth
      0x0:
        counter: dec 11
        next: loop
      0b**:
        buf_req: 0
        next: end
    parse_ethernet:
      match: [ half ]
      0x0800:
        next: parse_ipv4
      0x**00:
        next: parse_other
      *:
        next: end
stage 0 ingress:
  table:
    *:
      next: other
"""


def _output(tmp_path: Path, bfa: str, pipe: str = "pipe") -> Path:
    (tmp_path / pipe).mkdir(parents=True, exist_ok=True)
    (tmp_path / pipe / "prog.bfa").write_text(bfa)
    return tmp_path


def test_dead_rows_are_found_and_named(tmp_path):
    out = _output(tmp_path, DEAD_ROWS)
    (defect,) = tofino_build.parser_defects(out)
    assert (defect.pipe, defect.gress, defect.state, defect.rows, defect.unreachable) == (
        "pipe", "ingress", "parse_pass.$split_2", 4, 3)
    assert str(defect) == ("pipe ingress parser state parse_pass.$split_2: 3 of its 4 "
                           "transitions are never taken (an earlier one matches everything)")
    states = {s.name: s for s in tofino_build.parser_states(out)}
    assert set(states) == {"$init_match", "parse_pass.$split_2"}       # not the deparser's
    assert states["$init_match"].rows == ("*",) and not states["$init_match"].matches


def test_a_matching_parser_has_no_defect(tmp_path):
    """Value rows before a match-everything row are fine, the last row may take the rest; the
    deparser and the stages are not parser states."""
    out = _output(tmp_path, MATCHING)
    assert tofino_build.parser_defects(out) == []
    states = tofino_build.parser_states(out)
    assert [(s.gress, s.name, s.matches, s.rows) for s in states] == [
        ("egress", "$entry_point.start.$split_0", True, ("0x0", "0b**")),
        ("egress", "parse_ethernet", True, ("0x0800", "0x**00", "*"))]


def test_every_pipe_is_read(tmp_path):
    _output(tmp_path, MATCHING, "pipe0")
    _output(tmp_path, DEAD_ROWS, "pipe1")
    assert [d.pipe for d in tofino_build.parser_defects(tmp_path)] == ["pipe1"]
    assert tofino_build.parser_defects(tmp_path / "absent") == []


@needs_compiler
@pytest.mark.parametrize("target", ["tofino", "tofino2"])
def test_the_compiler_keeps_a_probe_programs_selects(target):
    """select_probe.p4 branches on the ingress port, then on a header field: its compiled
    ingress parser must compare something (a state with a match line and two rows or more).
    With the bug no state compares anything: the start state extracts the port-68 branch's
    header for every packet. That outcome is an expected failure (it says when the installed
    compiler is fixed: the test passes); any other is a failure."""
    build = tofino_build.compile_tna(PROBE, target=target)
    assert build.ok, tofino_build.first_error(build.log)
    ingress = [s for s in tofino_build.parser_states(build.out) if s.gress == "ingress"]
    assert ingress, "no ingress parser in the .bfa"
    if not any(s.matches for s in ingress) and all(set(s.rows) == {"*"} for s in ingress):
        pytest.xfail(f"bf-p4c 9.13.4: {tofino_build.PARSER_BUG} (ingress states: "
                     f"{', '.join(s.name for s in ingress)}, none matches)")
    assert any(s.matches and len(s.rows) >= 2 for s in ingress), [
        (s.name, s.matches, s.rows) for s in ingress]


@needs_compiler
@COMPILER_BUG
def test_p4_tna_compiled_for_tofino_1_has_no_dead_parser_rows():
    """The default build of p4/tna (cached by bench/bench_tofino_fit.py): with the bug, the
    select on (msg_type, op) after a recirculation keeps its first case only, and the select
    on the ingress port is gone (every packet parsed as a recirculated one)."""
    build = tofino_build.cached_build(target="tofino")
    if build is None or not build.ok:
        pytest.skip("p4/tna is not compiled for tofino at these sources: run 'python "
                    "bench/bench_tofino_fit.py --target tofino' (1.5 to 3.5 min on 2 cores)")
    assert tofino_build.parser_defects(build.out) == []
