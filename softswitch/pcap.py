"""A minimal, thread-safe writer of classic pcap files (what tcpdump and scapy's ``rdpcap`` read).

Ports use it for ``--pcap DIR``: each frame is written and flushed as it passes, so a capture can
be read while the switch still runs, and a crash loses at most the frame being written.

Example::

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "p.pcap")
    >>> with PcapWriter(path) as w:
    ...     w.write(b"\\x00" * 14)
    >>> os.path.getsize(path) == GLOBAL_HEADER.size + RECORD_HEADER.size + 14
    True
"""
from __future__ import annotations

import struct
import threading
import time
from typing import Optional

PCAP_MAGIC = 0xA1B2C3D4          # microsecond timestamps, written in native byte order
PCAP_VERSION = (2, 4)
PCAP_SNAPLEN = 65535             # the largest frame recorded whole
LINKTYPE_ETHERNET = 1            # DLT_EN10MB
MICROSECONDS = 1_000_000

GLOBAL_HEADER = struct.Struct("=IHHiIII")   # magic, major, minor, thiszone, sigfigs, snaplen, linktype
RECORD_HEADER = struct.Struct("=IIII")      # ts_sec, ts_usec, incl_len, orig_len


class PcapWriter:
    """Append Ethernet frames to a new pcap file.

    Args:
        path: the file to create (truncated if it exists).
        linktype: the pcap link type; Ethernet by default.
    """

    def __init__(self, path: str, linktype: int = LINKTYPE_ETHERNET):
        self.path = path
        self._lock = threading.Lock()
        self._file = open(path, "wb")
        self._file.write(GLOBAL_HEADER.pack(PCAP_MAGIC, *PCAP_VERSION, 0, 0, PCAP_SNAPLEN, linktype))
        self._file.flush()

    def write(self, frame: bytes, timestamp: Optional[float] = None) -> None:
        """Record one frame (truncated to the snap length), stamped now unless ``timestamp``."""
        ts = time.time() if timestamp is None else timestamp
        seconds = int(ts)
        micros = int((ts - seconds) * MICROSECONDS)
        data = frame[:PCAP_SNAPLEN]
        with self._lock:
            if self._file.closed:
                return
            self._file.write(RECORD_HEADER.pack(seconds, micros, len(data), len(frame)))
            self._file.write(data)
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.close()

    def __enter__(self) -> "PcapWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
