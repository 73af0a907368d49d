"""``hina-ctl --target tofino`` job commands against a P4Runtime server that holds the Tofino
compiler's P4Info, then workers aggregating through that switch.

The server is the embedded target's (``softswitch.p4runtime_server``) running
``p4/tna/hina_tna.p4`` on its TNA dataplane, pushed with the P4Info ``bf-p4c`` wrote for the
same program: the names, ids and register flavour a Tofino's server would hold (default flavour:
``pipe.``-prefixed tables, registers and counters as Tofino externs, which P4Runtime cannot
write; ``--p4runtime-force-std-externs``: unprefixed tables, standard registers). What stands in
for a Tofino: the device config (the embedded target's program, not bf-p4c's binary, whose
packing ``test_tofino_ctl.py`` checks byte for byte) and the dataplane.

The program has ``TNA_LANES=32``: 64 words per packet, the fewest the workers speak
(``hina.protocol.SUPPORTED_WORDS``). That compile does not fit Tofino 1 (its PHV), but the
compiler writes the P4Info after its front end, before placing anything, so its cache entry
has it. The tests read the compile cache only (``hina.tofino_build.cached_build``) and skip,
saying which command fills it, when these sources are not compiled (about 3.5 min each).
"""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
import torch

from hina import protocol as P
from hina import tofino_build
from hina.controller import cli, tofino
from hina.controller.p4runtime_client import SwitchConnection
from hina.controller.target import PipelineConfig
from hina.programs import HINA_TNA_P4

pytestmark = pytest.mark.skipif(shutil.which("bf-p4c") is None,
                                reason="bf-p4c (../shared/p4tools-tofino) is not installed")

LANES = 32
WORDS = 2 * LANES


def _compiled(flavour: str) -> Path:
    """The compiler's output folder (with ``p4info.bin``) of the program at ``LANES`` lanes."""
    build = tofino_build.cached_build(defines={"TNA_LANES": LANES}, p4info_externs=flavour)
    if build is None or not build.p4info_bin.exists():
        pytest.skip(f"p4/tna is not compiled with TNA_LANES={LANES} and a {flavour} P4Info at "
                    "these sources: run 'python bench/bench_tofino_fit.py --target tofino "
                    f"--lanes {LANES} --p4info-externs {flavour}' (about 3.5 min on 2 cores; "
                    "it does not fit, the P4Info is written before that shows)")
    return build.out


@pytest.fixture(scope="module")
def device_config() -> bytes:
    """The embedded target's device config of the same program (its P4Info is not pushed)."""
    return PipelineConfig(target="embedded", p4=str(HINA_TNA_P4),
                          defines={"TNA_LANES": str(LANES)}).build()[1]


@pytest.fixture
def hina_ctl(embedded_switch, device_config, tmp_path, monkeypatch, capsys):
    """``hina-ctl`` (its main, in process) against the embedded switch; a tofino push sends
    the compiler's P4Info from ``--tofino-out`` with the embedded device config."""
    def build(config):
        return tofino.read_p4info(config.tofino_out), device_config
    monkeypatch.setattr(PipelineConfig, "_build_tofino", build)

    def run(*args: str):
        status = cli.main(["--switch", embedded_switch.address, "--state",
                           str(tmp_path / "ctl.json"), "--timeout", "10", *args])
        out, err = capsys.readouterr()
        return status, out, err
    return run


def _entries(sw, table: str) -> list[dict]:
    with SwitchConnection(sw.address, election_id=2, primary=False) as conn:
        return conn.read_entries(table)


def _create(hina_ctl, sw, job_id: int, codec: str = "fixed", *extra: str) -> dict:
    status, out, err = hina_ctl("job", "create", "--id", str(job_id), "--codec", codec,
                                "--slots", "4", "--worker", sw.worker_arg(0),
                                "--worker", sw.worker_arg(1), "--json", *extra)
    assert status == 0, err
    return json.loads(out)


