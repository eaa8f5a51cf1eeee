"""The repository's scripts (experiments/, benchmarks/) loaded as modules by tests, without editing `sys.path`."""

import hashlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType


def load_script(path: Path, name: str) -> ModuleType:
    """The script at `path`, executed as a module called `name` and registered in `sys.modules` under that name
    (dataclasses, pickling and the scripts' worker processes look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def registered_hashes(text: str) -> dict[str, str]:
    """The `| `PATH` | `SHA256` |` rows between a registration's `registered-hashes` markers."""
    block = text.split("<!-- registered-hashes: begin -->")[1].split("<!-- registered-hashes: end -->")[0]
    return dict(re.findall(r"^\| `([^`]+)` \| `([0-9a-f]{64})` \|$", block, flags=re.MULTILINE))


def changed_since_registered(root: Path, recorded: dict[str, str]) -> list[str]:
    """The registered paths (relative to `root`) whose SHA-256 is no longer the recorded one."""
    return [
        path for path, digest in recorded.items() if hashlib.sha256((root / path).read_bytes()).hexdigest() != digest
    ]
