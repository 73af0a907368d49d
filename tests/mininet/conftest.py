"""Make ``mininet/hina_mn`` importable (the project's ``mininet/`` folder is not a package)."""
import sys
from pathlib import Path

MININET_DIR = Path(__file__).resolve().parents[2] / "mininet"
if str(MININET_DIR) not in sys.path:
    sys.path.append(str(MININET_DIR))       # appended: 'import mininet' stays Debian's Mininet
