"""``hina-ctl --target tofino`` job commands against a P4Runtime server that holds the Tofino
compiler's P4Info, then workers aggregating through that switch.

The server is the embedded target's (``softswitch.p4runtime_server``) running
``p4/tna/hina_tna.p4`` on its TNA dataplane, pushed with the P4Info ``bf-p4c`` wrote for the
same program: the names, ids and register flavour a Tofino's server would hold (default flavour:
``pipe.``-prefixed tables, registers and counters as Tofino externs, which P4Runtime cannot
write; ``--p4runtime-force-std-externs``: unprefixed tables, standard registers). What stands in
for a Tofino: the device config (the embedded target's program, not bf-p4c's binary, whose
packing ``test_tofino_ctl.py`` checks byte for byte) and the dataplane.

Most tests push the program at ``TNA_LANES=32``: 64 words per packet, the v1model program's
smallest. That compile does not fit Tofino 1 (its PHV), but the compiler writes the P4Info after
its front end, before placing anything, so its cache entry has it. One pushes the build a
Tofino 1 takes (no defines: 16 lanes, 32 words per packet, ``hina.protocol.TNA_TOFINO1_WORDS``)
and runs a job on it. The tests read the compile cache only (``hina.tofino_build.cached_build``)
and skip, saying which command fills it, when these sources are not compiled (1.5 to 3.5 min
each).
"""
from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Optional

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


def _compiled(flavour: str, lanes: Optional[int] = LANES) -> Path:
    """The compiler's output folder (with ``p4info.bin``) of the program at ``lanes`` lanes
    (None: no defines, the Tofino 1 build)."""
    defines = {} if lanes is None else {"TNA_LANES": lanes}
    build = tofino_build.cached_build(defines=defines, p4info_externs=flavour)
    if build is None or not build.p4info_bin.exists():
        what = "with no defines (the Tofino 1 build)" if lanes is None else \
            f"with TNA_LANES={lanes}"
        command = "" if lanes is None else f" --lanes {lanes}"
        pytest.skip(f"p4/tna is not compiled {what} and a {flavour} P4Info at these sources: "
                    f"run 'python bench/bench_tofino_fit.py --target tofino{command} "
                    f"--p4info-externs {flavour}' (1.5 to 3.5 min on 2 cores; a build that "
                    "does not fit has its P4Info too, written before that shows)")
    return build.out


def _device_config(lanes: int) -> bytes:
    """The embedded target's device config of the same program (its P4Info is not pushed)."""
    return PipelineConfig(target="embedded", p4=str(HINA_TNA_P4),
                          defines={"TNA_LANES": str(lanes)}).build()[1]


@pytest.fixture
def hina_ctl(embedded_switch, tmp_path, monkeypatch, capsys):
    """``hina-ctl`` (its main, in process) against the embedded switch; a tofino push sends
    the compiler's P4Info from ``--tofino-out`` with the embedded device config of the
    program at the P4Info's lanes (its ``lane_<i>`` registers or tables)."""
    from hina.controller.jobs import program_layout
    from hina.controller.p4runtime_client import P4InfoIndex

    def build(config):
        p4info = tofino.read_p4info(config.tofino_out)
        lanes = program_layout(P4InfoIndex(p4info)).lanes
        if "TNA_LANES" in config.defines:
            assert int(config.defines["TNA_LANES"]) == lanes
        return p4info, _device_config(lanes)
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
    from hina.worker.collective import allreduce
    from hina.worker.transport import JobParams, Transport
    n = 2
    params = JobParams(job["job_id"], n, job["n_slots"], job["words"],
                       tuple(job["thc_table"]) if job["thc_table"] else None, job["generation"],
                       job["sum_saturates"])
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
    _check_state(hina_ctl)

    status, text, err = hina_ctl("job", "bump-generation", "1", "--json")
    assert (status, json.loads(text)) == (0, {"job": 1, "generation": 2}), err
    generations = [int.from_bytes(e["match"]["generation"].exact.value, "big")
                   for e in _entries(sw, admission)]
    assert generations == [2, 2]
    _allreduce(sw, {**job, "generation": 2}, lambda w: FixedPointCodec(2, rank=w), seed=2)

    status, text, err = hina_ctl("reset", "--job", "1")
    assert status == 0, err
    status, text, err = hina_ctl("state", "--job", "1", "--json")   # the bitmaps stay, unused
    assert status == 0 and json.loads(text)["chunks"] == 0, err
    assert all((p["in_use"], p["count"], p["contributors"]) == (False, 0, [])
               for s in json.loads(text)["slots"] for p in s["pools"])
    status, text, err = hina_ctl("read", "register", "HinaTnaIngress.slot_state.slot_seq",
                                 "--json")
    assert not any(json.loads(text)["values"].values())
    status, text, err = hina_ctl("read", "register", "slot_bitmap", "--index", "0",
                                 "--json")                          # a Register<pair>
    assert status == 0 and json.loads(text)["values"] == {"0": [3, 3]}, err
    status, text, err = hina_ctl("resync")
    assert (status, text.strip()) == (0, f"pipeline re-pushed to {sw.address}; 1 job(s) "
                                         "re-installed: 1"), err
    assert len(_entries(sw, admission)) == 2
    status, text, err = hina_ctl("job", "delete", "1")
    assert status == 0, err
    assert not _entries(sw, admission) and not _entries(sw, "HinaTnaEgress.replica_rewrite")
    with SwitchConnection(sw.address, election_id=2, primary=False) as conn:
        assert conn.read_multicast_groups() == {}


