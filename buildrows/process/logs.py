"""Each row's output kept on disk: `build/logs/ROW/` of the project (or `--log-dir DIR/ROW/`).

`row.log` holds everything the row printed (the steps' own output included, without colour);
each external step also has a file of its own, numbered in the order they ran
(`01-build-scikit-build-core-wheel.log`) with its command, directory, the variables it set, its
output and its exit status. A row's directory is emptied when the row builds again, so what is
there is its newest build.
"""

from __future__ import annotations

import re
import shutil
import threading
from pathlib import Path
from typing import TextIO


def log_root(project: Path, log_dir: str | None) -> Path:
    """Where the rows' log directories go."""
    return Path(log_dir).expanduser().resolve() if log_dir else project / "build" / "logs"


def slug(step: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", step).strip("-").lower()[:60] or "step"


class RowLogs:
    """One row's log directory: its row.log and the files of its steps."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.row_log = directory / "row.log"
        self.last_step: Path | None = None  # the step log written last (a failed row's: its failed step's)
        self._n = 0
        self._lock = threading.Lock()

    def start(self) -> TextIO:
        """Empty the directory (an earlier build's logs) and open row.log."""
        if self.directory.exists():
            shutil.rmtree(self.directory, ignore_errors=True)
        self.directory.mkdir(parents=True, exist_ok=True)
        return self.row_log.open("w", encoding="utf-8", errors="replace")

    def step_path(self, step: str) -> Path:
        with self._lock:
            self._n += 1
            path = self.directory / f"{self._n:02d}-{slug(step)}.log"
            self.last_step = path
            return path
