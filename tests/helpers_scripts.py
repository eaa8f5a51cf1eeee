"""The repository's scripts (experiments/, benchmarks/) loaded as modules by tests, without editing `sys.path`."""

import importlib.util
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