def _check_state(hina_ctl) -> None:
    """``hina-ctl state`` after a two-worker fixed-point all-reduce of 1500 values (24 chunks
    of 64 words and the agreement's): the TNA program's slot state, read by the compiler's
    names: every copy's newest use complete with both workers (the pair register of bitmaps,
    no count register), no overflow (no lane at a bound), and one slot's lanes."""
    status, text, err = hina_ctl("state", "--job", "1", "--json")
    assert status == 0, err
    data = json.loads(text)
    assert data["chunks"] >= 24 and (data["complete_copies"], data["filling_copies"]) == (8, 0)
    for s in data["slots"]:
        assert [(p["in_use"], p["count"], p["contributors"], p["complete"], p["overflow"])
                for p in s["pools"]] == [(True, 2, [0, 1], True, None)] * 2, s
    last = data["chunks"] - 1
    status, text, err = hina_ctl("state", "--job", "1", "--slot", str(last % 4), "--json")
    assert status == 0, err
    pool = json.loads(text)["pools"][(last // 4) % 2]
    assert (pool["seq"], pool["complete"], pool["overflow"]) == (last, True, False), pool
    assert len(pool["lanes"]) == WORDS and any(pool["lanes"])
    status, text, err = hina_ctl("state", "--job", "1", "--slot", "0")   # the table
    assert status == 0 and "0,1" in text and "2/2" in text, err


def test_jobs_with_the_compilers_default_p4info(hina_ctl, embedded_switch):
    """The default flavour (PI's): tables named pipe.HinaTnaIngress..., registers as Tofino
    externs. A job takes cells no job held since the push (zero already: nothing to write) and
    aggregates bit-exact; cells a deleted job held cannot be zeroed
    through P4Runtime: the next job is allocated around them, one given them (or a reset) is
    refused, one line saying how to go on, nothing written; after a push they are free again."""
    from hina.worker.codecs import FixedPointCodec
    sw = embedded_switch
    out = _compiled("tofino")
    p4info = tofino.read_p4info(out)
    assert not p4info.registers and "pipe.HinaTnaIngress.thc_lut.lut_31" in {
        t.preamble.name for t in p4info.tables}
    status, text, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out",
                                 str(out))
    assert status == 0 and "pi device config" in text and "tofino P4Info externs" in text, err
    job = _create(hina_ctl, sw, 1)
    assert job["words"] == WORDS
    assert len(_entries(sw, "pipe.HinaTnaIngress.admission.worker_admission")) == 2
    assert len(_entries(sw, "pipe.HinaTnaIngress.reason.worker_generation")) == 2
    _allreduce(sw, job, lambda w: FixedPointCodec(2, rank=w), seed=3)
    status, _, err = hina_ctl("state", "--job", "1")       # extern registers: not readable
    assert status == 1 and "is a Tofino extern" in err and len(err.strip().splitlines()) == 1, err
    status, text, err = hina_ctl("job", "show", "1", "--json")
    assert status == 0 and json.loads(text)["entries"] == 1 + 2 + 2 + 1 + 2 + 2

    status, _, err = hina_ctl("job", "delete", "1")
    assert status == 0, err
    assert not _entries(sw, "pipe.HinaTnaEgress.replica_rewrite")
    status, _, err = hina_ctl("job", "create", "--id", "2", "--codec", "fixed", "--slots", "4",
                              "--reg-base", "0", "--worker", sw.worker_arg(0))
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert "job 2 not created (rolled back): register pipe.HinaTnaIngress.slot_state." in err
    assert "must be zeroed" in err and "Tofino extern" in err
    assert "push the pipeline again" in err and "--p4info-externs standard" in err
    assert not _entries(sw, "pipe.HinaTnaIngress.admission.job_config")
    job = _create(hina_ctl, sw, 3, "fixed")       # allocated around the cells job 1 held
    assert (job["reg_base"], job["pair_stream_base"]) == (4, 2)
    _allreduce(sw, job, lambda w: FixedPointCodec(2, rank=w), seed=4)
    status, _, err = hina_ctl("reset", "--job", "3")
    assert status == 1 and "job 3: reset failed: register pipe.HinaTnaIngress" in err

    status, text, err = hina_ctl("resync")                # a fresh pipeline: zeroed registers
    assert status == 0 and "1 job(s) re-installed: 3" in text, err
    _create(hina_ctl, sw, 2, "fixed", "--reg-base", "0")
    assert len(_entries(sw, "pipe.HinaTnaIngress.admission.job_config")) == 2


@pytest.mark.parametrize("flavour", ["tofino", "standard"])
def test_every_entry_in_the_compilers_terms(flavour):
    """The entries of a THC job with an in-switch sketch encode in the compiler's P4Info: its
    tables (pipe. or not), actions, match fields and widths. Its 8,192 LUT entries (256 per
    lane) are too many to write through the embedded switch in a test, or even to encode (pure
    Python protobuf here: 2 ms each): the first and last of each lane's table."""
    from hina import pipeline
    from hina.controller.jobs import entry_update, program_layout
    from hina.controller.p4runtime_client import P4InfoIndex
    index = P4InfoIndex(tofino.read_p4info(_compiled(flavour)))
    assert index.pipe_prefix == ("pipe" if flavour == "tofino" else "")
    layout = program_layout(index)
    assert isinstance(layout, pipeline.TnaLayout) and layout.words == WORDS
    spec = pipeline.JobSpec(job_id=5, workers=(pipeline.WorkerAddress(1, 2, 3, 4),
                                               pipeline.WorkerAddress(2, 5, 6, 7)),
                            n_slots=4, reg_base=4, lut_id=1, sketch_columns=4096,
                            sketch_base=4096, words=WORDS)
    luts = pipeline.lut_entries(1, pipeline.THC_DEFAULT_TABLE, WORDS, layout)
    assert len(luts) == 256 * LANES
    entries = pipeline.job_entries(spec, layout) + [luts[256 * i + byte] for i in range(LANES)
                                                    for byte in (0, 255)]
    updates = [entry_update(index, "INSERT", e) for e in entries]
    tables = {index.table_names[u.entity.table_entry.table_id] for u in updates}
    prefix = "pipe." if flavour == "tofino" else ""
    assert len(updates) == 10 + 2 * LANES and len(tables) == 6 + LANES
    assert f"{prefix}HinaTnaIngress.thc_lut.lut_31" in tables
    assert f"{prefix}HinaTnaEgress.replica_rewrite" in tables


def test_bad_input_is_one_line(hina_ctl, embedded_switch, tmp_path):
    """An unknown job, a table the pushed P4Info lacks (the job is rolled back), a TNA
    register that is not in the P4Info, the v1model slot view."""
    sw = embedded_switch
    p4info = tofino.read_p4info(_compiled("standard"))
    (doomed,) = [i for i, t in enumerate(p4info.tables)
                 if t.preamble.name == "HinaTnaEgress.replica_rewrite"]
    del p4info.tables[doomed]
    lacking = tmp_path / "lacking"
    lacking.mkdir()
    (lacking / "p4info.bin").write_bytes(p4info.SerializeToString())
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out",
                              str(lacking), "--device-config-format", "stratum")
    assert status == 0, err
    for args, text in ((("job", "delete", "9"), "job 9 does not exist (jobs: none)"),
                       (("job", "bump-generation", "9"), "job 9 does not exist"),
                       (("reset", "--job", "9"), "job 9 does not exist")):
        status, _, err = hina_ctl(*args)
        assert status == 1 and text in err and len(err.strip().splitlines()) == 1, err
    status, _, err = hina_ctl("job", "create", "--id", "1", "--codec", "fixed", "--slots", "4",
                              "--worker", sw.worker_arg(0))
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert ("job 1 not created (nothing written): table 'HinaTnaEgress.replica_rewrite' is "
            "not in the P4Info") in err
    assert not _entries(sw, "HinaTnaIngress.admission.job_config")
    with SwitchConnection(sw.address, election_id=2, primary=False) as conn:
        assert conn.read_multicast_groups() == {}
    status, _, err = hina_ctl("read", "register", "HinaTnaIngress.lanes.lane_32")
    assert status == 1 and "register 'HinaTnaIngress.lanes.lane_32' is not in the Tofino" in err
    status, _, err = hina_ctl("state", "--job", "1")
    assert status == 1 and "job 1 does not exist" in err


