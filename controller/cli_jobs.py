"""``hina-ctl job ...``: create, list, show, delete jobs, their tokens and generations.

The commands take the :class:`~controller.cli.Context` that :mod:`controller.cli` builds from the
arguments (switch connection, state file, tokens); :func:`add_job_commands` adds their parser.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from hina import pipeline
from hina import protocol as P
from hina.cli import EXIT_OK, OneLineParser
from hina.cli import help_with_example as _help
from hina.codecs import ADAPTIVE_CHOICES
from hina.programs import HINA_TNA_P4

from .config import CODECS, ConfigError, JobConfig, parse_worker
from .jobs import program_layout
from .tokens import write_token_file

if TYPE_CHECKING:
    from .cli import Context

__all__ = ["add_job_commands"]


def _words_default(ctx: Context) -> int:
    """HINA_WORDS of the pushed program: the v1model program's define, or the TNA program's
    words per packet (two blocks of TNA_LANES, read from the switch's P4Info)."""
    layout = program_layout_of(ctx)
    if isinstance(layout, pipeline.TnaLayout):
        return layout.words
    if ctx.state.pipeline is not None and "HINA_WORDS" in ctx.state.pipeline.defines:
        return int(ctx.state.pipeline.defines["HINA_WORDS"])
    return P.WORDS


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(v, 0) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected comma-separated integers") from None


def _sketch_k(text: str) -> tuple[int, float]:
    """``--sketch-k``: an integer is a count of candidates, anything else a fraction in (0, 1]."""
    try:
        return int(text), 0.0
    except ValueError:
        pass
    try:
        fraction = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        fraction = -1.0
    if not 0.0 < fraction <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a count of candidates (2560) or a "
                                         "fraction of the bucket in (0, 1] (0.01 or 1%)")
    return 0, fraction


def cmd_job_create(ctx: Context) -> int:
    a = ctx.args
    workers = tuple(parse_worker(text, i) for i, text in enumerate(a.workers))
    k_count, k_fraction = a.sketch_k or (0, 0.0)
    words = a.words or _words_default(ctx)
    if ctx.target == "tofino" and words not in P.WORKER_WORDS:
        raise ConfigError(
            f"'job create': the pushed TNA program carries {words} words per packet (two "
            f"blocks of TNA_LANES={words // 2}); workers speak "
            f"{', '.join(map(str, P.WORKER_WORDS))} (hina.protocol.WORKER_WORDS): push it with "
            f"-D TNA_LANES={P.TNA_TOFINO1_WORDS // 2} (Tofino 1's default: "
            f"{P.TNA_TOFINO1_WORDS} words) or -D TNA_LANES={min(P.V1MODEL_WORDS) // 2} "
            f"(Tofino 2's default: {min(P.V1MODEL_WORDS)} words)")
    config = JobConfig(
        job_id=a.id, codec=a.codec, workers=workers, n_slots=a.slots, reg_base=a.reg_base,
        words=words, thc_table=a.thc_table, rht_seed=a.rht_seed,
        sketch_rows=a.sketch_rows, sketch_columns=a.sketch_columns, sketch_seed=a.sketch_seed,
        sketch_k=k_count, sketch_k_fraction=k_fraction, sketch_bits=a.sketch_bits,
        value_bits=a.value_bits, value_blocks=a.value_blocks, sketch_rotate=a.sketch_rotate,
        in_switch_sketch=a.in_switch_sketch, switch_ip=a.switch_ip, switch_mac=a.switch_mac,
        adaptive_choices=tuple(a.adaptive_choices.split(",")) if a.adaptive_choices else ())
    jobs = ctx.manager()
    config = jobs.create_job(config)
    token = ctx.tokens.issue(config.job_id, rotate=True)   # before the state: serve sees both
    ctx.state.jobs[config.job_id] = config
    ctx.note_used(jobs, [config.job_id])
    ctx.save()
    if a.token_file:
        write_token_file(Path(a.token_file), token)
    if a.json:
        ctx.print_json(config.to_json())
    else:
        print(f"job {config.job_id} created: {config.codec} ({config.lane_op}), "
              f"{len(config.workers)} workers, slots {config.reg_base}.."
              f"{config.reg_base + config.n_slots - 1}; workers' token "
              + (f"in {a.token_file}" if a.token_file
                 else f"from 'hina-ctl job token {config.job_id}'"))
    return EXIT_OK


