"""Pieces shared by the command-line tools (`codapo-train`, `codapo-eval`, `codapo-analyze`, ...): the log format,
the exit status and message of a usage error, the default timestamped output directory, and reading their JSON
inputs with a clear error."""

from __future__ import annotations

import datetime as _dt
import json
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any


EXIT_USAGE = 2
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: int = logging.INFO) -> None:
    """Every command's log format on the root logger (a no-op when the root logger is already configured)."""
    logging.basicConfig(format=LOG_FORMAT, level=level)


def usage_error(program: str, message: str) -> int:
    """Write `program: error: message` to standard error (as argparse does) and return the usage exit status."""
    sys.stderr.write(f"{program}: error: {message}\n")
    return EXIT_USAGE


def timestamped_output_dir(kind: str, name: str, fallback: str) -> Path:
    """`outputs/<kind>/<stem of name>-<YYYYmmdd-HHMMSS>`; `fallback` when `name` leaves no usable stem."""
    stem = re.sub(r"[^\w.-]+", "_", Path(name.rstrip("/")).name or name).strip("_") or fallback
    return Path("outputs") / kind / f"{stem}-{_dt.datetime.now().strftime('%Y%m%d-%H%M%S')}"


def read_json_file(path: str | os.PathLike, what: str) -> Any:
    """The parsed content of the JSON file `path`; `what` names it in the errors (missing file, invalid JSON)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No such {what}: {path}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path} is not valid JSON: {err}") from err
