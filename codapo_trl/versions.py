"""The one version report written into result files (evaluation summaries, analysis results).

Example:
    ```python
    >>> report = package_versions()
    >>> report["python"] == platform.python_version() and "math-verify" in REPORTED_PACKAGES
    True

    ```
"""

from __future__ import annotations

import importlib.metadata
import platform


__all__ = ["REPORTED_PACKAGES", "package_versions"]

REPORTED_PACKAGES = ("codapo-trl", "torch", "transformers", "trl", "vllm", "math-verify")
"""Distributions whose versions decide a result: ours, the model stack, the sampler and the grader. (Evaluation used
to leave out `trl` and analysis `math-verify`; both now report all of them.)"""


def package_versions() -> dict[str, str]:
    """`{"python": ..., package: version}` for each installed package of `REPORTED_PACKAGES` (absent ones are left
    out, e.g. `vllm` on a machine without it)."""
    versions = {"python": platform.python_version()}
    for package in REPORTED_PACKAGES:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions
