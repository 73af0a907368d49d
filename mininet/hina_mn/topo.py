"""Topologies for HINA on Mininet: a star of workers around one switch, or a tutorials-style
``topology.json``; and the link impairments (bandwidth, delay, loss) and how they are applied.

Addressing (star): worker host ``hI`` (I = 1..N) has ``10.0.0.I/24`` and MAC
``02:00:00:00:01:(I-1)`` on ``hI-eth0``, wired to switch port I (``s1-ethI``). The switch is
addressed as ``10.0.0.254`` / ``02:00:00:00:00:fe`` (the P4 program answers no ARP: hosts get a
static neighbour entry). With ``control_network`` every host also has ``hI-eth1`` with
``192.168.0.I/24`` on a plain Linux bridge: the management network that ``torch.distributed``'s
rendezvous and gloo use, since the P4 switch forwards nothing but HINA.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from mininet.node import Switch
from mininet.topo import Topo

SWITCH_NAME = "s1"
CONTROL_BRIDGE = "mgmt0"
CONTROL_SUBNET = "192.168.0.0/24"
CONTROL_PREFIX = "192.168.0."
FIRST_WORKER_MAC = 0x020000000100
DATA_PREFIX = "10.0.0."
PREFIX_LEN = 24
LOSS_METHODS = ("auto", "netem", "nft", "switch")
_NFT_TABLE = "hina_loss"
_NFT_SCALE = 1_000_000          # loss is drawn as numgen random mod this < pct * scale / 100


def mac_str(mac: int) -> str:
    return ":".join(f"{(mac >> s) & 0xFF:02x}" for s in range(40, -1, -8))


def mac_int(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


@dataclass(frozen=True)
class LinkShape:
    """Impairments of every worker link (Mininet TCLink parameters).

    Attributes:
        bw: bandwidth in Mbit/s (HTB), or None for unlimited.
        delay: one-way delay per direction, e.g. ``"1ms"`` (netem), or None.
        loss: loss in percent per direction (netem, nft or the switch: see ``loss_method``).
    """
    bw: Optional[float] = None
    delay: Optional[str] = None
    loss: float = 0.0

    def __post_init__(self):
        if self.bw is not None and not self.bw > 0:
            raise ValueError(f"bw={self.bw!r}: Mbit/s, must be > 0")
        if not 0.0 <= self.loss < 100.0:
            raise ValueError(f"loss={self.loss!r}: percent, must be in [0, 100)")
        if self.delay is not None and not re.fullmatch(r"\d+(\.\d+)?(us|ms|s)", self.delay):
            raise ValueError(f"delay={self.delay!r}: expected a number with a unit, e.g. '2ms'")

    def tclink_params(self, with_loss: bool) -> dict:
        """Keyword arguments of ``Topo.addLink`` for TCLink (only those that are set)."""
        params: dict = {}
        if self.bw is not None:
            params["bw"] = self.bw
        if self.delay is not None:
            params["delay"] = self.delay
        if with_loss and self.loss:
            params["loss"] = self.loss
        return params


class IpBridge(Switch):
    """A plain Linux bridge made with ``ip link`` (no Open vSwitch, no ``brctl``): the control
    network. The bridge device has the node's name."""

    def start(self, controllers) -> None:
        subprocess.run(["ip", "link", "del", self.name], capture_output=True, check=False)
        subprocess.run(["ip", "link", "add", "name", self.name, "type", "bridge"], check=True)
        for intf in self.intfList():
            if intf.name != "lo":
                subprocess.run(["ip", "link", "set", intf.name, "master", self.name], check=True)
        subprocess.run(["ip", "link", "set", self.name, "up"], check=True)

    def stop(self, deleteIntfs: bool = True) -> None:  # noqa: N803 (Mininet's signature)
        subprocess.run(["ip", "link", "del", self.name], capture_output=True, check=False)
        Switch.stop(self, deleteIntfs)


#: Longest name suffix: ``s1<suffix>-eth253`` must fit Linux's 15-character interface names.
MAX_SUFFIX = 6
_SUFFIX = re.compile(rf"[0-9a-z]{{0,{MAX_SUFFIX}}}")


