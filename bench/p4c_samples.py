"""p4c's own STF test programs (``NAME.p4`` + ``NAME.stf``, e.g. p4c's
``testdata/p4_16_samples/*-bmv2.p4``) on the embedded target and on real BMv2: an external check of
issue #17 ("any ordinary v1model program, same names, same bytes"). The programs are kept outside
the repository; point this at their folder.

    sudo .venv/bin/python bench/p4c_samples.py FOLDER [--timeout 60] [--only SUBSTRING]
        [--embedded-only] [--verbose]

Each program runs on the embedded target (``compile_file(...).instantiate()`` and the STF runner,
in a child process so a hang or crash costs one program) and on BMv2 (``p4c-bm2-ss``, the shared
``simple_switch_grpc``, names from p4c's P4Info, the same STF runner), each with a per-program
timeout. Prints one line per program, then: programs, passed on each target, passed on both,
programs p4c rejects, the embedded compiler's refusals grouped by message, STF failures per
target, and the gaps (BMv2 passes, the embedded target does not). Exits 0.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import re
import sys
import threading
import time
import traceback
from collections import Counter
from pathlib import Path

BMV2_QUIET_S = 0.2


def _first_line(text: str, limit: int = 160) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line[:limit]


def _embedded_child(p4: str, stf: str, queue) -> None:
    from hina.softswitch.api import P4CompileError
    from hina.softswitch.compiler import compile_file
    from hina.softswitch.stf import StfRunner
    try:
        dataplane = compile_file(p4).instantiate()
    except P4CompileError as exc:
        queue.put(("refused", str(exc)))
        return
    except Exception as exc:                # a compiler crash is a refusal too, named apart
        queue.put(("refused", f"crash: {type(exc).__name__}: {exc}"))
        return
    try:
        result = StfRunner(dataplane, filename=stf).run_text(Path(stf).read_text())
    except Exception as exc:
        queue.put(("fail", f"crash: {type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        return
    queue.put(("pass", "") if result.passed else ("fail", result.report()))


def run_embedded(p4: Path, timeout: float) -> tuple[str, str]:
    """('pass'|'fail'|'refused'|'timeout', detail) for one program on the embedded target."""
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    proc = ctx.Process(target=_embedded_child, args=(str(p4), str(p4.with_suffix(".stf")), queue))
    proc.start()
    deadline = time.monotonic() + timeout
    outcome = None
    while outcome is None:
        try:
            outcome = queue.get(timeout=0.5)
        except Exception:               # queue.Empty: still running, or gone without a word
            if not proc.is_alive() and queue.empty():
                outcome = ("fail", f"crash: the child process ended with {proc.exitcode}")
            elif time.monotonic() > deadline:
                outcome = ("timeout", f"no result in {timeout:.0f} s")
    proc.join(5)
    if proc.is_alive():
        proc.kill()
        proc.join()
    return outcome


def run_bmv2(p4: Path, timeout: float) -> tuple[str, str]:
    """('pass'|'fail'|'p4c'|'timeout', detail) for one program on BMv2."""
    from hina.controller import bmv2
    from hina.testing.targets import close_shared_bmv2
    try:
        build = bmv2.compile_p4c(p4, timeout=timeout)       # cached by compile_all
    except Exception as exc:
        return "p4c", str(exc)
    outcome = _run_bmv2_once(p4, build, timeout)
    if outcome[0] == "fail" and outcome[1].startswith("crash: P4RuntimeClientError"):
        close_shared_bmv2()             # a switch that stopped answering: once more, afresh
        outcome = _run_bmv2_once(p4, build, timeout)
    return outcome


def compile_all(programs: list[Path], timeout: float) -> None:
    """p4c on every program first, a thread per core (``compile_p4c`` caches the builds): no
    p4c process is forked while the P4Runtime client's threads run."""
    import os
    from concurrent.futures import ThreadPoolExecutor
    from hina.controller import bmv2

    def build(p4):
        try:
            bmv2.compile_p4c(p4, timeout=timeout)
        except Exception:
            pass                        # reported by run_bmv2

    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        list(pool.map(build, programs))


def _run_bmv2_once(p4: Path, build, timeout: float) -> tuple[str, str]:
    from hina.softswitch.p4info import program_info_from_p4info, read_p4info_text
    from hina.softswitch.stf import StfRunner
    from hina.testing.targets import close_shared_bmv2, shared_bmv2
    box: list = []

    def work():
        try:
            info = program_info_from_p4info(read_p4info_text(str(build.p4info)))
            dataplane = shared_bmv2()
            dataplane.load(p4, {}, info=info)
            quiet_s, dataplane.quiet_s = dataplane.quiet_s, max(dataplane.quiet_s, BMV2_QUIET_S)
            try:
                stf = p4.with_suffix(".stf")
                result = StfRunner(dataplane, filename=str(stf)).run_text(stf.read_text())
            finally:
                dataplane.quiet_s = quiet_s
            box.append(("pass", "") if result.passed else ("fail", result.report()))
        except Exception as exc:
            box.append(("fail", f"crash: {type(exc).__name__}: {exc}"))

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        close_shared_bmv2()             # the next program starts a fresh switch
        return "timeout", f"no result in {timeout:.0f} s"
    return box[0]


