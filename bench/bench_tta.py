"""Time to accuracy in Mininet with every host link limited by ``tc``: HINA's codecs through
the switch against gloo's fp32 ring all-reduce over the same links (issue 14).

For each link rate (and first with unlimited links, the reference that says what limits each
mode) a star of ``--workers`` hosts is brought up around the switch (embedded target or BMv2)
with every host link shaped by Mininet's TCLink (HTB, both ends of the link, so each direction
is limited to the rate): the data links to the switch *and* the control network's links, since
that is where gloo runs. Then, per mode, every host runs ``hina.mininet.tta_worker``: DDP on
the digits MLP (``demo/digits.py``: 64-128-10, 9,610 parameters, batch 32 per worker, SGD lr
0.05, momentum 0.9) until the replicas' test accuracy reaches ``--target-acc``; or, with
``--workload dlrm`` / ``moe``, the demo's sparse workloads with the demo's model, optimiser,
codec settings and DDP buckets (``demo/dlrm.py``: test AUC, batch 64, lr 0.5, a bucket per
embedding table for HINA's modes, and the ``sparse`` mode: ``nn.Embedding(sparse=True)`` on
gloo; ``demo/moe.py``: batch 8, Adam lr 0.01):

* ``fp32``: plain DDP, no hook: gloo's ring all-reduce of fp32 gradients over the control
  network's links (limited to the rate);
* any HINA codec (``thc``, ``fixed``, ...): every bucket through the switch (after DDP's two
  warm-up iterations on gloo); gloo carries only the engine's small vote per bucket.

Printed (and written to ``out/bench_tta_<target>.json``; ``--markdown`` also prints the table
for ``docs/benchmarks.md``): mode, rate, steps and seconds to the target (the sum of the timed
steps; evaluation is not timed), ms per step (steady state: the steps after the warm-up),
bytes each worker sends per step (every interface, frames as the kernel counts them), the time
those bytes need at the rate on the busiest link and direction (``link ms``), ms per step of
the same mode with unlimited links, the packets/s the switch receives, the speed-up against
fp32 at that rate, and what limits the run: ``link`` when the rate's time for the bytes is at
least the unlimited step time, else ``switch`` (HINA modes: the switch's packet rate, with the
hosts' codec work) or ``hosts`` (fp32: no switch).

    sudo .venv/bin/python bench/bench_tta.py --rates 10,2 --target embedded \\
        --codecs fp32,thc,fixed [--target-acc 0.95] [--repeat 1] [--resume]

Restartable: results are saved after every run; ``--resume`` keeps those of the same
configuration and runs only what is missing. Every network, interface and process is stopped
on success, failure, Ctrl-C and SIGTERM (``hina_mn.deploy.HinaNetwork.stop``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import time
from pathlib import Path

from hina import protocol as P

ROOT = Path(__file__).resolve().parents[1]
TTA_WORKER = "hina.mininet.tta_worker"
FP32 = "fp32"
#: modes on gloo alone (no switch): fp32, and dlrm's sparse embedding gradients
GLOO_MODES = (FP32, "sparse")
UNLIMITED = "none"
#: the hook's warm-up iterations (plain all-reduce while DDP rebuilds its buckets): left out of
#: the steady-state figures (ms/step, bytes/step), kept in seconds to target.
WARMUP_STEPS = 2
#: Port of the rendezvous per run (a fresh one per run: no TIME_WAIT on a reused port).
FIRST_MASTER_PORT = 29600
CONFIG_KEYS = ("target", "workload", "workers", "target_acc", "max_steps", "batch", "lr", "words",
               "slots", "seed", "min_rto")


def parse_rates(text: str) -> list[float]:
    try:
        rates = [float(r) for r in text.split(",") if r]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rates {text!r}: comma separated Mbit/s") from None
    if not rates or any(not r > 0 for r in rates):
        raise argparse.ArgumentTypeError(f"--rates {text!r}: at least one rate, each > 0")
    return rates


def rate_key(rate) -> str:
    return UNLIMITED if rate is None else f"{rate:g}"


def tc_classes(host, intf: str) -> str:
    """The HTB classes of ``intf`` in ``host``'s namespace (``tc class show``)."""
    return host.cmd(f"tc class show dev {intf}")


