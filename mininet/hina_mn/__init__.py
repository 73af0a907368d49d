"""HINA on Mininet: switch classes, topologies and the deployment that runs a job end to end.

Installed as ``hina.mininet`` (``pyproject.toml`` maps it to ``mininet/hina_mn``). The project's
``mininet/`` folder itself is deliberately not a Python package, so that ``import mininet`` always
finds Debian's Mininet.
"""
