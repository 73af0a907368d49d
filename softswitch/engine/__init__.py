"""The softswitch engine: checked IR -> Python, and the v1model runtime.

* :mod:`.codegen` generates one Python module per program (header/struct classes with
  ``__slots__`` or, for wide ones, an instance dict over class defaults; one closure factory
  per control and parser, tables and externs created through a registry); it is ``exec``'d
  once per program, never walked per packet;
* :mod:`.runtime` holds what the generated code calls (``RT``), the per-packet context (``C``),
  the registry (``REG``) and :class:`.runtime.V1Dataplane`, the ``api.Dataplane`` that runs
  BMv2 simple_switch's packet flow (PRE, clones, resubmit, recirculate);
* :mod:`.tables` match-action tables and control-plane validation;
* :mod:`.externs` hashes, checksums, registers, counters and meters, bit-exact with BMv2.
"""