def htb_rate_mbit(text: str):
    """The rate of the first HTB class in ``tc class show`` output, Mbit/s (None: none)."""
    m = re.search(r"htb .*?rate (\d+(?:\.\d+)?)([KMG]?)bit", text)
    if not m:
        return None
    return float(m.group(1)) * {"": 1e-6, "K": 1e-3, "M": 1.0, "G": 1e3}[m.group(2)]


def check_shaping(hn, rate) -> dict:
    """The rate ``tc`` really applies on both ends of every worker link (data and control);
    raises if any differs from ``rate`` (by more than tc's rounding)."""
    seen = {}
    for host in hn.workers:
        for intf in (hn.data_intf(host), hn.control_intf(host)):
            peer = intf.link.intf2 if intf.link.intf1 is intf else intf.link.intf1
            ends = {intf.name: htb_rate_mbit(tc_classes(host, intf.name)),
                    peer.name: htb_rate_mbit(tc_classes(peer.node, peer.name))}
            for name, got in ends.items():
                if rate is None and got is not None or rate is not None and (
                        got is None or abs(got - rate) > 0.01 * rate):
                    raise RuntimeError(f"{name}: tc applies {got} Mbit/s, expected {rate}")
            seen.update(ends)
    return seen


def commands(hn, codec: str, args, master_port: int) -> list[list[str]]:
    from hina.mininet.deploy import HOST_WORKER
    cmds = []
    for rank in range(len(hn.workers)):
        cmd = hn.worker_command(rank, "ddp", [codec], size=1, seed=args.seed, give_up_s=30.0,
                                min_rto=args.min_rto)
        cmd[cmd.index(HOST_WORKER)] = TTA_WORKER
        master = cmd.index("--master") + 1
        cmd[master] = cmd[master].rsplit(":", 1)[0] + f":{master_port}"
        cmds.append(cmd + ["--workload", args.workload, "--target-acc", str(args.target_acc),
                           "--max-steps", str(args.max_steps), "--batch", str(args.batch),
                           "--lr", str(args.lr)])
    return cmds


def summarize(results: list[dict], data_if: list[str], ctl_if: list[str], rate) -> dict:
    """One run's figures from every worker's result (see the module docstring)."""
    r0 = results[0]
    steps = r0["steps"]
    steady = range(min(WARMUP_STEPS, steps - 1), steps)
    step_max = [max(r["step_seconds"][s] for r in results) for s in range(steps)]
    ms_step = 1e3 * statistics.mean(step_max[s] for s in steady)

    def per_step(r, intf, counter):
        values = r["netdev"][intf][counter]
        return statistics.mean(values[s] for s in steady)

    tx = [sum(per_step(r, i, "tx_bytes") for i in r["netdev"]) for r in results]
    data_tx = [per_step(r, d, "tx_bytes") for r, d in zip(results, data_if)]
    ctl_tx = [per_step(r, c, "tx_bytes") for r, c in zip(results, ctl_if)]
    busiest = max(per_step(r, i, c) for r, d, k in zip(results, data_if, ctl_if)
                  for i in (d, k) for c in ("tx_bytes", "rx_bytes"))
    switch_in = sum(per_step(r, d, "tx_packets") for r, d in zip(results, data_if))
    data_pkts = statistics.mean(per_step(r, d, "tx_packets") for r, d in zip(results, data_if))
    frame = (statistics.mean(data_tx) / data_pkts) if data_pkts else None
    reached = all(r["reached"] for r in results)
    return {
        "reached": reached,
        "steps_to_target": r0["steps_to_target"],
        "seconds_to_target": (max(r["seconds_to_target"] for r in results) if reached else None),
        "steps": steps, "final_accuracy": r0["accuracy"][-1],
        "ms_per_step": ms_step,
        "bytes_per_worker_step": statistics.mean(tx),
        "data_bytes_per_worker_step": statistics.mean(data_tx),
        "control_bytes_per_worker_step": statistics.mean(ctl_tx),
        "busiest_link_bytes_per_step": busiest,
        "link_ms": None if rate is None else busiest * 8 / (rate * 1e6) * 1e3,
        "switch_packets_per_s": switch_in / (ms_step / 1e3) if switch_in else 0.0,
        "data_frame_bytes": frame,
        "link_packets_per_s": (None if rate is None or not frame
                               else len(results) * rate * 1e6 / 8 / frame),
        "accuracy": r0["accuracy"], "step_seconds": step_max, "losses": r0["losses"],
        "hina_buckets": r0.get("hina_buckets", 0),
        "fallback_buckets": sum(r.get("fallback_buckets", 0) for r in results),
        "retransmissions": sum(r.get("retransmissions", 0) for r in results),
        "replicas_in_sync": all(r["replicas_in_sync"] for r in results),
    }


