"""The TNA dataplane: one running instance of a compiled ``Switch(Pipeline(...))`` program.

A frame goes through the ingress parser, ingress control and ingress deparser, the traffic
manager (unicast, multicast through the same replication engine as v1model's, drop), then for
each copy the egress parser, egress control and egress deparser. What the hardware prepends
is modelled as bytes in front of the frame, so that the program's own parser reads them as it
does on Tofino: the ingress parser sees ``ingress_intrinsic_metadata_t`` (8 bytes) and
``PORT_METADATA_SIZE`` bits of port metadata (zeros), the egress parser sees
``egress_intrinsic_metadata_t`` (27 bytes). The assumptions made without a Tofino model are
listed in docs/dataplane.md, "TNA on the embedded target".
"""
from __future__ import annotations

import sys
from typing import Optional

from ..api import ProcessResult
from ..frontend.controlplane import ControlPlaneView
from . import runtime
from .runtime import ExitControl, ParserError, ParserReject, V1Dataplane, log

PORT_METADATA_BYTES = 8          # Tofino 1: PORT_METADATA_SIZE is 64 bits
UCAST_UNSET = 1 << 9             # ucast_egress_port not written (a 9-bit port cannot equal it)
# Tofino 1's recirculation ports (68 in pipe 0, the same port in pipes 1 to 3): a packet sent
# there comes back to ingress with that ingress_port.
RECIRC_PORTS = frozenset({68, 196, 324, 452})
# tofino1_base.p4's ig_prsr_md.parser_err flags, by P4 error name
# Ingress passes per frame before the engine gives up on it (a guard against a program that
# recirculates forever; Tofino itself has no bound). Above v1model's runtime.MAX_PASSES: HINA's
# TNA program takes HINA_PAIRS + 1 passes per PAIRS packet (17 at 16 pairs).
MAX_PASSES = 64
PARSER_ERR_FLAGS = {"NoMatch": 0x0001, "PacketTooShort": 0x0002, "CounterRange": 0x0004,
                    "Timeout": 0x0008, "PhvOwner": 0x0080, "MultiWrite": 0x0100}


