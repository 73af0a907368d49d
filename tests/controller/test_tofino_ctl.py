"""``hina-ctl --target tofino``: the push carries the compiler's P4Info and the device config byte
for byte, reads go by the names of the compiler's P4Info (job commands:
``test_tofino_jobs.py``).

No Tofino P4Runtime server runs here (no hardware, SDE, bf_switchd or Stratum), so the switch is
:class:`hina.testing.p4rt_record.RecordingP4Runtime`, a real local gRPC server that keeps what it
is sent and serves the counter and register values a test sets. The program is
``data/tiny_tna.p4``, compiled by the real ``bf-p4c`` (about 3 s per P4Info flavour, in a
temporary cache) through :mod:`hina.tofino_build`, as ``hina-ctl`` does for ``p4/tna``.
"""
from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest

from hina import tofino_build
from hina.controller import cli, tofino
from hina.generated import tofino_bf_pb2
from hina.testing.p4rt_record import RecordingP4Runtime

pytestmark = pytest.mark.skipif(shutil.which("bf-p4c") is None,
                                reason="bf-p4c (../shared/p4tools-tofino) is not installed")

TINY = Path(__file__).parent / "data" / "tiny_tna.p4"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """A compile cache of its own holding tiny_tna.p4 in both P4Info flavours."""
    path = tmp_path_factory.mktemp("tofino-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HINA_TOFINO_CACHE", str(path))
        builds = {flavour: tofino_build.compile_tna(TINY, p4info_externs=flavour)
                  for flavour in tofino_build.P4INFO_EXTERNS}
    for flavour, build in builds.items():
        assert build.ok, (flavour, tofino_build.first_error(build.log))
    return path, builds


@pytest.fixture
def switch():
    rec = RecordingP4Runtime.start()
    yield rec
    rec.stop()


@pytest.fixture
def hina_ctl(cache, switch, tmp_path, monkeypatch, capsys):
    """Run hina-ctl (its main, in process) against the recording switch: (status, out, err)."""
    monkeypatch.setenv("HINA_TOFINO_CACHE", str(cache[0]))

    def run(*args: str):
        status = cli.main(["--switch", switch.address, "--state", str(tmp_path / "ctl.json"),
                           "--timeout", "5", *args])
        out, err = capsys.readouterr()
        return status, out, err
    return run


def test_p4info_flavours_name_the_same_objects(cache):
    """Default flavour: TNA externs named pipe.<control>.<name>; standard: registers/counters
    named <control>.<name>. TofinoNames finds both by the names hina-ctl uses."""
    tna = tofino.read_p4info(cache[1]["tofino"].out)
    std = tofino.read_p4info(cache[1]["standard"].out)
    assert not tna.registers and not tna.counters
    assert {(e.extern_type_id, i.preamble.name) for e in tna.externs for i in e.instances
            if e.extern_type_id in (tofino.EXTERN_REGISTER, tofino.EXTERN_COUNTER)} == {
        (139, "pipe.HinaTnaIngress.lane_0"), (139, "pipe.HinaTnaIngress.slot_bitmap"),
        (131, "pipe.HinaTnaIngress.reason_counter")}
    assert sorted(r.preamble.name for r in std.registers) == [
        "HinaTnaIngress.lane_0", "HinaTnaIngress.slot_bitmap"]
    assert [c.preamble.name for c in std.counters] == ["HinaTnaIngress.reason_counter"]
    for p4info, standard in ((tna, False), (std, True)):
        names = tofino.TofinoNames(p4info)
        for asked in ("HinaIngress.reason_counter", "HinaTnaIngress.reason_counter",
                      "reason_counter"):
            assert names.counter(asked).standard is standard
        assert names.register("lane_0").id == names.register("HinaTnaIngress.lane_0").id
        with pytest.raises(tofino.P4RuntimeClientError, match="'lane_9' is not in the Tofino"):
            names.register("lane_9")