def cmd_job_token(ctx: Context) -> int:
    a = ctx.args
    ctx.job(a.id)
    token = ctx.tokens.issue(a.id, rotate=a.rotate)
    if a.token_file:
        write_token_file(Path(a.token_file), token)
        print(f"job {a.id}: {'new ' if a.rotate else ''}token written to {a.token_file}")
    else:
        print(token)
    return EXIT_OK


def cmd_job_delete(ctx: Context) -> int:
    job_id = ctx.args.id
    ctx.job(job_id)
    jobs = ctx.manager()
    jobs.delete(job_id)
    del ctx.state.jobs[job_id]
    ctx.save()
    ctx.tokens.remove([job_id])
    print(f"job {job_id} deleted")
    return EXIT_OK


def cmd_job_bump_generation(ctx: Context) -> int:
    job_id = ctx.args.id
    ctx.job(job_id)
    jobs = ctx.manager()
    generation = jobs.bump_generation(job_id)
    ctx.state.jobs[job_id] = jobs.record(job_id).config.replace(
        generation_cause="hina-ctl job bump-generation")
    ctx.save()
    if ctx.args.json:
        ctx.print_json({"job": job_id, "generation": generation})
    else:
        print(f"job {job_id}: generation {generation}")
    return EXIT_OK


def _job_row(c: JobConfig) -> dict:
    return {"job": c.job_id, "codec": c.codec, "lane_op": c.lane_op, "workers": len(c.workers),
            "slots": c.n_slots, "reg_base": c.reg_base, "lut_id": c.lut_id, "words": c.words,
            "generation": c.generation}


def program_layout_of(ctx: Context) -> pipeline.Layout:
    """The pushed program's layout: the v1model program's, or a TNA program's (tofino, or the
    embedded target running p4/tna) read from the switch's P4Info (its lane count decides the
    TNA program's entries, its registers what ``state`` reads)."""
    p = ctx.state.pipeline
    if p is None or (p.target != "tofino" and Path(p.p4).name != Path(HINA_TNA_P4).name):
        return pipeline.V1MODEL
    return program_layout((ctx._conn or ctx.connect(primary=False)).require_index())


def cmd_job_list(ctx: Context) -> int:
    rows = [_job_row(c) for _, c in sorted(ctx.state.jobs.items())]
    if ctx.args.json:
        ctx.print_json(rows)
        return EXIT_OK
    from rich.table import Table
    table = Table(title=f"jobs on {ctx.args.switch}")
    for col in ("job", "codec", "lane_op", "workers", "slots", "reg_base", "lut_id", "words",
                "generation"):
        table.add_column(col, justify="right" if col not in ("codec", "lane_op") else "left")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    ctx.console().print(table if rows else "no jobs")
    return EXIT_OK


