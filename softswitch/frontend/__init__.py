"""P4_16 front end of the softswitch target.

Modules, in pipeline order:

* :mod:`.preprocess` runs ``cpp`` as p4c does (``-undef -nostdinc -x assembler-with-cpp``, our
  ``softswitch/p4include`` on the include path) and maps cpp's line markers back to files;
* :mod:`.cpp_sandbox` runs cpp under limits (memory, CPU, output, time, its own process group)
  and, for pushed programs, Landlock; :mod:`.bundle` preprocesses a program pushed over
  P4Runtime confined to its own files and ``p4include``;
* ``p4.lark`` is the LALR(1) grammar; :mod:`.lexer` retypes tokens (type names, type-argument
  brackets) like p4c's lexer; :mod:`.parser` parses and builds the IR;
* :mod:`.ir` declares the IR nodes (dataclasses with source spans);
* :mod:`.types` the checked types; :mod:`.scope` symbols and scopes; :mod:`.typecheck` resolves
  names and checks declarations and statements, :mod:`.exprs` expressions (widths, constant
  folding); both reject invalid programs with ``file:line:col: error: ...``.
"""
