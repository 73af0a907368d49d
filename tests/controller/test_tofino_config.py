"""The Tofino p4_device_config packings (controller/tofino.py): golden bytes, round trips,
protobuf's own encoder as a cross-check, and a real bf-p4c output when one is cached."""

import json
import struct

import pytest

from hina.controller import tofino


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
    """BfPipelineConfig from stratum's bf.proto, built as a descriptor (the .proto is not here)."""
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
    with pytest.raises(FileNotFoundError, match="assembler"):
        tofino.read_compiler_output(out)


def test_real_compiler_output_when_cached():
    """The TNA program's own bf-p4c output, if tests/tofino has compiled it (no compile here)."""
    from hina import tofino_build
    try:
        tofino_build.compiler()
    except tofino_build.TofinoCompilerMissing:
        pytest.skip("bf-p4c is not installed")
    key = tofino_build.build_key(tofino_build.TNA_PROGRAM, {}, "tofino")
    out = tofino_build.cache_dir() / key / "out"
    if not (out / "pipe" / "tofino.bin").exists():
        pytest.skip("the TNA program is not compiled in the cache (tests/tofino compiles it)")
    name, binary, context = tofino.parse_pi_device_config(tofino.device_config_from_output(out))
    assert name == "hina_tna"
    assert binary == (out / "pipe" / "tofino.bin").read_bytes()
    assert json.loads(context)["program_name"] == "hina_tna"