@pytest.mark.parametrize("fmt, flavour", [("pi", "tofino"), ("stratum", "standard")])
def test_push_carries_the_compiler_output_byte_for_byte(hina_ctl, switch, cache, fmt, flavour):
    """The recorded SetForwardingPipelineConfig holds the compiler's own P4Info and the device
    config packed from the compiler's files (rebuilt here from the files, not through
    controller.tofino); the format picks its P4Info flavour by default."""
    status, out, err = hina_ctl("--target", "tofino", "pipeline", "push", "--p4", str(TINY),
                                "--device-config-format", fmt)
    assert status == 0, err
    assert f"({'tofino'}, {fmt} device config" in out and f"{flavour} P4Info externs" in out
    (req,) = switch.pipelines
    build = cache[1][flavour]
    binary = (build.out / "pipe" / "tofino.bin").read_bytes()
    context = (build.out / "pipe" / "context.json").read_bytes()
    assert req.config.p4info.SerializeToString() == (build.out / "p4info.bin").read_bytes()
    blob = req.config.p4_device_config
    if fmt == "pi":
        assert blob == (struct.pack("<I", 8) + b"tiny_tna" + struct.pack("<I", len(binary))
                        + binary + struct.pack("<I", len(context)) + context)
    else:
        pb = tofino_bf_pb2.BfPipelineConfig.FromString(blob)
        assert pb.p4_name == "tiny_tna"
        assert pb.bfruntime_info == (build.out / "bf-rt.json").read_bytes()
        assert [(p.profile_name, p.binary, p.context, list(p.pipe_scope)) for p in pb.profiles] \
            == [("pipe", binary, context, [])]
        assert pb.SerializeToString() == blob         # canonical: nothing unknown or reordered
    # The state remembers how: resync pushes the same bytes again.
    status, out, err = hina_ctl("resync")
    assert status == 0, err
    assert switch.pipelines[1].config.SerializeToString() == req.config.SerializeToString()


def test_reads_go_by_the_p4info_names(hina_ctl, switch, cache):
    """Standard externs: counters and registers read with CounterEntry / RegisterEntry under the
    compiler's ids, asked for by the v1model name, the TNA name or an alias."""
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--p4", str(TINY),
                              "--device-config-format", "stratum")
    assert status == 0, err
    names = tofino.TofinoNames(tofino.read_p4info(cache[1]["standard"].out))
    switch.counters[names.counter("reason_counter").id] = {3: (0, 7), 5: (0, 2)}
    switch.registers[names.register("lane_0").id] = {0: 11, 4: 0xFFFFFFFF}
    switch.registers[names.register("slot_bitmap").id] = {2: (0b101, 0b1)}

    status, out, err = hina_ctl("read", "counter", "HinaIngress.reason_counter", "--json")
    assert status == 0, err
    assert json.loads(out)["values"] == {"3": [0, 7], "5": [0, 2]}
    status, out, err = hina_ctl("read", "register", "HinaTnaIngress.lane_0", "--index", "4")
    assert (status, out) == (0, "HinaTnaIngress.lane_0[4] 4294967295\n"), err
    status, out, err = hina_ctl("read", "register", "slot_bitmap", "--json")
    assert json.loads(out)["values"] == {"2": [5, 1]}
    ask = switch.reads[-1].entities[0].register_entry
    assert ask.register_id == names.register("slot_bitmap").id and not ask.HasField("index")

    status, out, err = hina_ctl("counters", "--json")
    assert status == 0, err
    data = json.loads(out)
    assert data["jobs"] == []
    from hina import protocol as P
    assert data["reasons"] == {r.name: {3: 7, 5: 2}.get(int(r), 0) for r in P.DropReason}

    status, _, err = hina_ctl("read", "register", "lane_9")
    assert status == 1 and "register 'lane_9' is not in the Tofino P4Info" in err


