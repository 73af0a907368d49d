"""Random v1model programs (``hina.testing.p4smith``) on the embedded target and on BMv2: the
same frames in must give the same frames out. The test suite runs five seeds
(``tests/conformance/test_differential.py``); this runs as many as asked.

    sudo .venv/bin/python bench/p4_differential.py [--seeds 100 | --minutes 10] [--first 0]
        [--frames 8] [--keep DIR]

Prints one line per differing seed (the program stays in ``--keep``, default a temporary
folder), then a summary: programs tried and per hour, disagreements (frames, registers,
counters, or a program p4c compiles and the embedded target refuses), programs p4c rejected
(generator bugs, counted apart), and the coverage of the generator's features
(``p4smith.FEATURES``: how many of the programs tried used each; a feature no program used is
named). Exits 1 when any seed differs, 2 when BMv2 cannot run here.
p4c takes about a second a program.
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
    ap.add_argument("--minutes", type=float, default=None,
                    help="run seeds until this much time has passed instead of --seeds")
    ap.add_argument("--first", type=int, default=0, help="the first seed (default 0)")
    ap.add_argument("--list", type=lambda t: [int(x) for x in t.split(",")], default=None,
                    help="run these seeds (comma-separated) instead, e.g. to rerun findings")
    ap.add_argument("--frames", type=int, default=8, help="frames per program (default 8)")
    ap.add_argument("--keep", type=Path, default=None, help="folder for the programs")
    args = ap.parse_args(argv)
    if args.seeds < 1 or args.frames < 1:
        ap.error("--seeds and --frames must be at least 1")
    if args.minutes is not None and not args.minutes > 0:
        ap.error("--minutes must be > 0")

    from hina.testing import p4diff, p4smith
    from hina.testing.targets import bmv2_missing, close_shared_bmv2, shared_bmv2
    reason = bmv2_missing()
    if reason:
        print(f"BMv2 cannot run here: {reason}")
        return 2
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="p4smith-"))
    workdir.mkdir(parents=True, exist_ok=True)
    differ, errors, rejected, crashed, started = [], [], [], [], time.monotonic()
    coverage = {f: 0 for f in p4smith.FEATURES}
    stats: dict = {}
    tried = 0
    try:
        seeds = iter(args.list) if args.list else None
        seed = args.first
        while (tried < len(args.list) if args.list else tried < args.seeds if args.minutes is None
               else time.monotonic() - started < 60 * args.minutes):
            if seeds:
                seed = next(seeds)
            dp = shared_bmv2()      # started afresh when a program stopped it
            for feature in p4smith.generate(seed).features:
                coverage[feature] += 1
            try:
                report = p4diff.differential(seed, dp, workdir, count=args.frames, stats=stats)
            except p4diff.GeneratorBug as exc:     # p4c refused it: the generator's fault
                report = f"generator bug: {str(exc).splitlines()[0][:300]}"
                rejected.append(seed)
            except p4diff.EmbeddedRefused as exc:  # p4c took it, the embedded target did not
                report = f"embedded target refused: {str(exc).splitlines()[0][:300]}"
                differ.append(seed)
            except Exception as exc:                # anything else: the harness or a target
                report = f"seed {seed}: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
                errors.append(seed)
            else:
                if report:
                    differ.append(seed)
            if not dp.switch.alive():
                crashed.append(seed)
                report = f"{report or f'seed {seed}'}\n  BMv2 stopped running this program"
            if report:
                print(report, flush=True)
            tried += 1
            seed += 1
    finally:
        close_shared_bmv2()
    seconds = time.monotonic() - started
    which = (f"seeds {args.list}" if args.list
             else f"seeds {args.first}..{args.first + tried - 1}")
    print(f"{tried} programs ({which}) in {seconds:.0f} s, "
          f"{3600 * tried / max(seconds, 1e-9):.0f} per hour, {args.frames} frames each: "
          f"{len(differ)} differ {differ}, {len(rejected)} rejected by p4c (generator bugs) "
          f"{rejected}, {len(errors)} raised {errors}, BMv2 stopped on {crashed}; "
          f"programs in {workdir}")
    print(f"frames compared {stats.get('frames', 0)}, not observable on BMv2's veths "
          f"{stats.get('unobservable', 0)} (an output shorter than {p4smith.MIN_FRAME} bytes, "
          f"or than {p4smith.MIN_VLAN_FRAME} with a VLAN type), register and counter cells "
          f"compared "
          f"{stats.get('cells', 0)}, digests compared {stats.get('digests', 0)} (repeats BMv2 "
          f"dropped, not yet acknowledged: {stats.get('digest repeats BMv2 dropped', 0)})")
    print("coverage (programs that used the feature):")
    for feature, count in coverage.items():
        print(f"  {feature:<38} {count:>6}  {100 * count / max(tried, 1):5.1f} %")
    unused = [f for f, c in coverage.items() if not c]
    print("every feature used" if not unused else f"features no program used: {unused}")
    return 1 if differ or errors or rejected else 0


if __name__ == "__main__":
    sys.exit(main())