class HinaTopo(Topo):
    """A topology with the facts HINA needs: which hosts are workers (in rank order), which
    switch aggregates, and each worker's switch port, IPv4 and MAC address.

    Args:
        suffix: appended to the names of the nodes whose interfaces live in the root namespace
            (the star's switch ``s1<suffix>``, the control bridge ``mgmt0<suffix>``), so that
            networks built at the same time (two test runs) never share an interface name.
            Up to ``MAX_SUFFIX`` lower-case letters and digits; default none.
    """

    def __init__(self, *args, suffix: str = "", **params):
        if not _SUFFIX.fullmatch(suffix):
            raise ValueError(f"suffix={suffix!r}: up to {MAX_SUFFIX} lower-case letters and "
                             "digits (interface names have at most 15 characters)")
        self.suffix = suffix
        self.workers: list[str] = []
        self.aggregator = SWITCH_NAME + suffix
        self.control_bridge = CONTROL_BRIDGE + suffix
        self.host_commands: dict[str, list[str]] = {}
        Topo.__init__(self, *args, **params)

    def worker_port(self, host: str) -> int:
        """The aggregating switch's port number of ``host``'s link."""
        for a, b, info in self.links(withInfo=True):
            if {a, b} == {host, self.aggregator}:
                return info["port2"] if b == self.aggregator else info["port1"]
        raise ValueError(f"{host} has no link to the aggregating switch {self.aggregator}")

    def add_control_network(self, shape: Optional[LinkShape] = None) -> None:
        """Give every worker a second interface on a plain bridge (see the module docstring).

        ``shape``: the control links' impairments (default none). Only its bandwidth and delay
        are applied (TCLink HTB/netem on both ends of each link): a benchmark that runs gloo's
        own all-reduce over the control network limits these links to the data links' rate
        (``bench/bench_tta.py``)."""
        params = shape.tclink_params(with_loss=False) if shape is not None else {}
        self.addSwitch(self.control_bridge, cls=IpBridge, dpid="1" * 16)
        for rank, host in enumerate(self.workers):
            self.addLink(host, self.control_bridge, port1=1, port2=rank + 1, **params)

    def control_ip(self, rank: int) -> str:
        return f"{CONTROL_PREFIX}{rank + 1}"


class StarTopo(HinaTopo):
    """``n_workers`` hosts, each with one link to switch ``s1`` (port I for host hI).

    Args:
        n_workers: worker hosts (1..253).
        shape: the impairments of every worker link.
        netem_loss: apply ``shape.loss`` with netem (TCLink); otherwise loss is applied later.
        control_network: add the management bridge (needed by DDP mode).
        suffix: see :class:`HinaTopo` (``StarTopo(4, suffix="t1")``: switch ``s1t1``).
        control_shape: bandwidth / delay of the control network's links (default: unlimited).
    """

    def build(self, n_workers: int = 4, shape: LinkShape = LinkShape(), netem_loss: bool = True,
              control_network: bool = True, control_shape: Optional[LinkShape] = None) -> None:
        if not 1 <= n_workers <= 253:
            raise ValueError(f"n_workers={n_workers}: must be in [1, 253] (one /24)")
        self.addSwitch(self.aggregator)
        for i in range(1, n_workers + 1):
            host = self.addHost(f"h{i}", ip=f"{DATA_PREFIX}{i}/{PREFIX_LEN}",
                                mac=mac_str(FIRST_WORKER_MAC + i - 1))
            self.addLink(host, self.aggregator, port1=0, port2=i,
                         **shape.tclink_params(with_loss=netem_loss))
            self.workers.append(host)
        if control_network:
            self.add_control_network(control_shape)