def cmd_job_show(ctx: Context) -> int:
    config = ctx.job(ctx.args.id)
    spec = config.to_spec()
    data = config.to_json()
    data["lane_op"] = config.lane_op
    data["multicast_group"] = spec.mcast_grp
    layout = program_layout_of(ctx)
    data["entries"] = len(pipeline.job_entries(spec, layout)) + (
        len(pipeline.lut_entries(spec.lut_id, config.thc_table, spec.words, layout))
        if config.thc_table else 0)
    if ctx.args.json:
        ctx.print_json(data)
        return EXIT_OK
    from rich.table import Table
    console = ctx.console()
    head = Table(show_header=False, title=f"job {config.job_id}")
    for key in ("codec", "lane_op", "n_slots", "reg_base", "words", "lut_id", "rht_seed",
                "multicast_group", "entries", "switch_ip", "switch_mac", "generation"):
        head.add_row(key, str(data[key]))
    if config.generation_cause:
        head.add_row("generation cause", config.generation_cause)
    if config.sum_saturates:
        head.add_row("SUM", "saturates, sticks at an int32 bound (TNA)")
    if config.thc_table:
        head.add_row("thc_table", ",".join(map(str, config.thc_table)))
    if config.sketch_rows:
        head.add_row("sketch", f"{config.sketch_rows} x {config.sketch_columns}, seed "
                     f"{config.sketch_seed}" + (" (in switch)" if config.in_switch_sketch else ""))
    if config.codec == "sketched_sgd":
        k = (f"{config.sketch_k} candidates" if config.sketch_k
             else f"{config.sketch_k_fraction:g} of the bucket")
        head.add_row("sketch_k", k)
        for key in ("sketch_bits", "value_bits", "value_blocks", "sketch_rotate"):
            head.add_row(key, str(data[key]))
    console.print(head)
    workers = Table(title="workers")
    for col in ("index", "address", "switch port", "mac", "tunnel"):
        workers.add_column(col)
    for i, w in enumerate(config.workers):
        workers.add_row(str(i), w.key, str(w.port), w.mac,
                        f"{w.tunnel_local} > {w.tunnel_switch}" if w.tunnel_local else "-")
    console.print(workers)
    return EXIT_OK


