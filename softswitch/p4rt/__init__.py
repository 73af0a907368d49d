"""The parts of the P4Runtime server (:mod:`softswitch.p4runtime_server`), one responsibility
each:

* :mod:`.errors` failures as gRPC statuses;
* :mod:`.device_config` the device config (P4 source as JSON) a pipeline push carries;
* :mod:`.pipeline` a pushed P4Info checked against the compiled program; bytestrings <-> ints;
* :mod:`.arbiter` primary election on ``StreamChannel``;
* :mod:`.codec` entity messages <-> :mod:`softswitch.api` objects;
* :mod:`.writer` and :mod:`.reader` the ``Write`` and ``Read`` RPCs.
"""
