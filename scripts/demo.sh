#!/usr/bin/env bash
# Set up (idempotent) and run the demo: 4 DDP workers train on scikit-learn's digits through the
# embedded P4 switch, once per codec and once with plain fp32 all-reduce. Extra arguments go to
# `python -m hina.demo.digits` (see --help).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m hina.demo.digits "$@"
