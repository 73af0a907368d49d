"""Random v1model programs (``hina.testing.p4smith``) on the embedded target and on BMv2: the
same frames in must give the same frames out. The test suite runs five seeds
(``tests/conformance/test_differential.py``); this runs as many as asked.

    sudo .venv/bin/python bench/p4_differential.py [--seeds 100] [--first 0] [--frames 8]
        [--keep DIR]

Prints one line per differing seed (the program stays in ``--keep``, default a temporary
folder) and a summary; exits 1 when any seed differs, 2 when BMv2 cannot run here. p4c takes
about a second a program.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=100, help="how many seeds (default 100)")
    ap.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--frames", type=int, default=8, help="frames per program (default 8)")
    ap.add_argument("--keep", type=Path, default=None, help="folder for the programs")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.frames < 1:
        ap.error("--seeds and --frames must be at least 1")

    from hina.testing import p4smith
    from hina.testing.targets import bmv2_missing, close_shared_bmv2, shared_bmv2
    reason = bmv2_missing()
    if reason:
        print(f"BMv2 cannot run here: {reason}")
        return 2
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="p4smith-"))
    workdir.mkdir(parents=True, exist_ok=True)
    differ, errors, started = [], [], time.monotonic()
    try:
        dp = shared_bmv2()
        for seed in range(args.first, args.first + args.seeds):
            try:
                report = p4smith.differential(seed, dp, workdir, count=args.frames)
            except Exception as exc:           # a compiler refusing the program is a finding
                report = f"seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                errors.append(seed)
            if report:
                print(report, flush=True)
                if seed not in errors:
                    differ.append(seed)
    finally:
        close_shared_bmv2()
    print(f"{args.seeds} seeds from {args.first}: {len(differ)} differ {differ}, "
          f"{len(errors)} raised {errors}, {time.monotonic() - started:.0f} s; programs in {workdir}")
    return 1 if differ or errors else 0


if __name__ == "__main__":
    sys.exit(main())
