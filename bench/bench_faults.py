"""The fault and fuzz suite: prints the results table of docs/reliability.md ("Fault and fuzz
results").

Every row runs one kind of fault or fuzzed input (random bytes, malformed HINA frames, link
faults, malformed P4Runtime and job-service requests, SIGKILL of a worker, the switch or
``hina-ctl serve``) and counts what held; the rows are in :mod:`controller.faultsuite` and
:mod:`controller.faultsuite_kills`, the fuzzers and the fault-injecting link in
:mod:`hina.faults`. Seeds are fixed: the same mode gives the same inputs on every run (times
vary). The frame rows and the switch kill run on the embedded target and, where it is installed
(root, ``simple_switch_grpc``, ``p4c-bm2-ss``), on real BMv2 too.

Usage::

    python bench/bench_faults.py [--quick] [--json] [--no-bmv2] [--kills-only]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from hina.controller import faultsuite


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="small counts (what tests/faults runs)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON as well")
    ap.add_argument("--no-bmv2", action="store_true", help="skip the BMv2 rows")
    ap.add_argument("--kills-only", action="store_true",
                    help="only the kill -9 rows (controller.faultsuite_kills)")
    args = ap.parse_args(argv)
    started = time.monotonic()
    progress = (lambda r: print(f"# {r.name} [{r.target}]: {'ok' if r.ok else 'FAILED'} "
                                f"({r.seconds:.1f} s)", file=sys.stderr, flush=True))
    mode = "quick" if args.quick else "full"
    if args.kills_only:
        from hina.controller.faultsuite_kills import kill_rows
        rows = kill_rows(mode, bmv2=not args.no_bmv2, progress=progress)
    else:
        rows = faultsuite.run_suite(mode, bmv2=not args.no_bmv2, progress=progress)
    print(faultsuite.markdown(rows))
    print(f"\n{sum(r.ok for r in rows)}/{len(rows)} rows held; "
          f"{time.monotonic() - started:.0f} s in all")
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=1, default=str))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
