"""What an operator asks for: jobs (codec, workers, slots, codec parameters) and the pipeline.

A :class:`JobConfig` is the controller's record of a job. It holds more than the switch needs
(:class:`hina.pipeline.JobSpec` is derived from it): the codec and its parameters, which the job
service hands to the workers, and how each worker reaches the switch. It is stored as JSON in the
controller's state file (:mod:`controller.state`), so everything here round-trips through
:meth:`JobConfig.to_json` / :meth:`JobConfig.from_json`.

Worker syntax on the command line (``hina-ctl job create --worker ...``)::

    IP:UDP_PORT[,port=N][,mac=MAC][,tunnel=LOCAL_HOST:PORT>SWITCH_HOST:PORT]

``port`` is the switch port the worker is wired to (default: worker index + 1), ``mac`` its MAC
(default ``02:00`` followed by the IPv4 address), ``tunnel`` the embedded target's loopback UDP
tunnel (the worker binds LOCAL, the switch port listens on SWITCH; without it the worker uses an
ordinary UDP socket).

Example::

    >>> w = parse_worker("10.0.1.1:40000,port=3")
    >>> (w.ip, w.udp_port, w.port, w.mac)
    ('10.0.1.1', 40000, 3, '02:00:0a:00:01:01')
"""
from __future__ import annotations

import dataclasses
import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from hina import codecs as codec_names
from hina import pipeline
from hina import protocol as P

__all__ = ["ConfigError", "WorkerConfig", "JobConfig", "CODECS", "parse_worker", "parse_mac",
           "format_mac", "parse_host_port", "allocate", "DEFAULT_SWITCH_IP", "DEFAULT_SWITCH_MAC"]

#: The switch's address on the aggregation network: the destination of the workers' requests
#: (the same defaults as demo/local.py and hina/testing/frames.py).
DEFAULT_SWITCH_IP = "10.0.0.254"
DEFAULT_SWITCH_MAC = "02:00:00:00:00:fe"

#: codec name -> lane operation of its main stream, for every codec a job can run (the
#: registry, :mod:`hina.codecs`, less ``fp32``, which does not go through the switch). Every
#: worker codec also runs a MAX agreement round; ``lossless`` adds an OR bitmap stream.
CODECS = {name: codec_names.lookup(name).lane_op
          for name in codec_names.names(through_switch=True)}
SKETCH_CODECS = tuple(name for name in CODECS if codec_names.lookup(name).sketch)
DEFAULT_SKETCH_ROWS = {"fetchsgd": 5, "sketched_sgd": 3, "lossless": 3, "adaptive": 3}
DEFAULT_SKETCH_COLUMNS = {"fetchsgd": 1 << 16, "sketched_sgd": 1 << 12, "lossless": 1 << 12,
                          "adaptive": 1 << 12}

#: ``sketched_sgd`` (worker.codecs.SketchedSgdCodec, two rounds: a summed sketch picks k
#: candidates, then their exact sums) defaults, applied when a field is 0. ``k`` is either a count
#: of candidates per bucket (``sketch_k``) or a fraction of the bucket (``sketch_k_fraction``):
#: the job does not know the workers' bucket sizes, so the default is a fraction.
#: ``value_bits`` defaults to ``max(6, ceil(log2 n) + 4)``: at least 3 magnitude bits per
#: candidate value whatever the worker count (6 bits, five values per lane, up to 4 workers).
DEFAULT_SKETCHED_SGD = {"sketch_k_fraction": 0.01, "sketch_bits": 10, "value_blocks": 120,
                        "sketch_rotate": 8}
SKETCHED_SGD_MIN_VALUE_BITS = 6
SKETCHED_SGD_FIELDS = ("sketch_k", "sketch_k_fraction", "sketch_bits", "value_bits",
                       "value_blocks", "sketch_rotate")

_MAC_RE = re.compile(r"^[0-9a-fA-F]{2}(:[0-9a-fA-F]{2}){5}$")


class ConfigError(ValueError):
    """A job or pipeline request that cannot work; ``str()`` is one line for the user."""