def run_rate(args, rate, codecs: list[str], saved: dict, save) -> None:
    from hina.mininet import topo as T
    from hina.mininet.deploy import HinaNetwork
    key = rate_key(rate)
    todo = [c for c in codecs for k in range(args.repeat)
            if len(saved.get(key, {}).get(c, {}).get("runs", [])) <= k]
    if not todo:
        print(f"rate {key}: every mode already measured (--resume)", flush=True)
        return
    shape = T.LinkShape(bw=rate)
    topo = T.StarTopo(n_workers=args.workers, shape=shape, netem_loss=False,
                      control_network=True, control_shape=shape, suffix=args.name_suffix)
    log_dir = Path(args.log_dir) / f"{args.target}-{key}" if args.log_dir else None
    hn = HinaNetwork(topo, target=args.target, shape=shape, loss_method="none",
                     words=args.words, n_slots=args.slots,
                     log_dir=str(log_dir) if log_dir else None)
    ok = False
    try:
        hn.start()
        shaping = check_shaping(hn, rate)
        data_if = [hn.data_intf(h).name for h in hn.workers]
        ctl_if = [hn.control_intf(h).name for h in hn.workers]
        for i, codec in enumerate(todo):
            if codec not in GLOO_MODES:
                hn.reset_job()
            load = os.getloadavg()
            started = time.monotonic()
            reports = hn.run_commands(commands(hn, codec, args, FIRST_MASTER_PORT + i),
                                      timeout_s=args.timeout)
            bad = [r for r in reports if not r.ok]
            if bad:
                raise RuntimeError(f"{codec} at rate {key}: {bad[0].host}: "
                                   f"{bad[0].report.get('error') or 'not ok'} "
                                   f"(logs: {hn.log_dir}) {bad[0].stderr_tail[-400:]}")
            row = summarize([r.report["results"][0] for r in reports], data_if, ctl_if, rate)
            row.update(loadavg=load, wall_s=time.monotonic() - started,
                       switch_counters=hn.counters() if codec not in GLOO_MODES else {})
            entry = saved.setdefault(key, {}).setdefault(codec, {"runs": []})
            entry["runs"].append(row)
            entry["tc_rates_mbit"] = shaping
            save()
            sec = row["seconds_to_target"]
            print(f"rate {key:>5} {codec:8s} steps {row['steps_to_target']} "
                  f"{'-' if sec is None else f'{sec:.2f} s'}  {row['ms_per_step']:.1f} ms/step  "
                  f"{row['bytes_per_worker_step'] / 1e3:.1f} kB/worker/step  "
                  f"load {load[0]:.1f}", flush=True)
        ok = True
    finally:
        hn.stop()
        if ok:
            hn.remove_temporary_logs()


