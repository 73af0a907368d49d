"""The Tofino p4_device_config packings (controller/tofino.py): golden bytes, round trips,
protobuf's own encoder as a cross-check, and a real bf-p4c output when one is cached."""

import json
import shutil
import struct
from pathlib import Path

import pytest

from hina.controller import tofino

DATA = Path(__file__).parent / "data"
#: The synthetic compile output (data/README.md): every file small enough to write out here.
OUT = DATA / "tofino_out"
NAME = b"tiny"                                           # manifest.json: tiny.p4
BFRT = b'{"schema_version": "1.0.0", "tables": []}\n'    # 42 bytes
CONTEXT = b'{"program_name": "tiny"}\n'                  # 25 bytes
BINARY = b"\x01\x00\xff\x80"


def test_data_files_are_what_the_golden_tests_spell_out():
    assert (OUT / "bf-rt.json").read_bytes() == BFRT
    assert (OUT / "pipe" / "context.json").read_bytes() == CONTEXT
    assert (OUT / "pipe" / "tofino.bin").read_bytes() == BINARY


def test_pi_device_config_of_the_data_output_golden_bytes():
    """u32le(4) 'tiny' u32le(4) 01 00 ff 80 u32le(25) context.json, written out by hand."""
    expected = (b"\x04\x00\x00\x00" + b"tiny" + b"\x04\x00\x00\x00" + b"\x01\x00\xff\x80"
                + b"\x19\x00\x00\x00" + CONTEXT)
    assert tofino.device_config_from_output(OUT, "pi") == expected
    assert expected == struct.pack("<I4sI4sI25s", 4, NAME, 4, BINARY, 25, CONTEXT)


def test_stratum_device_config_of_the_data_output_golden_bytes():
    """BfPipelineConfig in protobuf's wire format, key by key (field << 3 | 2: length-delimited):
    0x0a p4_name, 0x12 bfruntime_info, 0x1a one profile {0x0a name, 0x12 context, 0x1a binary};
    an empty pipe_scope (field 4) is not written."""
    profile = (b"\x0a\x04pipe" + b"\x12\x19" + CONTEXT + b"\x1a\x04" + BINARY)
    assert len(profile) == 6 + 27 + 6 == 0x27
    expected = b"\x0a\x04tiny" + b"\x12\x2a" + BFRT + b"\x1a\x27" + profile
    assert tofino.device_config_from_output(OUT, "stratum") == expected


@pytest.mark.parametrize("remove, message", [
    ("pipe/tofino.bin", "no tofino.bin or tofino2.bin"),
    ("bf-rt.json", "bf-rt.json: no BF Runtime schema"),
    ("manifest.json", "manifest.json: no compiler manifest"),
    ("pipe/context.json", "no <pipe>/context.json"),
])
def test_missing_file_of_the_output_is_named(tmp_path, remove, message):
    out = tmp_path / "out"
    shutil.copytree(OUT, out)
    (out / remove).unlink()
    with pytest.raises(tofino.TofinoOutputError, match=message.replace(".", r"\.")):
        tofino.device_config_from_output(out, "pi")


def test_invalid_files_of_the_output_are_named(tmp_path):
    out = tmp_path / "out"
    shutil.copytree(OUT, out)
    (out / "pipe" / "context.json").write_text("{not json")
    with pytest.raises(tofino.TofinoOutputError, match=r"context\.json: the pipeline context is "
                       "not JSON"):
        tofino.device_config_from_output(out, "stratum")
    (out / "pipe" / "context.json").write_bytes(CONTEXT)
    (out / "pipe" / "tofino.bin").write_bytes(b"")
    with pytest.raises(tofino.TofinoOutputError, match=r"tofino\.bin: the pipeline binary is empty"):
        tofino.device_config_from_output(out, "stratum")
    with pytest.raises(tofino.TofinoOutputError, match="no such folder"):
        tofino.device_config_from_output(tmp_path / "absent", "pi")
    with pytest.raises(tofino.TofinoOutputError, match="no P4Info"):
        tofino.read_p4info(OUT)
    with pytest.raises(ValueError, match="one of pi, stratum"):
        tofino.device_config_from_output(OUT, "tar")


def test_pi_packing_golden_bytes():
    blob = tofino.pi_device_config("hina", b"\x01\x02\x03", b"{}")
    assert blob == bytes.fromhex("04000000" "68696e61" "03000000" "010203" "02000000" "7b7d")


def test_pi_packing_lengths_are_little_endian_32_bit():
    binary = bytes(range(256)) * 300          # 76 800 bytes: a length over one byte
    blob = tofino.pi_device_config("hina_tna", binary, b'{"tables": []}')
    assert blob[:4] == struct.pack("<I", 8)
    assert blob[12:16] == (76800).to_bytes(4, "little") == b"\x00\x2c\x01\x00"
    assert tofino.parse_pi_device_config(blob) == ("hina_tna", binary, b'{"tables": []}')


