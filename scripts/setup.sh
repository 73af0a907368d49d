#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: Debian packages (when root), a virtual environment in .venv
# built on the system python3 (so Debian's mininet is importable from it), and the project itself.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    need=()
    # g++: the opt-in native THC kernels (ThcCodec(compiled=True)); everything else works without it
    for pkg in python3-venv cpp g++ mininet iproute2 ethtool nftables protobuf-compiler protobuf-compiler-grpc; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
fi
# The P4 reference toolchain (p4c-bm2-ss, simple_switch_grpc, simple_switch_CLI), prebuilt beside
# the project where it is shared (CI): the BMv2 tests then run for real instead of skipping.
# Elsewhere, install p4lang's p4c and behavioral-model yourself, or the BMv2 tests skip.
P4TOOLS=${HINA_P4TOOLS:-../shared/p4tools}
if [ "$(id -u)" = 0 ] && [ -f "$P4TOOLS/install.sh" ]; then
    bash "$P4TOOLS/install.sh" >/dev/null
fi
# The Tofino compiler (bf-p4c: p4c's open-source Tofino back end), prebuilt beside the project
# where it is shared: tests/tofino then check p4/tna/ with the real compiler instead of skipping
# (the fit is read from the compile cache that bench/bench_tofino_fit.py fills).
P4TOOLS_TOFINO=${HINA_P4TOOLS_TOFINO:-../shared/p4tools-tofino}
if [ "$(id -u)" = 0 ] && [ -f "$P4TOOLS_TOFINO/install.sh" ]; then
    bash "$P4TOOLS_TOFINO/install.sh" >/dev/null
fi
PY=${HINA_PYTHON:-/usr/bin/python3}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv --system-site-packages .venv
fi
# torch first and pinned: the CPU build on disk; an unpinned torch would pull CUDA wheels.
# (pip's failures still fail the script: only its noise about absent local index folders is cut.)
pip_install() { .venv/bin/pip install -q "$@" 2>&1 | { grep -v "^WARNING: Location" || true; }; }
pip_install torch==2.13.0
pip_install -e ".[dev,demo]"
.venv/bin/python -c "import torch, p4runtime_sh, scapy, lark, grpc, rich, sklearn, hina.generated.jobservice_pb2"
