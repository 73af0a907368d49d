"""p4/hina.p4 at every HINA_WORDS: compile time on p4c and on the embedded target, and one THC
round of 8 workers through both, results compared with each other and with the sums. At 256
words THC runs on the embedded target only: its results grow each packet by 768 bytes, past
BMv2's 512-byte headroom (simple_switch aborts; the controller refuses such a job on BMv2).

The test suite covers 64 and 128 words; the 256-word program takes p4c about 4 minutes, so it is
covered here instead of in every test run.

    sudo .venv/bin/python bench/bench_program_sizes.py [--words 64 128 256] [--fresh]

``--fresh`` compiles with p4c into an empty cache (the compile time is the real one); otherwise
the cached build is used when there is one (``controller.bmv2.compile_p4c``). Needs root and
the BMv2 toolchain; prints one line and exits 2 otherwise.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from hina import programs

ROOT = Path(__file__).resolve().parents[1]
HINA_P4 = programs.HINA_P4
N_WORKERS = 8
PAYLOAD_OFFSET = 14 + 20 + 8 + 12      # Ethernet, IPv4, UDP, HINA header
LUT_ID = 1


def _frame(worker, job, payload: bytes) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    from hina import protocol as P
    from hina.layers import HINA
    w = job.workers[worker]
    ip = ".".join(str((w.ip >> s) & 0xFF) for s in (24, 16, 8, 0))
    return bytes(Ether(src=":".join(f"{(w.mac >> s) & 0xFF:02x}" for s in range(40, -1, -8)),
                       dst="02:00:00:00:00:fe") / IP(src=ip, dst="10.0.0.254")
                 / UDP(sport=w.udp_port, dport=P.UDP_PORT_BASE)
                 / HINA(version=P.VERSION, msg_type=P.MsgType.AGGREGATE, op=P.Op.LUT_SUM,
                        job_id=job.job_id) / Raw(payload))


def thc_round(dataplane, words: int, seed: int) -> tuple[list, "object"]:
    """One LUT-SUM round of N_WORKERS on ``dataplane``; returns (outputs, expected sums)."""
    import numpy as np

    from hina import pipeline
    from hina import protocol as P
    from hina.layers import pack_nibbles
    workers = tuple(pipeline.WorkerAddress(port=w + 1, mac=0x020000000100 + w, ip=0x0A000100 + w,
                                           udp_port=40000 + w) for w in range(N_WORKERS))
    job = pipeline.JobSpec(job_id=1, workers=workers, n_slots=2, reg_base=0, words=words,
                           lut_id=LUT_ID)
    for entry in pipeline.job_entries(job) + pipeline.lut_entries(LUT_ID,
                                                                  pipeline.THC_DEFAULT_TABLE, words):
        dataplane.table_insert(entry)
    dataplane.mcast_group_set(*pipeline.multicast_group(job))
    rng = np.random.default_rng(seed)
    idx = [rng.integers(0, P.THC_TABLE_SIZE, 2 * words) for _ in range(N_WORKERS)]
    outputs = []
    for w in range(N_WORKERS):
        frame = _frame(w, job, pack_nibbles(idx[w]))
        kwargs = {"expected": N_WORKERS if w == N_WORKERS - 1 else 0} \
            if hasattr(dataplane, "switch") else {}
        outputs += dataplane.process(w + 1, frame, **kwargs).outputs
    expected = np.asarray(pipeline.THC_DEFAULT_TABLE)[np.stack(idx)].sum(axis=0)
    return outputs, expected


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, nargs="+", default=[64, 128, 256],
                        choices=[64, 128, 256])
    parser.add_argument("--fresh", action="store_true", help="compile with p4c into an empty cache")
    args = parser.parse_args(argv)

    from hina.controller.bmv2_dataplane import Bmv2Dataplane, harness_missing
    reason = harness_missing()
    if reason:
        print(f"bench_program_sizes: {reason}", file=sys.stderr)
        return 2
    import numpy as np

    from hina.controller.bmv2 import PACKET_HEADROOM, compile_p4c
    from hina.softswitch.compiler import compile_file
    if args.fresh:
        os.environ["HINA_CACHE_DIR"] = tempfile.mkdtemp(prefix="hina-bench-cache-")
    print(f"{'words':>5} {'p4c s':>8} {'embedded s':>11}  THC round (8 workers, "
          f"{os.cpu_count()} cores)")
    bmv2 = None
    try:
        for words in args.words:
            defines = {"HINA_WORDS": words}
            t0 = time.monotonic()
            compile_p4c(HINA_P4, defines)
            t1 = time.monotonic()
            program = compile_file(str(HINA_P4), defines=defines)
            t2 = time.monotonic()
            if bmv2 is None:
                bmv2 = Bmv2Dataplane(HINA_P4, defines, ports=range(1, N_WORKERS + 1),
                                     info=program.info)
            else:
                bmv2.load(HINA_P4, defines, info=program.info)
            got_e, expected = thc_round(program.instantiate(), words, seed=words)
            right = len(got_e) == N_WORKERS and all(
                np.array_equal(np.frombuffer(f[PAYLOAD_OFFSET:], ">u2"), expected)
                for _, f in got_e)
            if 3 * words > PACKET_HEADROOM:
                # A LUT-SUM result grows the packet by 3 x words bytes: past BMv2's headroom
                # simple_switch aborts (controller.bmv2.PACKET_HEADROOM); embedded target only.
                verdict = "embedded only (BMv2 headroom)" if right else "WRONG"
            else:
                got_b, _ = thc_round(bmv2, words, seed=words)
                right = right and sorted(got_b) == sorted(got_e)
                verdict = "equal" if right else "DIFFER"
            print(f"{words:>5} {t1 - t0:>8.1f} {t2 - t1:>11.1f}  {verdict}")
            if not right:
                return 1
    finally:
        if bmv2 is not None:
            bmv2.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
