"""``python -m hina.softswitch``: the same as the ``softswitch`` console script."""
import sys

from .cli import main

sys.exit(main())
