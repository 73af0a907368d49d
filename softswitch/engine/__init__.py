"""The softswitch engine: checked IR -> Python, and the v1model runtime.

* :mod:`.codegen` generates one Python module per program (header/struct classes with
  ``__slots__``; one closure factory
  per control and parser, tables and externs created through a registry); it is ``exec``'d
  once per program, never walked per packet. Its parts: :mod:`.gen_types` (type classes),
  :mod:`.gen_exprs` (expressions), :mod:`.gen_stmts` (statements, calls), :mod:`.gen_externs`
  (extern calls), :mod:`.gen_base` (shared helpers);
* :mod:`.runtime` holds what the generated code calls (``RT``), the per-packet context (``C``),
  the registry (``REG``, :mod:`.registry`) and :class:`.runtime.V1Dataplane`, the ``api.Dataplane`` that runs
  BMv2 simple_switch's packet flow (PRE, clones, resubmit, recirculate);
* :mod:`.tables` match-action tables and control-plane validation;
* :mod:`.externs` hashes, checksums, registers, counters and meters, bit-exact with BMv2.
"""