def parse_mac(text: str) -> int:
    if not _MAC_RE.match(text):
        raise ConfigError(f"MAC address {text!r}: expected six hex bytes like 02:00:00:00:01:00")
    return int(text.replace(":", ""), 16)


def format_mac(value: int) -> str:
    return ":".join(f"{(value >> s) & 0xFF:02x}" for s in range(40, -1, -8))


def _parse_ip(text: str, what: str) -> int:
    try:
        return int(ipaddress.IPv4Address(text))
    except ValueError:
        raise ConfigError(f"{what} {text!r}: not an IPv4 address") from None


def parse_host_port(text: str, what: str = "address") -> tuple[str, int]:
    """``host:port`` -> (host, port); refuses a missing or out-of-range port."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 1 << 16:
        raise ConfigError(f"{what} {text!r}: expected HOST:PORT with a port in [1, 65535]")
    return host, int(port)


@dataclass(frozen=True)
class WorkerConfig:
    """One worker of a job: its address on the aggregation network and how it reaches the switch.

    Attributes:
        ip, udp_port: the worker's IPv4 source address and UDP source port (admission key).
        port: the switch port it is wired to (where its results are multicast).
        mac: its MAC address (results are sent to it).
        tunnel_local, tunnel_switch: ``host:port`` of the loopback UDP tunnel to an embedded
            target's port ("" for a real network: the worker then uses a UDP socket).
    """
    ip: str
    udp_port: int
    port: int
    mac: str
    tunnel_local: str = ""
    tunnel_switch: str = ""

    def __post_init__(self):
        _parse_ip(self.ip, "worker IP")
        parse_mac(self.mac)
        if bool(self.tunnel_local) != bool(self.tunnel_switch):
            raise ConfigError(f"worker {self.ip}:{self.udp_port}: a tunnel needs both ends")
        if self.tunnel_local:
            parse_host_port(self.tunnel_local, "tunnel address")
            parse_host_port(self.tunnel_switch, "tunnel address")
        try:
            self.address()
        except ValueError as exc:
            raise ConfigError(f"worker {self.ip}:{self.udp_port}: {exc}") from None

    @property
    def key(self) -> str:
        return f"{self.ip}:{self.udp_port}"

    def address(self) -> pipeline.WorkerAddress:
        return pipeline.WorkerAddress(port=self.port, mac=parse_mac(self.mac),
                                      ip=_parse_ip(self.ip, "worker IP"), udp_port=self.udp_port)


def parse_worker(text: str, index: int = 0) -> WorkerConfig:
    """Parse ``IP:UDP_PORT[,port=N][,mac=MAC][,tunnel=LOCAL>SWITCH]`` (see the module doc)."""
    head, *options = [part.strip() for part in text.split(",")]
    ip, udp_port = parse_host_port(head, "worker address")
    ip_value = _parse_ip(ip, "worker IP")
    values = {"port": str(index + 1), "mac": format_mac((0x0200 << 32) | ip_value), "tunnel": ""}
    for option in options:
        key, sep, value = option.partition("=")
        if not sep or key not in values:
            raise ConfigError(f"worker {text!r}: unknown option {option!r} "
                              "(expected port=N, mac=MAC, tunnel=LOCAL:PORT>SWITCH:PORT)")
        values[key] = value
    if not values["port"].isdigit():
        raise ConfigError(f"worker {text!r}: port={values['port']!r} is not a switch port number")
    local, _, remote = values["tunnel"].partition(">")
    if values["tunnel"] and not remote:
        raise ConfigError(f"worker {text!r}: tunnel must be LOCAL_HOST:PORT>SWITCH_HOST:PORT")
    return WorkerConfig(ip=ip, udp_port=udp_port, port=int(values["port"]), mac=values["mac"],
                        tunnel_local=local, tunnel_switch=remote)


@dataclass(frozen=True)
class JobConfig:
    """An aggregation job as the operator asked for it.

    Args:
        job_id: the HINA header's job id (0..1023).
        codec: one of :data:`CODECS`.
        workers: the workers, in worker-index order.
        n_slots: slots (the workers' window).
        reg_base: first slot register of the job (None: the controller picks a free range).
        words: ``HINA_WORDS`` of the pushed program.
        thc_table: THC table values (thc only; default THC's g=30 table).
        thc_granularity: THC's g (thc only; default: the table's largest value).
        rht_seed: THC's shared randomized-Hadamard seed.
        sketch_rows, sketch_columns, sketch_seed: sketch codecs' shape and hash seed.
        sketch_k, sketch_k_fraction: sketched_sgd only: candidates per bucket, as a count or as
            a fraction in (0, 1] of the bucket (at most one of them; default fraction 0.01).
        sketch_bits, value_bits: sketched_sgd only: field width (guard bits included) of a sketch
            cell / a candidate value in the int32 SUM lanes (default 10, and
            ``max(6, ceil(log2 n) + 4)``); each must leave >= 1 magnitude bit for n workers.
        value_blocks: sketched_sgd only: value exponents per bucket (default 120).
        sketch_rotate: sketched_sgd only: hash seeds cycled through, one per step (default 8).
        in_switch_sketch: also reserve in-switch sketch columns (PAIRS) of ``sketch_columns``.
        adaptive_choices: adaptive only: the codecs its buckets may use, from
            ``hina.codecs.ADAPTIVE_CHOICES`` (default all; thc, sparse_thc or block_sparse among
            them).
        switch_ip, switch_mac: the switch's address on the aggregation network.
        generation: the job's current generation (docs/protocol.md, "Generations"), written
            into its admission entries; :meth:`controller.jobs.JobManager.bump_generation`
            moves it on when the job's workers restart.
        sum_saturates: the switch's SUM saturates instead of flagging overflow (set at creation
            on the TNA program), sticky at the bound; its workers then read a result word at a
            bound as the overflow (see :class:`worker.transport.JobParams`).
        generation_cause: why the job last moved to a new generation (``hina-ctl serve``: which
            worker's seat was taken again, and why its holder had gone); "" before any bump.
    """
    job_id: int
    codec: str
    workers: tuple[WorkerConfig, ...]
    n_slots: int = 32
    reg_base: Optional[int] = None
    words: int = P.WORDS
    thc_table: Optional[tuple[int, ...]] = None
    thc_granularity: int = 0
    rht_seed: int = 0
    sketch_rows: int = 0
    sketch_columns: int = 0
    sketch_seed: int = 0
    sketch_k: int = 0
    sketch_k_fraction: float = 0.0
    sketch_bits: int = 0
    value_bits: int = 0
    value_blocks: int = 0
    sketch_rotate: int = 0
    in_switch_sketch: bool = False
    adaptive_choices: tuple[str, ...] = ()
    sketch_base: Optional[int] = None
    pair_stream_base: Optional[int] = None
    lut_id: int = 0
    switch_ip: str = DEFAULT_SWITCH_IP
    switch_mac: str = DEFAULT_SWITCH_MAC
    generation: int = P.FIRST_GENERATION
    generation_cause: str = ""
    sum_saturates: bool = False

    def __post_init__(self):
        object.__setattr__(self, "workers", tuple(self.workers))
        try:
            P.check_generation(self.generation)
        except ValueError as exc:
            raise ConfigError(f"job {self.job_id}: {exc}") from None
        try:
            info = codec_names.lookup(self.codec)
        except codec_names.UnknownCodecError as exc:
            raise ConfigError(f"job {self.job_id}: {exc}") from None
        if not info.through_switch:
            raise ConfigError(f"job {self.job_id}: codec {self.codec!r} does not go through the "
                              "switch (plain all-reduce): it needs no job")
        if not self.workers:
            raise ConfigError(f"job {self.job_id}: no workers")
        if len(self.workers) > P.MAX_WORKERS:
            raise ConfigError(f"job {self.job_id}: {len(self.workers)} workers; the program "
                              f"supports at most {P.MAX_WORKERS} (32-bit contributor bitmap)")
        seen: dict[str, int] = {}
        for i, w in enumerate(self.workers):
            if w.key in seen:
                raise ConfigError(f"job {self.job_id}: workers {seen[w.key]} and {i} share the "
                                  f"address {w.key}; the switch tells workers apart by it")
            seen[w.key] = i
        if info.lut:          # thc, adaptive: the switch maps THC's indices through a LUT
            table = tuple(self.thc_table or pipeline.THC_DEFAULT_TABLE)
            object.__setattr__(self, "thc_table", table)
            if not self.thc_granularity:
                object.__setattr__(self, "thc_granularity", max(table))
        elif self.thc_table is not None:
            raise ConfigError(f"job {self.job_id}: a THC table is only for codecs with a LUT "
                              f"({', '.join(n for n in CODECS if codec_names.lookup(n).lut)})")
        if self.codec in SKETCH_CODECS:
            if not self.sketch_rows:
                object.__setattr__(self, "sketch_rows", P.SKETCH_ROWS if self.in_switch_sketch
                                   else DEFAULT_SKETCH_ROWS[self.codec])
            if not self.sketch_columns:
                object.__setattr__(self, "sketch_columns", DEFAULT_SKETCH_COLUMNS[self.codec])
        elif self.in_switch_sketch:
            raise ConfigError(f"job {self.job_id}: in-switch sketching needs a sketch codec")
        if self.codec == "adaptive":
            try:
                object.__setattr__(self, "adaptive_choices",
                                   codec_names.check_adaptive_choices(self.adaptive_choices))
            except ValueError as exc:
                raise ConfigError(f"job {self.job_id}: {exc}") from None
        elif self.adaptive_choices:
            raise ConfigError(f"job {self.job_id}: adaptive_choices is only for codec adaptive")
        if self.codec == "adaptive" and self.in_switch_sketch:
            raise ConfigError(f"job {self.job_id}: codec adaptive: the workers sketch; in-switch "
                              "sketching is not for it")
        if self.codec == "sketched_sgd":
            self._check_sketched_sgd()
        else:
            for name in SKETCHED_SGD_FIELDS:
                if getattr(self, name):
                    raise ConfigError(f"job {self.job_id}: {name} is only for codec sketched_sgd")
        if self.in_switch_sketch and self.sketch_rows != P.SKETCH_ROWS:
            raise ConfigError(f"job {self.job_id}: in-switch sketches have {P.SKETCH_ROWS} rows "
                              f"(sketch_rows={self.sketch_rows})")
        _parse_ip(self.switch_ip, "switch IP")
        parse_mac(self.switch_mac)

    def _check_sketched_sgd(self) -> None:
        """Fill in sketched_sgd's defaults and refuse what ``SketchedSgdCodec`` would refuse.

        The same checks as the worker's codec, without importing it (the controller does not
        import ``worker``): a worker that joins must be able to build the codec.
        """
        def refuse(what: str) -> None:
            raise ConfigError(f"job {self.job_id}: codec sketched_sgd: {what}")

        def set_default(name: str, value) -> None:
            if not getattr(self, name):
                object.__setattr__(self, name, value)

        if self.in_switch_sketch:
            refuse("the workers sketch; in-switch sketching is not for it")
        for name in ("sketch_rows", "sketch_columns", "sketch_k", "sketch_bits", "value_bits",
                     "value_blocks", "sketch_rotate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                refuse(f"{name}={value!r}: must be an int >= 1 (0: the default)")
        columns = self.sketch_columns        # hina.hashing.check_columns, without torch
        if not 1 <= columns <= 1 << 32 or columns & (columns - 1):
            refuse(f"sketch_columns={columns}: must be a power of two (the hash is masked)")
        if self.sketch_rows * self.sketch_columns >= 1 << 31:
            refuse(f"sketch_rows * sketch_columns = {self.sketch_rows * self.sketch_columns}: "
                   "must be < 2**31")
        fraction = self.sketch_k_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or \
                not (fraction == 0 or 0.0 < fraction <= 1.0):
            refuse(f"k fraction {fraction!r}: must be in (0, 1]")
        if self.sketch_k and fraction:
            refuse(f"give k as a count (sketch_k={self.sketch_k}) or a fraction "
                   f"(sketch_k_fraction={fraction}), not both")
        if not self.sketch_k:
            set_default("sketch_k_fraction", DEFAULT_SKETCHED_SGD["sketch_k_fraction"])
        object.__setattr__(self, "sketch_k_fraction", float(self.sketch_k_fraction))
        headroom = (len(self.workers) - 1).bit_length()     # ceil(log2 n)
        set_default("value_bits", max(SKETCHED_SGD_MIN_VALUE_BITS, headroom + 4))
        for name in ("sketch_bits", "value_blocks", "sketch_rotate"):
            set_default(name, DEFAULT_SKETCHED_SGD[name])
        for name in ("sketch_bits", "value_bits"):
            width = getattr(self, name)
            if not 2 <= width <= 31 or width - headroom - 1 < 1:
                refuse(f"{name}={width}: a field must be 2..31 bits and leave >= 1 magnitude "
                       f"bit beside {headroom} headroom bit(s) for {len(self.workers)} workers "
                       f"(>= {headroom + 2})")

    @property
    def lane_op(self) -> str:
        return CODECS[self.codec]

    @property
    def uses_blocks(self) -> bool:
        """Whether the job's buckets may run block-sparse rounds (``block_sparse``, or
        ``adaptive`` with block_sparse among its choices): its slot copies' ``block_index`` and
        ``block_next`` registers then mean something."""
        if self.codec == "block_sparse":
            return True
        return (self.codec == "adaptive"
                and "block_sparse" in (self.adaptive_choices or codec_names.ADAPTIVE_CHOICES))

    def to_spec(self) -> pipeline.JobSpec:
        """The switch resources of the job (``reg_base`` etc. must have been allocated).

        Raises:
            ConfigError: a value the switch cannot take (the message names it).
        """
        try:
            return pipeline.JobSpec(
                job_id=self.job_id, workers=tuple(w.address() for w in self.workers),
                n_slots=self.n_slots, reg_base=self.reg_base or 0, lut_id=self.lut_id,
                thc_max_value=max(self.thc_table) if self.thc_table else 0,
                sketch_base=self.sketch_base or 0,
                sketch_columns=self.sketch_columns if self.in_switch_sketch else 0,
                sketch_seed=self.sketch_seed, pair_stream_base=self.pair_stream_base or 0,
                words=self.words, generation=self.generation)
        except ValueError as exc:
            raise ConfigError(f"job {self.job_id}: {exc}") from None

    def replace(self, **changes) -> "JobConfig":
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["workers"] = [dataclasses.asdict(w) for w in self.workers]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "JobConfig":
        data = dict(data)
        # state written by earlier versions names some codecs otherwise (hina.codecs)
        data["codec"] = codec_names.upgrade_stored_name(data.get("codec", ""))
        data["workers"] = tuple(WorkerConfig(**w) for w in data["workers"])
        if data.get("thc_table") is not None:
            data["thc_table"] = tuple(data["thc_table"])
        data["adaptive_choices"] = tuple(data.get("adaptive_choices") or ())
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def _free_base(used: Sequence[tuple[int, int]], size: int, capacity: int, what: str) -> int:
    """First start in [0, capacity - size] whose range [start, start + size) overlaps none."""
    start = 0
    for base, count in sorted(used):
        if start + size <= base:
            break
        start = max(start, base + count)
    if start + size > capacity:
        raise ConfigError(f"no {size} free {what} left (capacity {capacity}, "
                          f"{sum(c for _, c in used)} in use)")
    return start


def allocate(config: JobConfig, others: Sequence[pipeline.JobSpec]) -> JobConfig:
    """Fill in the job's unset resource bases with ranges none of the ``others`` uses."""
    changes: dict[str, int] = {}
    if config.reg_base is None:
        changes["reg_base"] = _free_base([(o.reg_base, o.n_slots) for o in others],
                                         config.n_slots, P.SLOT_CAPACITY, "slots")
    if config.pair_stream_base is None:
        changes["pair_stream_base"] = _free_base(
            [(o.pair_stream_base, len(o.workers)) for o in others], len(config.workers),
            P.PAIR_STREAMS, "PAIRS streams")
    if config.in_switch_sketch and config.sketch_base is None:
        used = [(o.sketch_base, o.sketch_columns) for o in others if o.sketch_columns]
        changes["sketch_base"] = _free_base(used, config.sketch_columns, P.SKETCH_CAPACITY,
                                            "sketch columns")
    return config.replace(**changes) if changes else config
