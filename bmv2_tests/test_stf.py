"""The STF tests of p4/tests/ at the program's default sizes, on both targets: the embedded
target (``softswitch.stf`` on an in-process instance) and real BMv2 (the same STF runner driving
:class:`controller.bmv2_dataplane.Bmv2Dataplane`: entries over P4Runtime, registers and
counters over Thrift, packets through the veths)."""
from __future__ import annotations

from pathlib import Path

import pytest

from hina.testing.targets import HINA_P4, bmv2_missing, compile_embedded, shared_bmv2

STF_DIR = Path(__file__).resolve().parent.parent / "p4" / "tests"


@pytest.mark.parametrize("kind", ["embedded", "bmv2"])
@pytest.mark.parametrize("stf", sorted(STF_DIR.glob("*.stf")), ids=lambda p: p.stem)
def test_stf(stf, kind):
    from hina.softswitch.stf import StfRunner
    program = compile_embedded(str(HINA_P4), ())
    if kind == "embedded":
        dataplane = program.instantiate()
    else:
        reason = bmv2_missing()
        if reason:
            pytest.skip(reason)
        dataplane = shared_bmv2()
        dataplane.load(HINA_P4, {}, info=program.info)
    result = StfRunner(dataplane, filename=str(stf)).run_text(stf.read_text())
    assert result.passed, result.report()
