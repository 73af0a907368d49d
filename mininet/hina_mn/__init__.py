"""HINA on Mininet: switch classes, topologies and the deployment that runs a job end to end.

This directory is importable as ``hina_mn`` once ``mininet/`` (the project folder) is on
``sys.path``; ``mininet/run.py`` does that. The project folder itself is deliberately not a Python
package, so that ``import mininet`` always finds Debian's Mininet.
"""
