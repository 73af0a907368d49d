"""Where HINA's P4 programs are, in the checkout and installed alike.

The programs live in ``p4/`` at the top of the checkout (beside this package); a wheel installs
the same files as package data under ``hina/p4/`` (``pyproject.toml`` maps ``hina.p4`` to
``p4/``). ``p4/`` is deliberately not a Python package: the name ``p4`` belongs to p4runtime's
generated protobuf modules (``p4.v1``, ``p4.config.v1``), which a ``p4/__init__.py`` in the
checkout would hide.
"""
from __future__ import annotations

from pathlib import Path

_HERE = Path(__file__).resolve().parent


def _find_p4_dir() -> Path:
    for candidate in (_HERE / "p4", _HERE.parent / "p4"):    # installed, then the checkout
        if (candidate / "hina.p4").is_file():
            return candidate
    return _HERE / "p4"     # nothing found: paths below name where an install puts them


#: the folder of the P4 programs (``p4/`` in the checkout, ``hina/p4/`` when installed)
P4_DIR = _find_p4_dir()
#: the aggregation program for v1model (BMv2 and the embedded target)
HINA_P4 = P4_DIR / "hina.p4"
#: its include folder (one file per concern)
P4_INCLUDE = P4_DIR / "include"
#: the STF tests of the program
P4_STF_DIR = P4_DIR / "tests"
#: the aggregation program for Tofino (TNA; bf-p4c, and the embedded target's TNA dataplane)
HINA_TNA_P4 = P4_DIR / "tna" / "hina_tna.p4"

#: the aggregation programs by name: ``v1model`` (p4/hina.p4, BMv2 and the embedded target) and
#: ``tna`` (the TNA program: bf-p4c, and the embedded target's TNA dataplane)
PROGRAMS = {"v1model": HINA_P4, "tna": HINA_TNA_P4}
#: Words per packet the TNA program is built for on the embedded target (Mininet, the demos):
#: two blocks of ``TNA_LANES`` 16 (Tofino 1's build) or 32 (the program's most), of the words
#: workers speak (``hina.protocol.WORKER_WORDS``).
TNA_WORDS = (32, 64)


def program_defines(program: str, words: int) -> dict[str, str]:
    """The defines that build ``program`` (:data:`PROGRAMS`) for ``words`` words per packet:
    ``HINA_WORDS`` of p4/hina.p4; ``TNA_LANES`` of the TNA program, whose packets carry two
    blocks of lanes."""
    if program not in PROGRAMS:
        raise ValueError(f"program {program!r}: one of {tuple(PROGRAMS)}")
    return {"HINA_WORDS": str(words)} if program == "v1model" else {"TNA_LANES": str(words // 2)}


def embedded_defines(program: str, words: int) -> dict[str, str]:
    """:func:`program_defines` plus what makes the TNA program carry every operation of the
    v1model program on the embedded target (which has no stage budget): its block-sparse
    profile (``TNA_BLOCK_SPARSE=1``) and ``hina.protocol.PAIRS_PER_PACKET`` pairs per PAIRS packet (``HINA_PAIRS``, as
    p4/hina.p4);
    the Tofino builds choose these by what fits (docs/dataplane.md, "Tofino (TNA)")."""
    from hina import protocol as P
    defines = program_defines(program, words)
    if program == "tna":
        defines.update(TNA_BLOCK_SPARSE="1", HINA_PAIRS=str(P.PAIRS_PER_PACKET))
    return defines