def test_extern_registers_are_refused_before_asking(hina_ctl, switch):
    """The default (PI) flavour has registers as Tofino externs, which Tofino's P4Runtime
    servers do not read: one clear line, and no Read reaches the switch."""
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--p4", str(TINY))
    assert status == 0, err
    status, _, err = hina_ctl("read", "counter", "HinaIngress.reason_counter")
    assert status == 1
    assert "pipe.HinaTnaIngress.reason_counter is a Tofino extern" in err
    assert "--p4info-externs standard" in err
    assert switch.reads == []


def test_job_commands_need_the_hina_program(hina_ctl, switch):
    """Job commands run on tofino (tests/controller/test_tofino_jobs.py), on the TNA program:
    a P4Info of another program is refused (the recording server takes no writes), and so
    ``state`` of the job it did not create."""
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--p4", str(TINY))
    assert status == 0, err
    status, _, err = hina_ctl("job", "create", "--id", "1", "--codec", "fixed",
                              "--worker", "10.0.0.1:40000")
    assert status == 1 and "the pushed program: not a HINA program" in err
    status, _, err = hina_ctl("state", "--job", "1")
    assert status == 1 and "job 1 does not exist" in err


def test_prebuilt_output_and_bad_inputs(hina_ctl, switch, cache, tmp_path):
    """--tofino-out takes a compile made elsewhere; a folder without the P4Info, a program that
    does not compile and a tofino option on another target are one-line errors."""
    out = cache[1]["standard"].out
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out", str(out),
                              "--device-config-format", "stratum")
    assert status == 0, err
    assert switch.pipelines[-1].config.p4_device_config == \
        tofino.device_config_from_output(out, "stratum")

    bare = tmp_path / "bare"
    shutil.copytree(out, bare)
    (bare / "p4info.bin").unlink()
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out", str(bare))
    assert status == 1 and "p4info.bin: no P4Info" in err

    broken = tmp_path / "broken_tiny.p4"
    broken.write_text(TINY.read_text().replace("cell = cell + hdr.word.value;",
                                               "cell = cell + true;"))
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--p4", str(broken))
    assert status == 1 and "does not compile for Tofino" in err and "broken_tiny.p4(" in err

    status, _, err = hina_ctl("--target", "embedded", "pipeline", "push",
                              "--device-config-format", "pi")
    assert status == 1 and "--device-config-format is for --target tofino" in err
    assert len(switch.pipelines) == 1


def test_a_binary_with_a_broken_parser_is_pushed_only_when_asked(hina_ctl, switch, cache,
                                                                  tmp_path):
    """A compile whose parser never takes some transitions (bf-p4c 9.13.4's bug, as in
    p4/tna's Tofino builds; hina.tofino_build.parser_defects) is refused with the state named;
    --allow-parser-defects pushes it and the state file keeps the choice (resync, serve)."""
    out = tmp_path / "out"
    shutil.copytree(cache[1]["tofino"].out, out)
    bfa = next((out / "pipe").glob("*.bfa"))
    bfa.write_text(bfa.read_text().replace("parser ingress:\n", "parser ingress:\n  states:\n"
                                           "    parse_dead:\n      *:\n        next: a\n"
                                           "      *:\n        next: b\n", 1))
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out", str(out))
    assert status == 1 and "parser state parse_dead: 1 of its 2 transitions are never " \
        "taken" in err and "--allow-parser-defects" in err
    assert switch.pipelines == []
    status, _, err = hina_ctl("--target", "tofino", "pipeline", "push", "--tofino-out", str(out),
                              "--allow-parser-defects")
    assert status == 0, err
    assert switch.pipelines[-1].config.p4_device_config == \
        tofino.device_config_from_output(out, "pi", allow_parser_defects=True)
    state = json.loads((tmp_path / "ctl.json").read_text())
    assert state["pipeline"]["allow_parser_defects"] is True
    status, _, err = hina_ctl("--target", "embedded", "pipeline", "push",
                              "--allow-parser-defects")
    assert status == 1 and "--allow-parser-defects is for --target tofino" in err

