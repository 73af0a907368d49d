"""What a JobSpec refuses before anything reaches a switch (hina.pipeline)."""
from __future__ import annotations

import pytest

from hina import pipeline

WORKER = pipeline.WorkerAddress(port=1, mac=0x020000000001, ip=0x0A000001, udp_port=40000)


def _job(**fields) -> pipeline.JobSpec:
    return pipeline.JobSpec(job_id=1, workers=(WORKER,), n_slots=2, reg_base=0, **fields)


def test_multicast_group_ids_stop_where_bmv2_keeps_them_for_clone_sessions():
    """BMv2's P4Runtime server answers OUT_OF_RANGE for groups from 32768 up (and the embedded
    server too: bmv2_tests/test_p4runtime_differential.py): a job says so when it is made."""
    assert _job(mcast_grp=32767).mcast_grp == 32767
    assert _job().mcast_grp == 2           # job id + 1
    for bad in (32768, 65535):
        with pytest.raises(ValueError, match=r"mcast_grp=\d+: must be an integer in "
                                             r"\[1, 32767\] .*clone sessions"):
            _job(mcast_grp=bad)