class JsonTopo(HinaTopo):
    """A p4lang-tutorials ``topology.json``: ``hosts`` (``ip``, ``mac``, ``commands``),
    ``switches`` and ``links`` (``["h1", "s1-p1"]``, optionally latency and bandwidth).

    The hosts that link to the switch named by ``aggregator`` (default: the switch every host
    links to) are the workers, in name order. Switch ``program``/``runtime_json`` keys are
    ignored: the launcher pushes ``p4/hina.p4`` and creates the job itself.
    """

    def build(self, path: str = "topology.json", shape: LinkShape = LinkShape(),
              netem_loss: bool = True, control_network: bool = True,
              aggregator: Optional[str] = None) -> None:
        try:
            spec = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path}: cannot read the topology: {exc}") from None
        for key in ("hosts", "switches", "links"):
            if key not in spec:
                raise ValueError(f"{path}: no {key!r} (a tutorials-style topology.json has "
                                 "hosts, switches and links)")
        for name in spec["switches"]:
            self.addSwitch(name)
        for name, host in spec["hosts"].items():
            if "ip" not in host:
                raise ValueError(f"{path}: host {name} has no 'ip'")
            self.addHost(name, ip=host["ip"], mac=host.get("mac"))
            self.host_commands[name] = list(host.get("commands", []))
        for i, link in enumerate(spec["links"]):
            if not 2 <= len(link) <= 4:
                raise ValueError(f"{path}: links[{i}]={link!r}: expected [a, b, latency?, bw?]")
            (a, pa), (b, pb) = _endpoint(link[0], path), _endpoint(link[1], path)
            params = shape.tclink_params(with_loss=netem_loss)
            if len(link) > 2 and str(link[2]) not in ("0", "0ms"):
                params["delay"] = f"{link[2]}ms" if isinstance(link[2], (int, float)) else link[2]
            if len(link) > 3 and link[3] is not None:
                params["bw"] = link[3]
            ports = {}
            if pa is not None:
                ports["port1"] = pa
            if pb is not None:
                ports["port2"] = pb
            self.addLink(a, b, **ports, **params)
        hosts = sorted(spec["hosts"], key=_natural_key)
        attached: dict[str, list[str]] = {h: [] for h in hosts}
        for a, b in self.links():
            for host, other in ((a, b), (b, a)):
                if host in attached and other in spec["switches"]:
                    attached[host].append(other)
        if aggregator is None:
            common = set.intersection(*(set(s) for s in attached.values())) if hosts else set()
            if len(common) != 1:
                raise ValueError(
                    f"{path}: HINA aggregates in one switch, so every worker host must link to "
                    f"the same switch (hosts link to: "
                    f"{', '.join(f'{h}->{s}' for h, s in attached.items())}); "
                    "name it with --aggregator")
            aggregator = common.pop()
        if aggregator not in spec["switches"]:
            raise ValueError(f"{path}: --aggregator {aggregator}: no such switch")
        self.aggregator = aggregator
        self.workers = [h for h in hosts if aggregator in attached[h]]
        if control_network:
            self.add_control_network()


def _endpoint(text: str, path: str) -> tuple[str, Optional[int]]:
    """``"s1-p2"`` -> ("s1", 2); ``"h1"`` -> ("h1", None)."""
    node, sep, port = str(text).partition("-p")
    if sep and not port.isdigit():
        raise ValueError(f"{path}: link endpoint {text!r}: expected NODE or SWITCH-pPORT")
    return node, int(port) if sep else None


def _natural_key(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


# ------------------------------------------------------------------------------------------------
# Loss without netem
# ------------------------------------------------------------------------------------------------
def netem_missing() -> Optional[str]:
    """Why netem cannot be used here (None when it can): tries a netem qdisc on a scratch veth."""
    if shutil.which("tc") is None:
        return "the 'tc' command (iproute2) is not installed"
    name = f"hnp{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "link", "add", name, "type", "veth", "peer", "name", name + "x"],
                          capture_output=True, text=True)
    if made.returncode != 0:
        return f"cannot create a veth to probe netem: {made.stderr.strip()}"
    try:
        probe = subprocess.run(["tc", "qdisc", "add", "dev", name, "root", "netem", "loss", "0%"],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            return (f"the kernel has no netem qdisc (sch_netem; 'tc qdisc add ... netem' says: "
                    f"{probe.stderr.strip()})")
        return None
    finally:
        subprocess.run(["ip", "link", "del", name], capture_output=True)


def nft_missing() -> Optional[str]:
    if shutil.which("nft") is None:
        return "the 'nft' command is not installed (apt-get install nftables)"
    return None


def nft_loss_rules(intf: str, loss_pct: float) -> str:
    """An nftables ruleset dropping ``loss_pct`` % of the frames ``intf`` sends and receives
    (netdev ingress and egress hooks: the same place as netem on both ends of the link)."""
    threshold = round(loss_pct / 100.0 * _NFT_SCALE)
    rule = f"numgen random mod {_NFT_SCALE} < {threshold} counter drop"
    return (f"table netdev {_NFT_TABLE} {{\n"
            f"  chain ingress {{ type filter hook ingress device \"{intf}\" priority 0; "
            f"{rule}; }}\n"
            f"  chain egress {{ type filter hook egress device \"{intf}\" priority 0; "
            f"{rule}; }}\n"
            f"}}\n")


def nft_dropped(host, intf: str) -> int:
    """Frames the nft loss rules of ``host`` dropped on ``intf`` (both directions)."""
    out = host.cmd(f"nft list table netdev {_NFT_TABLE}")
    return sum(int(n) for n in re.findall(r"counter packets (\d+)", out))
