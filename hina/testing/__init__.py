"""Helpers that drive a switch from tests and benchmarks: frames and job entries at the wire
level (:mod:`.frames`), the embedded target and BMv2 behind one interface (:mod:`.targets`), and
an in-process switch with worker transports (:mod:`.switchjob`). Shipped with the package so the
benchmarks under ``bench/`` and users' own tests can use them."""
