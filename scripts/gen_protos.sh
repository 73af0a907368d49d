#!/usr/bin/env bash
# Generate Python code for the project's own .proto files into hina/generated/ (committed: run
# this after changing a .proto; tests/controller/test_protos.py checks the two agree).
#
# Uses Debian's protoc (protobuf-compiler, 3.21.x) and grpc_python_plugin (protobuf-compiler-grpc):
# their output imports under protobuf 3.20, the version p4runtime-shell pins, while current
# grpcio-tools emits code that refuses it (see docs/controller.md). Idempotent; run by setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in protoc grpc_python_plugin; do
    if ! command -v "$tool" >/dev/null; then
        echo "gen_protos.sh: $tool not found" \
             "(apt-get install protobuf-compiler protobuf-compiler-grpc)" >&2
        exit 1
    fi
done
out=${1:-hina/generated}
mkdir -p "$out"
protoc -I hina --python_out="$out" --grpc_out="$out" \
    --plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" hina/jobservice.proto
# Messages only (no service): Stratum's Tofino device config.
protoc -I hina --python_out="$out" hina/tofino_bf.proto
# grpc_python_plugin imports its sibling module absolutely ("import jobservice_pb2"): make it
# relative so the package imports as hina.generated.
sed -i 's/^import jobservice_pb2 as /from . import jobservice_pb2 as /' \
    "$out/jobservice_pb2_grpc.py"