def _allreduce(sw, job: dict, codec_of, seed: int) -> None:
    """Two worker threads all-reduce a gradient through the switch; bit-exact with the
    codec's reference aggregation."""
    from hina.worker.codecs import reference_allreduce
    from hina.worker.transport import JobParams, Transport, allreduce
    n = 2
    params = JobParams(job["job_id"], n, job["n_slots"], job["words"],
                       tuple(job["thc_table"]) if job["thc_table"] else None, job["generation"])
    gen = torch.Generator().manual_seed(seed)
    grads = [torch.randn(1500, generator=gen) for _ in range(n)]
    links = [sw.link(sw.worker(w)) for w in range(n)]
    out, errors = [None] * n, [None] * n

    def body(w):
        try:
            transport = Transport(links[w], params, min_rto=0.05, max_rto=0.3, give_up_s=10.0)
            out[w] = allreduce(grads[w], codec_of(w), transport)
        except Exception as exc:  # noqa: BLE001 - checked below
            errors[w] = exc
    try:
        threads = [threading.Thread(target=body, args=(w,)) for w in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for link in links:
            link.close()
    assert errors == [None, None]
    want = reference_allreduce([codec_of(w) for w in range(n)], grads)
    assert all(torch.equal(out[w], want[w]) for w in range(n))


def test_job_lifecycle_with_the_compilers_standard_p4info(hina_ctl, embedded_switch):
    """Standard registers (Stratum's flavour): create zeroes the job's registers through
    RegisterEntry under the compiler's ids, installs entries and a multicast group; workers
    aggregate bit-exact; counters, bump-generation (admission re-keyed, workers go on in the
    new generation), reset, resync and delete."""
    from hina.worker.codecs import FixedPointCodec
    sw = embedded_switch
    out = _compiled("standard")
    status, text, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out",
                                 str(out), "--device-config-format", "stratum")
    assert status == 0, err
    assert "standard P4Info externs" in text
    names = tofino.TofinoNames(tofino.read_p4info(out))
    lane = names.register("HinaTnaIngress.lanes.lane_7")
    assert lane.standard and lane.name == "HinaTnaIngress.lanes.lane_7"
    # Left over in the cells the job will get: create must zero them.
    with SwitchConnection(sw.address, election_id=2) as conn:
        conn.write([conn.register_update(lane.name, 3, 77),
                    conn.register_update("HinaTnaIngress.slot_state.slot_seq", 1, 5)])
    job = _create(hina_ctl, sw, 1)
    assert (job["words"], job["reg_base"], job["generation"]) == (WORDS, 0, 1)
    for name, index in ((lane.name, 3), ("HinaTnaIngress.slot_state.slot_seq", 1)):
        status, text, err = hina_ctl("read", "register", name, "--index", str(index))
        assert (status, text) == (0, f"{name}[{index}] 0\n"), err
    admission = "HinaTnaIngress.admission.worker_admission"
    assert len(_entries(sw, admission)) == 2
    with SwitchConnection(sw.address, election_id=2, primary=False) as conn:
        groups = conn.read_multicast_groups()
    assert groups == {2: [(1, P.RID_WORKERS + 1), (2, P.RID_WORKERS + 2)]}

    _allreduce(sw, job, lambda w: FixedPointCodec(2, rank=w), seed=1)
    status, text, err = hina_ctl("counters", "--json")
    assert status == 0, err
    counters = json.loads(text)
    (row,) = counters["jobs"]
    assert row["job"] == 1 and row["packets"] > 0
    assert counters["reasons"]["STALE_GENERATION"] == 0

    status, text, err = hina_ctl("job", "bump-generation", "1", "--json")
    assert (status, json.loads(text)) == (0, {"job": 1, "generation": 2}), err
    generations = [int.from_bytes(e["match"]["generation"].exact.value, "big")
                   for e in _entries(sw, admission)]
    assert generations == [2, 2]
    _allreduce(sw, {**job, "generation": 2}, lambda w: FixedPointCodec(2, rank=w), seed=2)

    status, text, err = hina_ctl("reset", "--job", "1")
    assert status == 0, err
    status, text, err = hina_ctl("read", "register", "HinaTnaIngress.slot_state.slot_seq",
                                 "--json")
    assert not any(json.loads(text)["values"].values())
    status, text, err = hina_ctl("resync")
    assert (status, text.strip()) == (0, f"pipeline re-pushed to {sw.address}; 1 job(s) "
                                         "re-installed: 1"), err
    assert len(_entries(sw, admission)) == 2
    status, text, err = hina_ctl("job", "delete", "1")
    assert status == 0, err
    assert not _entries(sw, admission) and not _entries(sw, "HinaTnaEgress.replica_rewrite")
    with SwitchConnection(sw.address, election_id=2, primary=False) as conn:
        assert conn.read_multicast_groups() == {}
