"""The generated job-service code matches hina/jobservice.proto and runs beside p4runtime."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ROOT / "hina" / "generated"


@pytest.mark.skipif(shutil.which("protoc") is None or shutil.which("grpc_python_plugin") is None,
                    reason="protoc / grpc_python_plugin not installed")
def test_generated_code_is_current(tmp_path):
    """scripts/gen_protos.sh output for the .proto as it is now equals what is installed."""
    copy = tmp_path / "repo"
    (copy / "hina" / "generated").mkdir(parents=True)
    for proto in ("jobservice.proto", "tofino_bf.proto"):
        shutil.copy(ROOT / "hina" / proto, copy / "hina")
    (copy / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "gen_protos.sh", copy / "scripts")
    subprocess.run(["bash", str(copy / "scripts" / "gen_protos.sh")], check=True)
    for name in ("jobservice_pb2.py", "jobservice_pb2_grpc.py", "tofino_bf_pb2.py"):
        assert (copy / "hina" / "generated" / name).read_text() == \
            (GENERATED / name).read_text(), f"{name} is stale: run scripts/gen_protos.sh"


def test_generated_code_imports_beside_p4runtime_shell():
    import google.protobuf
    import p4runtime_sh.shell  # noqa: F401  (the protobuf pin's reason)
    from hina.generated import jobservice_pb2
    assert google.protobuf.__version__.startswith("3.20")
    reply = jobservice_pb2.JoinReply(worker_index=2)
    assert jobservice_pb2.JoinReply.FromString(reply.SerializeToString()).worker_index == 2