def add_job_commands(sub) -> None:
    """The ``job`` command and its actions, on ``hina-ctl``'s subparsers ``sub``."""
    job = sub.add_parser("job", help="create, list, show, delete jobs", **_help(
        "Aggregation jobs.", "hina-ctl job list --json"))
    job_sub = job.add_subparsers(dest="action", metavar="ACTION", required=True,
                                 parser_class=OneLineParser)
    create = job_sub.add_parser("create", help="install a job (all or nothing)", **_help(
        "Install a job: worker admission, a multicast group with one replica per worker, egress "
        "rewrite entries and (THC) the table entries. On any failure nothing stays installed.\n"
        "Workers: IP:UDP_PORT[,port=N][,mac=MAC][,tunnel=LOCAL_HOST:PORT>SWITCH_HOST:PORT]\n"
        "(port: switch port, default index+1; tunnel: the embedded target's loopback UDP port).",
        "hina-ctl job create --id 1 --codec thc --slots 32 "
        "--worker 10.0.1.1:40000,port=1 --worker 10.0.1.2:40000,port=2"))
    create.add_argument("--id", type=int, required=True, help="job id (0..1023)")
    create.add_argument("--codec", required=True, choices=list(CODECS),
                        help="codec; sets the lane op: " +
                             ", ".join(f"{k}={v}" for k, v in CODECS.items()))
    create.add_argument("--worker", dest="workers", action="append", required=True,
                        metavar="IP:PORT[,...]", help="a worker (repeat, in worker order)")
    create.add_argument("--slots", type=int, default=32, help="slots (window), default 32")
    create.add_argument("--reg-base", type=int, default=None,
                        help="first slot register (default: first free range)")
    create.add_argument("--words", type=int, default=None,
                        help="HINA_WORDS of the pushed program (default: as pushed)")
    create.add_argument("--thc-table", type=_int_list, default=None, metavar="V0,V1,...",
                        help="THC table (16 values; default g=30 table)")
    create.add_argument("--rht-seed", type=int, default=0, help="THC rotation seed")
    create.add_argument("--sketch-rows", type=int, default=0,
                        help="sketch rows (default: sketch 5, sketched_sgd 3, lossless 3)")
    create.add_argument("--sketch-columns", type=int, default=0,
                        help="sketch columns, a power of two (default: sketch 65536, "
                             "sketched_sgd 4096, lossless 4096)")
    create.add_argument("--sketch-seed", type=int, default=0, help="sketch hash seed")
    create.add_argument("--sketch-k", type=_sketch_k, default=None, metavar="K",
                        help="sketched_sgd: candidates per bucket whose exact sums round 2 "
                             "carries: a count (2560) or a fraction of the bucket (0.01 or 1%%; "
                             "default 0.01)")
    create.add_argument("--sketch-bits", type=int, default=0,
                        help="sketched_sgd: bits per sketch cell in the int32 SUM lanes, guard "
                             "bits included (default 10: three cells per lane)")
    create.add_argument("--value-bits", type=int, default=0,
                        help="sketched_sgd: bits per candidate value, guard bits included "
                             "(default max(6, ceil(log2 workers) + 4))")
    create.add_argument("--value-blocks", type=int, default=0,
                        help="sketched_sgd: blocks of the bucket with their own value exponent "
                             "(MAX lanes; default 120)")
    create.add_argument("--sketch-rotate", type=int, default=0,
                        help="sketched_sgd: hash seeds cycled through, one per step (default 8)")
    create.add_argument("--adaptive-choices", default="", metavar="NAMES",
                        help="adaptive: the codecs its buckets may use, comma-separated from "
                             f"{','.join(ADAPTIVE_CHOICES)} (default all; thc, sparse_thc or "
                             "block_sparse needed)")
    create.add_argument("--in-switch-sketch", action="store_true",
                        help="reserve in-switch sketch columns (PAIRS)")
    create.add_argument("--switch-ip", default="10.0.0.254",
                        help="the switch's IPv4 address on the aggregation network")
    create.add_argument("--switch-mac", default="02:00:00:00:00:fe")
    create.add_argument("--token-file", metavar="FILE",
                        help="also write the job's new token to FILE (mode 0600) for its "
                             "workers (hina-worker --token-file)")
    create.add_argument("--json", action="store_true", help="print the job as JSON")
    create.set_defaults(func=cmd_job_create)
    token = job_sub.add_parser("token", help="print (or rotate) a job's token", **_help(
        "Print the token the job's workers show the job service (hina-worker --token-file, "
        "--token or $HINA_JOB_TOKEN), or write it to --token-file (mode 0600). A job created "
        "without one gets one now. --rotate issues a new token: the old one is refused from "
        "then on, also for seats already taken.",
        "hina-ctl job token 1 --token-file /shared/job1.token"))
    token.add_argument("id", type=int)
    token.add_argument("--token-file", metavar="FILE", help="write it to FILE instead")
    token.add_argument("--rotate", action="store_true", help="replace the token with a new one")
    token.set_defaults(func=cmd_job_token)
    lst = job_sub.add_parser("list", help="list jobs", **_help("List installed jobs.",
                                                                "hina-ctl job list"))
    lst.add_argument("--json", action="store_true")
    lst.set_defaults(func=cmd_job_list)
    show = job_sub.add_parser("show", help="show one job", **_help(
        "Show a job: codec parameters, resources, workers.", "hina-ctl job show 1 --json"))
    show.add_argument("id", type=int)
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=cmd_job_show)
    delete = job_sub.add_parser("delete", help="remove a job", **_help(
        "Remove every entry and the multicast group the job installed.", "hina-ctl job delete 1"))
    delete.add_argument("id", type=int)
    delete.set_defaults(func=cmd_job_delete)
    bump = job_sub.add_parser("bump-generation", help="start a new generation of a job", **_help(
        "Move the job to its next generation (its workers restarted): rewrite its admission "
        "entries with it, all or nothing, and keep it in the state file (resync re-installs "
        "it). Packets of the old generation are dropped as STALE_GENERATION and answered with "
        "a NOTICE; the new generation's workers start again at seq 0, and the switch reclaims "
        "slots without a register reset. Prints the new generation.",
        "hina-ctl job bump-generation 1"))
    bump.add_argument("id", type=int)
    bump.add_argument("--json", action="store_true", help="print {job, generation} as JSON")
    bump.set_defaults(func=cmd_job_bump_generation)