@pytest.mark.parametrize("args", [("", b"x", b"{}"), ("p", b"", b"{}"), ("p", b"x", b"")])
def test_pi_packing_refuses_empty_parts(args):
    with pytest.raises(ValueError):
        tofino.pi_device_config(*args)


def test_pi_parse_refuses_truncated_and_trailing_bytes():
    blob = tofino.pi_device_config("p", b"bin", b"{}")
    with pytest.raises(ValueError, match="runs past the end"):
        tofino.parse_pi_device_config(blob[:-1])
    with pytest.raises(ValueError, match="after the context"):
        tofino.parse_pi_device_config(blob + b"\0")
    with pytest.raises(ValueError, match="truncated"):
        tofino.parse_pi_device_config(blob[:2])


def test_bf_pipeline_config_golden_bytes():
    profile = tofino.PipelineProfile("pipe", b"{}", b"\x00\x01", (0, 1))
    blob = tofino.bf_pipeline_config("p", b"{}", [profile])
    body = (bytes.fromhex("0a04") + b"pipe" + bytes.fromhex("12027b7d") + bytes.fromhex("1a020001")
            + bytes.fromhex("22020001"))
    assert blob == bytes.fromhex("0a0170" "12027b7d") + bytes([0x1A, len(body)]) + body


def _bf_pipeline_config_class():
    """BfPipelineConfig as Stratum's bf.proto defines it, built here as a descriptor: a check
    of hina/tofino_bf.proto (and its generated code) that does not go through it."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    try:
        from google.protobuf.message_factory import GetMessageClass
    except ImportError:  # protobuf < 4
        from google.protobuf import message_factory
        GetMessageClass = message_factory.MessageFactory().GetPrototype
    F = descriptor_pb2.FieldDescriptorProto
    fdp = descriptor_pb2.FileDescriptorProto(name="hina_test_bf.proto",
                                             package="stratum.hal.barefoot", syntax="proto3")
    msg = fdp.message_type.add(name="BfPipelineConfig")
    prof = msg.nested_type.add(name="Profile")
    for name, num, typ, label in (("profile_name", 1, F.TYPE_STRING, F.LABEL_OPTIONAL),
                                  ("context", 2, F.TYPE_BYTES, F.LABEL_OPTIONAL),
                                  ("binary", 3, F.TYPE_BYTES, F.LABEL_OPTIONAL),
                                  ("pipe_scope", 4, F.TYPE_UINT32, F.LABEL_REPEATED)):
        prof.field.add(name=name, number=num, type=typ, label=label)
    msg.field.add(name="p4_name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    msg.field.add(name="bfruntime_info", number=2, type=F.TYPE_BYTES, label=F.LABEL_OPTIONAL)
    msg.field.add(name="profiles", number=3, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                  type_name=".stratum.hal.barefoot.BfPipelineConfig.Profile")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("stratum.hal.barefoot.BfPipelineConfig"))


def test_bf_pipeline_config_matches_protobuf():
    cls = _bf_pipeline_config_class()
    profiles = [tofino.PipelineProfile("pipe", b'{"x": 1}' * 40, bytes(range(200)) * 3, (0, 1, 2, 3)),
                tofino.PipelineProfile("pipe1", b"{}", b"\x07", ())]
    blob = tofino.bf_pipeline_config("hina_tna", b'{"bf-rt": 1}', profiles)
    ref = cls(p4_name="hina_tna", bfruntime_info=b'{"bf-rt": 1}')
    for p in profiles:
        ref.profiles.add(profile_name=p.name, context=p.context, binary=p.binary,
                         pipe_scope=list(p.pipe_scope))
    assert blob == ref.SerializeToString()
    parsed = cls.FromString(blob)
    assert parsed.profiles[0].pipe_scope == [0, 1, 2, 3]
    assert parsed.profiles[1].binary == b"\x07"


def _fake_output(tmp_path, pipes=("pipe",)):
    (tmp_path / "manifest.json").write_text(json.dumps({"programs": [{"program_name": "hina_tna.p4"}]}))
    (tmp_path / "bf-rt.json").write_text('{"tables": []}')
    for pipe in pipes:
        (tmp_path / pipe).mkdir()
        (tmp_path / pipe / "context.json").write_text('{"pipe": "%s"}' % pipe)
        (tmp_path / pipe / "tofino.bin").write_bytes(b"\xAA" * 10)
    return tmp_path


def test_device_config_from_output_dir(tmp_path):
    out = _fake_output(tmp_path)
    blob = tofino.device_config_from_output(out, "pi")
    assert tofino.parse_pi_device_config(blob) == ("hina_tna", b"\xAA" * 10, b'{"pipe": "pipe"}')
    pb = _bf_pipeline_config_class().FromString(tofino.device_config_from_output(out, "stratum"))
    assert pb.p4_name == "hina_tna" and pb.bfruntime_info == b'{"tables": []}'
    assert [p.profile_name for p in pb.profiles] == ["pipe"]
    with pytest.raises(ValueError):
        tofino.device_config_from_output(out, "tar")


def test_pi_refuses_two_pipelines(tmp_path):
    out = _fake_output(tmp_path, ("pipe0", "pipe1"))
    with pytest.raises(ValueError, match="one pipeline"):
        tofino.device_config_from_output(out, "pi")
    assert len(tofino.read_compiler_output(out).profiles) == 2


def test_missing_binary_is_an_error(tmp_path):
    out = _fake_output(tmp_path)
    (out / "pipe" / "tofino.bin").unlink()
    with pytest.raises(tofino.TofinoOutputError, match="did the assembler run"):
        tofino.read_compiler_output(out)


# A parser state as bf-p4c 9.13.4 wrote p4/tna's (hina.tofino_build.PARSER_BUG): a select whose
# rows all match everything.
DEAD_ROWS_BFA = """\
parser ingress:
  states:
    parse_pass:
      *:
        next: parse_words
      *:
        next: end
