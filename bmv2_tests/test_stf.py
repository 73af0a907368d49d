"""The STF tests of p4/tests/ on the embedded target (softswitch.stf), default program sizes.

On BMv2 the same files run with p4c's ``backends/bmv2/run-bmv2-test.py``.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from bmv2_tests.target import HINA_P4, compile_embedded

STF_DIR = Path(__file__).resolve().parent.parent / "p4" / "tests"


@pytest.mark.parametrize("stf", sorted(STF_DIR.glob("*.stf")), ids=lambda p: p.stem)
def test_stf(stf):
    stf_mod = pytest.importorskip("softswitch.stf")
    pytest.importorskip("softswitch.compiler")
    result = stf_mod.run_stf(stf, compile_embedded(str(HINA_P4), ()))
    assert result.passed, result.report()