def _refusal_group(detail: str) -> str:
    """A refusal's message without its place and names that vary from program to program."""
    text = _first_line(detail, 400)
    text = re.sub(r"^.*?\.p4:\d+(:\d+)?:\s*", "", text)     # file:line:
    text = re.sub(r"'[^']*'", "'…'", text)
    return text[:120]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("folder", type=Path, help="folder of NAME.p4 with NAME.stf")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds per program and target (default 60)")
    ap.add_argument("--only", default=None, help="run only programs whose name contains this")
    ap.add_argument("--embedded-only", action="store_true",
                    help="skip BMv2 (gaps then cannot be told)")
    ap.add_argument("--verbose", action="store_true", help="print each failure's report")
    args = ap.parse_args(argv)

    programs = sorted(p for p in args.folder.glob("*.p4") if p.with_suffix(".stf").exists())
    if args.only:
        programs = [p for p in programs if args.only in p.name]
    if not programs:
        print(f"no NAME.p4 with NAME.stf in {args.folder}", file=sys.stderr)
        return 2
    bmv2_reason = None
    if not args.embedded_only:
        from hina.testing.targets import bmv2_missing
        bmv2_reason = bmv2_missing()
        if bmv2_reason:
            print(f"BMv2 cannot run here: {bmv2_reason}; embedded target only", file=sys.stderr)
    use_bmv2 = not args.embedded_only and not bmv2_reason

    results: dict[str, dict[str, tuple[str, str]]] = {}
    start = time.monotonic()
    try:
        # every embedded run first: its children are forked, and a fork while gRPC's threads
        # (BMv2's P4Runtime client) run breaks the client
        embedded = {p4.stem: run_embedded(p4, args.timeout) for p4 in programs}
        print(f"embedded target: {len(programs)} programs run", file=sys.stderr, flush=True)
        if use_bmv2:
            compile_all(programs, args.timeout)
        for p4 in programs:
            emb = embedded[p4.stem]
            bm = run_bmv2(p4, args.timeout) if use_bmv2 else ("skipped", "")
            results[p4.stem] = {"embedded": emb, "bmv2": bm}
            print(f"{p4.stem:50s} embedded={emb[0]:8s} bmv2={bm[0]}", flush=True)
            if args.verbose:
                for kind, (status, detail) in (("embedded", emb), ("bmv2", bm)):
                    if status not in ("pass", "skipped"):
                        print("    " + kind + ": " + "\n    ".join(detail.strip().splitlines()[:12]))
    finally:
        if use_bmv2:
            from hina.testing.targets import close_shared_bmv2
            close_shared_bmv2()

    n = len(results)
    emb_pass = [k for k, r in results.items() if r["embedded"][0] == "pass"]
    bm_pass = [k for k, r in results.items() if r["bmv2"][0] == "pass"]
    both = [k for k in emb_pass if k in bm_pass]
    p4c_rejects = [k for k, r in results.items() if r["bmv2"][0] == "p4c"]
    refusals = Counter(_refusal_group(r["embedded"][1]) for r in results.values()
                       if r["embedded"][0] == "refused")
    gaps = [k for k in bm_pass if k not in emb_pass]
    print()
    print(f"folder: {args.folder}  ({time.monotonic() - start:.0f} s)")
    print(f"programs:               {n}")
    print(f"passed on embedded:     {len(emb_pass)} ({100 * len(emb_pass) / n:.0f}%)")
    if use_bmv2:
        print(f"passed on BMv2:         {len(bm_pass)} ({100 * len(bm_pass) / n:.0f}%)")
        print(f"passed on both:         {len(both)}")
        print(f"p4c rejects:            {len(p4c_rejects)} {' '.join(p4c_rejects)}")
    for kind in ("embedded", "bmv2"):
        fails = [k for k, r in results.items() if r[kind][0] in ("fail", "timeout")]
        print(f"STF failures ({kind}): {len(fails)} {' '.join(fails)}")
    print(f"embedded compile refusals: {sum(refusals.values())}")
    for message, count in refusals.most_common():
        print(f"  {count:3d}  {message}")
    if use_bmv2:
        print(f"gaps (BMv2 passes, embedded does not): {len(gaps)}")
        for k in gaps:
            status, detail = results[k]["embedded"]
            print(f"  {k}: {status}: {_first_line(detail)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