def test_too_few_lanes_for_the_workers(hina_ctl, embedded_switch):
    """A program of fewer than 16 lanes carries fewer words per packet than the workers speak:
    job create says so, and what to push instead."""
    sw = embedded_switch
    one = tofino_build.cached_build(defines={"TNA_LANES": 1}, p4info_externs="tofino")
    if one is None or not one.p4info_bin.exists():
        pytest.skip("p4/tna is not compiled with TNA_LANES=1 and a tofino P4Info at these "
                    "sources: run 'python bench/bench_tofino_fit.py --target tofino --lanes 1 "
                    "--p4info-externs tofino' (about 1 min on 2 cores)")
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "-D", "TNA_LANES=1",
                              "--tofino-out", str(one.out))
    assert status == 0, err
    status, _, err = hina_ctl("job", "create", "--id", "1", "--codec", "fixed",
                              "--worker", sw.worker_arg(0))
    assert status == 1 and "carries 2 words per packet (two blocks of TNA_LANES=1)" in err
    assert "workers speak 32, 64, 128, 256" in err
    assert "push it with -D TNA_LANES=16 (Tofino 1's default: 32 words)" in err


def test_jobs_on_the_tofino1_build(hina_ctl, embedded_switch):
    """The build a Tofino 1 takes (p4/tna/hina_tna.p4 with no defines: 16 lanes, two blocks
    per packet, 32 words), pushed with the compiler's own P4Info of it: ``job create`` takes
    the job's 32 words from that P4Info and refuses 64 (what the TNA program carries at 32
    lanes) saying why, and block-sparse rounds (not in this build: its profile is); workers all-reduce through it at 32 words per packet, bit-exact with
    the codecs' reference: fixed point (MAX, then SUM) and THC (MAX, then LUT-SUM through the
    16 ``lut_<i>`` tables the job's create filled: 4,096 entries)."""
    from hina.worker.codecs import FixedPointCodec, ThcCodec
    sw = embedded_switch
    out = _compiled("tofino", lanes=None)
    status, text, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out",
                                 str(out))
    assert status == 0 and "tofino P4Info externs" in text, err
    status, _, err = hina_ctl("job", "create", "--id", "1", "--codec", "fixed", "--words", "64",
                              "--worker", sw.worker_arg(0))
    assert status == 1 and len(err.strip().splitlines()) == 1
    assert ("job 1: words=64, but the TNA program carries 32 words per packet (TNA_LANES=16, "
            "two blocks)") in err
    for codec, extra in (("block_sparse", ""), ("adaptive", ", or give --adaptive-choices")):
        status, _, err = hina_ctl("job", "create", "--id", "1", "--codec", codec,
                                  "--worker", sw.worker_arg(0))
        assert status == 1 and len(err.strip().splitlines()) == 1
        assert ("needs the TNA program's block-sparse profile, which the pushed build is not: "
                "push it with -D TNA_BLOCK_SPARSE=1 (it fits Tofino 1 at 16 lanes)" + extra) in err
    job = _create(hina_ctl, sw, 1)
    assert (job["words"], job["codec"]) == (P.TNA_TOFINO1_WORDS, "fixed")
    assert job["sum_saturates"]          # the job service tells its workers SUM saturates
    status, text, _ = hina_ctl("job", "show", "1")
    assert status == 0 and "saturates, sticks at an int32 bound (TNA)" in text
    _allreduce(sw, job, lambda w: FixedPointCodec(2, rank=w), seed=5)
    job = _create(hina_ctl, sw, 2, "thc")
    assert job["words"] == P.TNA_TOFINO1_WORDS and job["lut_id"] > 0
    assert len(_entries(sw, "pipe.HinaTnaIngress.thc_lut.lut_15")) == 256
    table = tuple(job["thc_table"])
    _allreduce(sw, job, lambda w: ThcCodec(2, rank=w, seed=7, table=table), seed=6)
