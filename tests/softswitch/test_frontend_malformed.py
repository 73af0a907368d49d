"""Every program in ``malformed/`` is rejected with a located, readable error (never a traceback).

Each file starts with ``// expect: LINE:COL|message fragment`` (or just the fragment, for
``unsupported:`` errors, which carry file:line only).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from hina.softswitch.api import P4CompileError, P4UnsupportedError
from hina.softswitch.compiler import compile_file, compile_source

MALFORMED = Path(__file__).resolve().parent / "malformed"
CASES = sorted(MALFORMED.glob("*.p4"))


def expectation(path: Path) -> tuple:
    first = path.read_text().splitlines()[0]
    assert first.startswith("// expect:"), f"{path.name} has no '// expect:' line"
    spec = first.split("expect:", 1)[1].strip()
    loc, sep, msg = spec.partition("|")
    return (loc, msg) if sep else ("", spec)


def test_corpus_is_large_enough():
    assert len(CASES) >= 25


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_malformed_program_is_rejected_with_location(path):
    loc, msg = expectation(path)
    with pytest.raises(P4CompileError) as exc:
        compile_file(path)
    text = str(exc.value)
    if loc:
        assert text.startswith(f"{path}:{loc}: error: "), text
    else:
        assert isinstance(exc.value, P4UnsupportedError)
        assert text.startswith("unsupported: ") and f" at {path}:" in text, text
    assert msg in text


def test_error_in_included_file_points_at_that_file(tmp_path):
    (tmp_path / "inc.p4").write_text("header h_t {\n    bit<8> a;\n    bit<8> a;\n}\n")
    main = tmp_path / "main.p4"
    main.write_text('#include <core.p4>\n#include "inc.p4"\n')
    with pytest.raises(P4CompileError) as exc:
        compile_file(main)
    assert str(exc.value).startswith(f"{tmp_path / 'inc.p4'}:3:5: error: a: duplicate field")


def test_unreadable_file_is_a_compile_error(tmp_path):
    with pytest.raises(P4CompileError) as exc:
        compile_file(tmp_path / "absent.p4")
    assert "cannot read" in str(exc.value)


def test_defines_reach_the_preprocessor():
    src = ("#include <core.p4>\n#include <v1model.p4>\n"
           "#ifndef WIDTH\n#error WIDTH is required\n#endif\n")
    with pytest.raises(P4CompileError) as exc:
        compile_source(src, "d.p4")
    assert "WIDTH is required" in str(exc.value) and str(exc.value).startswith("d.p4:4:")


def test_mutated_programs_fail_cleanly():
    """Random token deletions/insertions in a valid program: a P4CompileError or success,
    never another exception (deterministic seed, so a failure reproduces)."""
    import random
    import re

    source = (Path(__file__).resolve().parent.parent / "golden" / "tables.p4").read_text()
    tokens = re.findall(r"\w+|[^\w\s]|\s+", source)
    rng = random.Random(20261121)
    inserts = ["bit<16> q;", "hdr.probe.key8 = 16w1;", "exit;", "<", ">>", "{", ";", "8w300",
               "int<8>", "apply", "error", "hdr.probe.key8;"]
    for _ in range(40):
        toks = list(tokens)
        j = rng.randrange(len(toks))
        if rng.random() < 0.5:
            del toks[j]
        else:
            toks.insert(j, rng.choice(inserts))
        try:
            compile_source("".join(toks), "mutant.p4")
        except P4CompileError:
            pass