def combine(runs: list[dict]) -> dict:
    """The median run (by seconds to target, then ms/step) of repeated runs, with the spread."""
    order = sorted(runs, key=lambda r: (r["seconds_to_target"] is None,
                                        r["seconds_to_target"] or 0, r["ms_per_step"]))
    row = dict(order[(len(order) - 1) // 2])
    row["repeats"] = len(runs)
    secs = [r["seconds_to_target"] for r in runs if r["seconds_to_target"] is not None]
    row["seconds_spread"] = (min(secs), max(secs)) if secs else None
    return row


def table(saved: dict, rates: list, codecs: list[str]) -> list[dict]:
    """Rows of the printed table (the limiting factor needs the unlimited reference)."""
    rows = []
    ref = {c: combine(saved[UNLIMITED][c]["runs"]) for c in codecs
           if c in saved.get(UNLIMITED, {})}
    for rate in rates:
        key = rate_key(rate)
        got = {c: combine(saved[key][c]["runs"]) for c in codecs if c in saved.get(key, {})}
        base = got.get(FP32, {}).get("seconds_to_target")
        for codec, row in got.items():
            free = ref.get(codec, {}).get("ms_per_step")
            limit = "?"
            if rate is None:
                limit = "-"
            elif free is not None:
                limit = ("link" if row["link_ms"] >= free
                         else "switch" if codec not in GLOO_MODES else "hosts")
            sec = row["seconds_to_target"]
            rows.append({
                "mode": codec, "rate_mbit": key, "steps_to_target": row["steps_to_target"],
                "seconds_to_target": sec, "ms_per_step": row["ms_per_step"],
                "bytes_per_worker_step": row["bytes_per_worker_step"],
                "link_ms": row["link_ms"], "unlimited_ms_per_step": free,
                "switch_packets_per_s": row["switch_packets_per_s"],
                "link_packets_per_s": row["link_packets_per_s"],
                "speedup_vs_fp32": (base / sec if base and sec else None),
                "limited_by": limit, "final_accuracy": row["final_accuracy"],
                "repeats": row["repeats"], "seconds_spread": row["seconds_spread"],
                "load1": row["loadavg"][0]})
    return rows


def _f(value, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def render(rows: list[dict], markdown: bool) -> str:
    head = ["mode", "rate Mbit/s", "steps", "s to target", "final metric", "ms/step",
            "kB/worker/step", "link ms", "unlimited ms/step", "switch pkt/s", "link pkt/s",
            "speed-up", "limited by", "load"]
    body = [[r["mode"], r["rate_mbit"], _f(r["steps_to_target"], "d"),
             _f(r["seconds_to_target"], ".2f"), _f(r["final_accuracy"], ".4f"),
             _f(r["ms_per_step"], ".1f"),
             _f(r["bytes_per_worker_step"] / 1e3, ".1f"), _f(r["link_ms"], ".1f"),
             _f(r["unlimited_ms_per_step"], ".1f"),
             _f(r["switch_packets_per_s"] or None, ".0f"),
             _f(r["link_packets_per_s"], ".0f") if r["mode"] not in GLOO_MODES else "-",
             _f(r["speedup_vs_fp32"], ".2f") + ("x" if r["speedup_vs_fp32"] else ""),
             r["limited_by"], _f(r["load1"], ".1f")] for r in rows]
    if markdown:
        lines = ["| " + " | ".join(head) + " |",
                 "|" + "|".join("---" if i < 2 or i == 12 else "---:"
                                for i in range(len(head))) + "|"]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.rjust(w) for c, w in zip(cells, widths))   # noqa: E731
    return "\n".join([fmt(head)] + [fmt(b) for b in body])


def _raise_on_sigterm(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rates", type=parse_rates, default=[10.0, 2.0],
                   help="link rates, Mbit/s, comma separated (default 10,2)")
    p.add_argument("--target", choices=("embedded", "bmv2"), default="embedded")
    p.add_argument("--codecs", default="fp32,thc,fixed",
                   help="modes, comma separated: fp32 (gloo, no switch) and HINA codecs")
    p.add_argument("--workload", choices=("digits", "dlrm", "moe"), default="digits",
                   help="what the hosts train: the digits MLP, or the demo's DLRM (test AUC) "
                   "or MoE, with the demo's settings")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--target-acc", type=float, default=None,
                   help="test metric to reach (0: run --max-steps, no target; default per "
                   "workload: digits 0.95, dlrm 0.76 AUC, moe 0.45)")
    p.add_argument("--max-steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=None,
                   help="samples per worker per step (default per workload: 32, 64, 8)")
    p.add_argument("--lr", type=float, default=None,
                   help="learning rate (default per workload: 0.05, 0.5, 0.01)")
    p.add_argument("--no-unlimited", action="store_true",
                   help="skip the run with unlimited links (then 'limited by' is '?')")
    p.add_argument("--repeat", type=int, default=1, help="runs per rate and mode (the median "
                   "by seconds to target is reported)")
    p.add_argument("--words", type=int, default=P.WORDS, choices=P.V1MODEL_WORDS)
    p.add_argument("--slots", type=int, default=32)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--min-rto", type=float, help="the workers' smallest retransmission "
                   "timeout, s (default: the transport's, 0.2)")
    p.add_argument("--timeout", type=float, default=300.0, help="per run of the workers, s")
    p.add_argument("--name-suffix", default="tta", help="node name suffix (s1SUFFIX, "
                   "mgmt0SUFFIX), so the benchmark runs beside other networks")
    p.add_argument("--log-dir", help="switch logs and worker outputs (default: temporary)")
    p.add_argument("--out", default=str(ROOT / "out"), help="folder of the JSON")
    p.add_argument("--json", help="the JSON file (default OUT/bench_tta_TARGET.json)")
    p.add_argument("--resume", action="store_true",
                   help="keep the runs already in the JSON (same configuration)")
    p.add_argument("--markdown", action="store_true", help="also print a Markdown table")
    return p


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from hina.mininet.tta_worker import codecs_of, fill_defaults
    fill_defaults(args)
    allowed = codecs_of(args.workload)
    codecs = [c for c in args.codecs.split(",") if c]
    if not codecs or any(c not in allowed for c in codecs):
        parser.error(f"--codecs {args.codecs}: for {args.workload}, choose from {','.join(allowed)}")
    if args.repeat < 1 or args.workers < 2:
        parser.error("--repeat must be >= 1 and --workers >= 2")
    if os.geteuid() != 0:
        print("bench_tta.py: Mininet needs root: run it with sudo", file=sys.stderr)
        return 1
    from mininet.log import setLogLevel
    setLogLevel("warning")
    stem = "bench_tta" if args.workload == "digits" else f"bench_tta_{args.workload}"
    path = Path(args.json) if args.json else Path(args.out) / f"{stem}_{args.target}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    config = {k: getattr(args, k) for k in CONFIG_KEYS}
    saved: dict = {}
    if args.resume and path.exists():
        old = json.loads(path.read_text())
        if old.get("config") == config:
            saved = old.get("results", {})
        else:
            print(f"--resume: {path} has another configuration ({old.get('config')}); "
                  "starting afresh", flush=True)
    rates = ([] if args.no_unlimited else [None]) + args.rates

    def save() -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"config": config, "results": saved,
                                   "table": table(saved, rates, codecs)}, indent=1))
        tmp.replace(path)

    signal.signal(signal.SIGTERM, _raise_on_sigterm)
    try:
        for rate in rates:
            run_rate(args, rate, codecs, saved, save)
    except KeyboardInterrupt:
        print(f"bench_tta.py: interrupted; the network was torn down; runs so far in {path} "
              "(--resume goes on)", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"bench_tta.py: {exc}", file=sys.stderr)
        return 1
    save()
    rows = table(saved, rates, codecs)
    print(render(rows, markdown=False))
    if args.markdown:
        print()
        print(render(rows, markdown=True))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