class TnaDataplane(V1Dataplane):
    """A compiled TNA program (implements ``api.Dataplane``; tables, registers, counters,
    multicast groups and the rest of the control API as :class:`runtime.V1Dataplane`)."""

    drop_port = UCAST_UNSET

    def __init__(self, module_ns: dict, digests: dict, controller_headers: tuple,
                 view: ControlPlaneView):
        self.C = runtime.Context()
        self.REG = runtime.Registry()
        blocks = module_ns["build"](sys.modules[runtime.__name__], self.C, self.REG)
        self._b = {role: None if getattr(blk, "empty", False) else blk
                   for role, blk in blocks.items()}
        self._ig = self.REG.tna_classes["ingress"]
        self._eg = self.REG.tna_classes["egress"]
        self.info = self.REG.program_info(digests, controller_headers, view)
        self.cpu_port = None
        self.mcast: dict = {}
        self.sessions: dict = {}
        self._tracing = False

    # ------------------------------------------------------------------ packets
    def process(self, ingress_port: int, frame: bytes, trace: bool = False) -> ProcessResult:
        result = ProcessResult()
        if trace or self._tracing:
            self._set_trace(result.trace if trace else None)
        work = [(ingress_port, frame if type(frame) is bytes else bytes(frame))]
        passes = 0
        try:
            while work:
                passes += 1
                if passes > MAX_PASSES:
                    if trace:
                        result.trace.append(f"dropped: more than {MAX_PASSES} passes")
                    break
                port, data = work.pop(0)
                self._ingress(port, data, result, work)
        except Exception as exc:   # noqa: BLE001 - no frame may take the switch down
            log.exception("dropping frame from port %d after an engine error", ingress_port)
            if trace:
                result.trace.append(f"dropped: engine error {type(exc).__name__}: {exc}")
        return result

    def _note(self, text: str) -> None:
        if self.C.trace is not None:
            self.C.trace.append(text)

    def _parse(self, parser, data: bytes, hdr, meta, intr, prsr) -> bool:
        """Run a parser on ``data``; False when it rejects (the packet is dropped). A parser
        error sets ``parser_err`` and the packet goes on (assumed: Tofino drops it unless the
        program reads parser_err, which HINA's does)."""
        C = self.C
        for c in self.REG.tna_checksums:
            c.acc = 0
        C.start(data)
        try:
            parser(C, hdr, meta, intr)
        except ParserError as e:
            names = self.REG.error_names
            name = names[e.code] if 0 <= e.code < len(names) else str(e.code)
            prsr.parser_err = PARSER_ERR_FLAGS.get(name, 0x0001)
            self._note(f"parser error {name}")
        except ParserReject:
            self._note("parser reject: dropped")
            return False
        return True

    def _ingress(self, port: int, frame: bytes, result: ProcessResult, work: list) -> None:
        C, b = self.C, self._b
        H, M, IMD, PRSR, DPRSR, TM = self._ig
        hdr, meta, imd, prsr, dprsr, tm = H(), M(), IMD(), PRSR(), DPRSR(), TM()
        self._note(f"ingress port {port}, {len(frame)} bytes")
        # ingress_intrinsic_metadata_t: resubmit_flag 0, packet_version 0, the port (9 bits
        # after 7), ingress_mac_tstamp 0; then the port metadata (zeros)
        md = ((port & 0x1FF) << 48).to_bytes(8, "big") + bytes(PORT_METADATA_BYTES)
        if not self._parse(b["ig_parser"], md + frame, hdr, meta, imd, prsr):
            return
        payload = frame[max(C.off - len(md), 0):]
        C.length = len(frame)
        tm.ucast_egress_port = UCAST_UNSET
        head = self._control_and_deparse("ingress", "ig_deparser",
                                         (hdr, meta, imd, prsr, dprsr, tm), dprsr)
        if head is None:
            return
        pkt = head + payload
        copies = []                     # (egress port, rid)
        if tm.ucast_egress_port != UCAST_UNSET:
            copies.append((tm.ucast_egress_port, 0))
        for grp in (tm.mcast_grp_a, tm.mcast_grp_b):
            if grp:
                replicas = self.mcast.get(grp, ())
                self._note(f"multicast group {grp}: {len(replicas)} replicas")
                copies.extend((r.port, r.rid) for r in replicas)
        if not copies:
            self._note("dropped: no egress port and no multicast group")
        for eport, rid in copies:
            if tm.bypass_egress:
                self._send(eport, pkt, result, work)
            else:
                self._egress(eport, rid, pkt, result, work)

    def _egress(self, port: int, rid: int, pkt: bytes, result: ProcessResult, work: list) -> None:
        C, b = self.C, self._b
        H, M, EMD, PRSR, DPRSR, OPORT = self._eg
        hdr, meta, emd, prsr, dprsr, oport = H(), M(), EMD(), PRSR(), DPRSR(), OPORT()
        md = EMD()
        md.egress_port, md.egress_rid, md.pkt_length = port, rid, len(pkt)
        md._v = True
        head: list = []
        md.emit(head)
        md = b"".join(head)
        self._note(f"egress port {port}, rid {rid}")
        if not self._parse(b["eg_parser"], md + pkt, hdr, meta, emd, prsr):
            return
        payload = pkt[max(C.off - len(md), 0):]
        C.length = len(pkt)
        head = self._control_and_deparse("egress", "eg_deparser",
                                         (hdr, meta, emd, prsr, dprsr, oport), dprsr)
        if head is not None:
            self._send(port, head + payload, result, work)

    def _control_and_deparse(self, gress: str, deparser: str, args: tuple,
                             dprsr) -> Optional[bytes]:
        """Run the ``gress`` control on ``args`` (``exit`` ends it) and, unless it set
        ``drop_ctl``, the ``deparser`` block: the headers' bytes, or None for a drop."""
        C, b = self.C, self._b
        if b[gress] is not None:
            try:
                b[gress](*args)
            except ExitControl:
                pass
        if dprsr.drop_ctl & 1:
            self._note(f"dropped in {gress} (drop_ctl)")
            return None
        C.out = out = []
        for c in self.REG.tna_checksums:
            c.acc = 0
        b[deparser](C, args[0], args[1], dprsr)       # (hdr, meta) lead the control's args
        return b"".join(out)

    def _send(self, port: int, frame: bytes, result: ProcessResult, work: list) -> None:
        if port in RECIRC_PORTS:
            self._note(f"recirculate (port {port})")
            work.append((port, frame))
            return
        self._note(f"output port {port}, {len(frame)} bytes")
        result.outputs.append((port, frame))
