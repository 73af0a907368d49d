#!/usr/bin/env bash
# Idempotent set-up on a fresh machine: Debian packages (when root), a virtual environment in .venv
# built on the system python3 (so Debian's mininet is importable from it), and the project itself.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    need=()
    for pkg in python3-venv cpp mininet iproute2 ethtool; do
        dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
    done
    if [ ${#need[@]} -gt 0 ]; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
    fi
fi
PY=${HINA_PYTHON:-/usr/bin/python3}
command -v "$PY" >/dev/null || PY=python3
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv --system-site-packages .venv
fi
# torch first and pinned: the CPU build on disk; an unpinned torch would pull CUDA wheels.
.venv/bin/pip install -q torch==2.13.0 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/pip install -q -e ".[dev,demo]" 2>&1 | grep -v "^WARNING: Location" || true
.venv/bin/python -c "import torch, p4runtime_sh, scapy, lark" 
