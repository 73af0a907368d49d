"""Does p4/tna/hina_tna.p4 fit a Tofino? Compile it and print what the compiler says it used.

Every figure comes from the compiler's own output (bf-p4c's pipe/logs/resources.json and
phv.json, read by hina.tofino_build): stages, SRAM and TCAM blocks, stateful ALUs, PHV
containers, lanes per pass (stateful ALUs bound to lane registers), payload words per packet
(32-bit payload fields in ingress PHV, or on Tofino 2 whole in a CLOT), and the parser
transitions the emitted parser can never take (hina.tofino_build.parser_defects: the compiler
bug PARSER_BUG, which makes a binary that parses every packet down one path). Compiles are
cached by source hash (hina.tofino_build), so a second run is instant; the compile time shown is
that of the compile that made the entry.

    python bench/bench_tofino_fit.py                       # Tofino 1 and 2, default lanes
    python bench/bench_tofino_fit.py --target tofino --lanes 1 8 16 32   # growth steps
    python bench/bench_tofino_fit.py --target tofino --lanes 32 -D HINA_PAIRS=16 \
        --p4info-externs standard        # the P4Info tests/controller/test_tofino_jobs.py reads
    python bench/bench_tofino_fit.py --target tofino --block-sparse --lanes 8 16  # the profile

Needs bf-p4c: bash ../shared/p4tools-tofino/install.sh (as root).
"""
from __future__ import annotations

import argparse
import sys

from hina import tofino_build as tb

#: The block-sparse profile's define (p4/tna/hina_tna.p4).
BLOCK_SPARSE = {"TNA_BLOCK_SPARSE": 1}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", nargs="+", default=["tofino", "tofino2"],
                        choices=sorted(tb.TARGETS))
    parser.add_argument("--lanes", nargs="+", type=int, default=[None],
                        help="TNA_LANES values (default: the program's own)")
    parser.add_argument("--block-sparse", action="store_true",
                        help="the block-sparse profile (-DTNA_BLOCK_SPARSE=1)")
    parser.add_argument("--no-cache", action="store_true", help="compile even if cached")
    parser.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME=VALUE",
                        help="another preprocessor define (repeatable), e.g. -D HINA_PAIRS=16")
    parser.add_argument("--p4info-externs", choices=sorted(tb.P4INFO_EXTERNS), default=None,
                        help="also write the P4Info in this flavour (hina-ctl --target tofino's "
                             "compiles; the compiler writes it after its front end, so a compile "
                             "that does not fit has one too)")
    args = parser.parse_args(argv)
    try:
        tb.compiler()
    except tb.TofinoCompilerMissing as exc:
        print(exc, file=sys.stderr)
        return 2
    rows = []
    for target in args.target:
        for lanes in args.lanes:
            defines = {} if lanes is None else {"TNA_LANES": lanes}
            if args.block_sparse:
                defines.update(BLOCK_SPARSE)
            defines.update(d.partition("=")[::2] for d in args.defines)
            build = tb.compile_tna(target=target, defines=defines, use_cache=not args.no_cache,
                                   p4info_externs=args.p4info_externs)
            rows.append((target, lanes, build))
            print(f"# {target} TNA_LANES={lanes or 'default'}: exit {build.returncode}, "
                  f"{build.seconds:.0f} s{' (cached)' if build.cached else ''}, {build.out}",
                  file=sys.stderr)
    print("| target | TNA_LANES | result | stages | SRAM blocks | TCAM blocks | stateful ALUs "
          "| lanes per pass | words per packet | PHV containers (ingress / egress) "
          "| dead parser transitions | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    dead_any = False
    for target, lanes, build in rows:
        label = "default" if lanes is None else str(lanes)
        if args.block_sparse:
            label += ", TNA_BLOCK_SPARSE=1"
        placed = (build.out / "pipe" / "logs" / "resources.json").exists()
        if not build.ok and not placed:
            why = f"compile error: {tb.first_error(build.log) or 'see ' + str(build.path)}"
            print(f"| {target} | {label} | {why} | | | | | | | | | {build.seconds:.0f} |")
            continue
        # A program placed in more stages than the chip has is refused by the assembler, but
        # the compiler's resources.json still says what it used: print it.
        r = build.resources()
        why = (tb.first_error(build.log) or "?").rsplit("error:", 1)[-1].strip()
        if build.ok:
            result = "fits"
        elif tb.assembler_stage_error(build.log):
            result = "does not fit (assembler: too many stages)"
        elif r.stages_used == 0:
            result = f"does not fit ({why})"
        else:
            result = f"placed; the assembler failed ({why})"
        ing = sum(n for k, n in r.phv_containers.items() if k.startswith("ingress"))
        egr = sum(n for k, n in r.phv_containers.items() if k.startswith("egress"))
        dead = sum(d.unreachable for d in tb.parser_defects(build.out))
        dead_any = dead_any or dead > 0
        print(f"| {target} | {label} | {result} | {r.stages_used} of {r.stages_available} "
              f"| {r.srams} | {r.tcams} | {r.stateful_alus} of {r.stateful_alus_available} "
              f"| {r.lanes} | {r.words_per_packet} | {ing} / {egr} | {dead} "
              f"| {build.seconds:.0f} |")
    if dead_any:
        print(f"\nDead parser transitions: {tb.PARSER_BUG}. The figures are the placement's; "
              "such a binary parses every packet down one path (hina-ctl refuses to push it "
              "without --allow-parser-defects).")
    return 0 if all(b.ok for _, _, b in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
