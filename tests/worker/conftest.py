"""Shared fixtures for the worker tests."""
import pytest
import torch

from hina import programs


@pytest.fixture(autouse=True)
def _one_intra_op_thread():
    """Run each test on one torch thread: on a shared, loaded CI box the tests' small tensor ops
    are dominated by thread hand-off (measured: 27 s with 2 threads vs 0.9 s with 1 for the THC
    unbiasedness test at load 9); the previous setting is restored afterwards."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="session")
def program():
    """p4/hina.p4 compiled for the embedded target with the tests' lane count (switchjob.WORDS)."""
    from hina.softswitch.compiler import compile_file
    from hina.testing.switchjob import WORDS
    return compile_file(str(programs.HINA_P4), defines={"HINA_WORDS": str(WORDS)})


@pytest.fixture(scope="session")
def tna_program():
    """The TNA program (p4/tna/hina_tna.p4) for the embedded target's TNA dataplane at the same
    packet size: TNA_LANES = WORDS / 2 (two blocks per packet), 16 pairs per PAIRS packet."""
    from hina.softswitch.compiler import compile_file
    from hina.testing.switchjob import WORDS
    from hina import protocol as P
    return compile_file(str(programs.HINA_TNA_P4),
                        defines={"TNA_LANES": str(WORDS // 2),
                                 "HINA_PAIRS": str(P.PAIRS_PER_PACKET)})


@pytest.fixture(scope="session")
def tofino1_program():
    """The TNA program as a Tofino 1 takes it: p4/tna/hina_tna.p4 with no defines (its default
    TNA_LANES=16, two blocks per packet: 32 words, hina.protocol.TNA_TOFINO1_WORDS), for the
    embedded target's TNA dataplane."""
    from hina.softswitch.compiler import compile_file
    from hina import pipeline
    from hina import protocol as P
    program = compile_file(str(programs.HINA_TNA_P4), defines={})
    layout = pipeline.layout_for(program.info.tables)
    assert (layout.lanes, layout.words) == (P.TNA_TOFINO1_WORDS // 2, P.TNA_TOFINO1_WORDS)
    return program
