"""Allreduce time across Mininet hosts per codec, with and without loss on every link.

For each loss rate, a star of ``--workers`` hosts around one switch (embedded target by default)
is brought up, the pipeline pushed and the job created; every host then runs ``--rounds``
allreduces of ``--size`` coordinates per codec (``hina.mininet.host_worker``). The time of an
allreduce is the slowest worker's; the first round is left out (it includes the skew of the
workers' start), the median of the others is reported. Every result is checked against its
bound (exact for SUM), so a figure never comes from a wrong answer.

    sudo .venv/bin/python bench/bench_mininet.py [--size 1000000] [--loss 0 2] \\
        [--codecs sum,thc,fetchsgd,lossless] [--target embedded] [--out out]

Writes ``out/bench_mininet.json`` and ``out/bench_mininet.png``. The embedded target runs the P4
program in Python (a few thousand packets/s): 1M coordinates take tens of seconds per codec.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from hina import protocol as P                 


def run_loss(args, loss: float, codecs: list[str]) -> dict:
    from hina.mininet import topo as T
    from hina.mininet.deploy import HinaNetwork, resolve_loss_method
    shape = T.LinkShape(loss=loss)
    method = resolve_loss_method(args.loss_method, args.target, shape)
    topo = T.StarTopo(n_workers=args.workers, shape=shape, netem_loss=method == "netem",
                      control_network=False)
    hn = HinaNetwork(topo, target=args.target, shape=shape, loss_method=method,
                     words=args.words, n_slots=args.slots)
    rows = {}
    ok = False
    try:
        hn.start()
        for codec in codecs:
            hn.reset_job()
            reports = hn.run_workers("allreduce", [codec], size=args.size, rounds=args.rounds,
                                     timeout_s=args.timeout, give_up_s=60.0,
                                     min_rto=args.min_rto)
            bad = [r for r in reports if not r.ok]
            if bad:
                raise SystemExit(f"{codec} at {loss}% loss: {bad[0].host}: "
                                 f"{bad[0].report.get('error') or bad[0].report}")
            results = [r.report["results"][0] for r in reports]
            per_round = [max(res["seconds"][k] for res in results)
                         for k in range(len(results[0]["seconds"]))]
            timed = per_round[1:] or per_round
            rows[codec] = {
                "seconds": statistics.median(timed), "rounds": per_round,
                "packets_sent_per_worker": statistics.mean(r["packets_sent"] for r in results)
                / len(per_round),
                "retransmissions_per_worker": statistics.mean(r["retransmissions"]
                                                              for r in results) / len(per_round),
                "bytes_sent_per_worker": statistics.mean(r["bytes_sent"] for r in results)
                / len(per_round),
            }
            print(f"loss {loss:g}% ({method}) {codec:9s} {rows[codec]['seconds']:7.2f} s  "
                  f"{rows[codec]['packets_sent_per_worker']:8.0f} pkts/worker  "
                  f"{rows[codec]['retransmissions_per_worker']:6.0f} retx/worker", flush=True)
        rows["_counters"] = hn.counters()
        rows["_loss_method"] = method
        ok = True
    finally:
        hn.stop()
        if ok:
            hn.remove_temporary_logs()
    return rows


def plot(results: dict, codecs: list[str], args, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    losses = list(results)
    width = 0.8 / len(losses)
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, loss in enumerate(losses):
        xs = [c + (i - (len(losses) - 1) / 2) * width for c in range(len(codecs))]
        ys = [results[loss][codec]["seconds"] for codec in codecs]
        bars = ax.bar(xs, ys, width, label=f"{loss}% loss ({results[loss]['_loss_method']})")
        ax.bar_label(bars, fmt="%.1f", fontsize=8)
    ax.set_xticks(range(len(codecs)), codecs)
    ax.set_ylabel("allreduce time, s (slowest worker)")
    ax.set_title(f"HINA in Mininet: {args.size:,} coordinates, {args.workers} hosts, "
                 f"{args.target} target")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--target", choices=("embedded", "bmv2"), default="embedded")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--codecs", default="sum,thc,fetchsgd,lossless",
                   help="comma separated, from hina.mininet.workloads.CODECS")
    p.add_argument("--loss", type=float, nargs="+", default=[0.0, 2.0], help="percent")
    p.add_argument("--loss-method", default="auto")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--words", type=int, default=P.WORDS, choices=P.V1MODEL_WORDS)
    p.add_argument("--slots", type=int, default=32)
    p.add_argument("--min-rto", type=float, help="the workers' smallest retransmission "
                   "timeout, seconds (default: the transport's)")
    p.add_argument("--timeout", type=float, default=900.0, help="per run of the workers")
    p.add_argument("--out", default=str(ROOT / "out"))
    args = p.parse_args(argv)
    from hina.mininet.workloads import CODECS
    codecs = [c for c in args.codecs.split(",") if c]
    if not codecs or any(c not in CODECS for c in codecs):
        p.error(f"--codecs {args.codecs}: choose from {','.join(CODECS)}")
    from mininet.log import setLogLevel
    setLogLevel("warning")
    results = {f"{loss:g}": run_loss(args, loss, codecs) for loss in args.loss}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench_mininet.json").write_text(json.dumps(
        {"size": args.size, "workers": args.workers, "target": args.target,
         "min_rto": args.min_rto,
         "words": args.words, "slots": args.slots, "results": results}, indent=1))
    plot(results, codecs, args, out / "bench_mininet.png")
    print(f"wrote {out / 'bench_mininet.json'} and {out / 'bench_mininet.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
