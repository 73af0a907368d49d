"""The controller's state file: the switch, the pushed pipeline and the installed jobs.

Switch state does not survive a switch restart; this file does. ``hina-ctl resync`` re-pushes the
pipeline and re-creates every job from it. The file is JSON, written atomically (temporary file
and rename) so a crash never leaves half a file; the job service re-reads it when it changes.

Location: ``--state FILE``, else ``$HINA_CTL_STATE``, else ``~/.local/state/hina/ctl.json``.
"""
from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .config import ConfigError, JobConfig
from .target import PipelineConfig

__all__ = ["ControllerState", "default_state_path", "STATE_VERSION"]

STATE_VERSION = 1
STATE_ENV = "HINA_CTL_STATE"


def default_state_path() -> Path:
    env = os.environ.get(STATE_ENV)
    if env:
        return Path(env)
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "hina" / "ctl.json"


@dataclass
class ControllerState:
    """Everything the controller must remember across runs and switch restarts."""
    pipeline: Optional[PipelineConfig] = None
    jobs: dict[int, JobConfig] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> "ControllerState":
        """The state in ``path`` (empty when the file does not exist).

        Raises:
            ConfigError: the file is unreadable or not a state file of this version.
        """
        path = Path(path)
        if not path.exists():
            return cls()
        try:
            data = json.loads(path.read_text())
            if data.get("version") != STATE_VERSION:
                raise ConfigError(f"state file {path}: version {data.get('version')!r}, "
                                  f"expected {STATE_VERSION}")
            pipeline = data.get("pipeline")
            return cls(PipelineConfig.from_json(pipeline) if pipeline else None,
                       {int(j["job_id"]): JobConfig.from_json(j) for j in data.get("jobs", [])})
        except (OSError, ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, ConfigError):
                raise
            raise ConfigError(f"state file {path} is unreadable: {exc}") from None

    def save(self, path: Path) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        data = {"version": STATE_VERSION,
                "pipeline": self.pipeline.to_json() if self.pipeline else None,
                "jobs": [self.jobs[j].to_json() for j in sorted(self.jobs)]}
        fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as out:
                json.dump(data, out, indent=1)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