"""


def test_a_parser_with_dead_rows_is_refused(tmp_path):
    """An output whose compiled parser never takes some transitions is refused, naming the
    state and the compiler bug; allow_parser_defects builds the same bytes as without them."""
    out = _fake_output(tmp_path)
    clean = {fmt: tofino.device_config_from_output(out, fmt) for fmt in tofino.FORMATS}
    (out / "pipe" / "hina_tna.bfa").write_text(DEAD_ROWS_BFA)
    for fmt in tofino.FORMATS:
        with pytest.raises(tofino.TofinoOutputError) as err:
            tofino.device_config_from_output(out, fmt)
        assert "pipe ingress parser state parse_pass: 1 of its 2 transitions are never taken" \
            in str(err.value)
        assert "#5752" in str(err.value) and "--allow-parser-defects" in str(err.value)
        assert tofino.device_config_from_output(out, fmt, allow_parser_defects=True) == clean[fmt]


def test_real_compiler_output_when_cached():
    """The TNA program's own bf-p4c output at one lane (what fits Tofino 1) with the compiler's
    P4Info, if the cache holds it (what ``hina-ctl --target tofino pipeline push -D TNA_LANES=1``
    compiles; no compile here): both formats carry its files unchanged,
    and the P4Info is the compiler's, registers as Tofino externs."""
    from hina import tofino_build
    if shutil.which("bf-p4c") is None:
        pytest.skip("bf-p4c is not installed")
    build = tofino_build.cached_build(defines=tofino_build.defines_for(1), p4info_externs="tofino")
    if build is None or not build.ok:
        pytest.skip("p4/tna at TNA_LANES=1 with its P4Info is not in the compile cache: "
                    "hina.tofino_build.compile_tna(defines=defines_for(1), "
                    "p4info_externs='tofino') fills it (about 1-2 min)")
    out = build.out
    binary = (out / "pipe" / "tofino.bin").read_bytes()
    context = (out / "pipe" / "context.json").read_bytes()
    if tofino_build.parser_defects(out):     # bf-p4c 9.13.4's parser bug: refused unless asked
        with pytest.raises(tofino.TofinoOutputError, match="never taken"):
            tofino.device_config_from_output(out, "pi")
    blob = tofino.device_config_from_output(out, "pi", allow_parser_defects=True)
    assert blob == (struct.pack("<I", 8) + b"hina_tna" + struct.pack("<I", len(binary)) + binary
                    + struct.pack("<I", len(context)) + context)
    assert json.loads(context)["program_name"] == "hina_tna"
    from hina.generated import tofino_bf_pb2
    pb = tofino_bf_pb2.BfPipelineConfig.FromString(
        tofino.device_config_from_output(out, "stratum", allow_parser_defects=True))
    assert pb.p4_name == "hina_tna"
    assert pb.bfruntime_info == (out / "bf-rt.json").read_bytes()
    assert [(p.profile_name, p.binary == binary, p.context == context) for p in pb.profiles] == \
        [("pipe", True, True)]
    p4info = tofino.read_p4info(out)
    assert not p4info.registers and not p4info.counters
    names = tofino.TofinoNames(p4info)
    lane = names.register("HinaTnaIngress.lanes.lane_0")
    assert (lane.name, lane.standard, lane.extern_type_id) == \
        ("pipe.HinaTnaIngress.lanes.lane_0", False, tofino.EXTERN_REGISTER)
    assert names.counter("HinaIngress.reason_counter").name == "pipe.HinaTnaIngress.reason_counter"
    assert names.counter("HinaIngress.job_counter").name == "pipe.HinaTnaIngress.job_counter"
