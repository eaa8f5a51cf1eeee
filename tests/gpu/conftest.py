"""The GPU tier's device parameter: each test body runs on CPU in float32 (in the default suite, so that it cannot
rot) and on CUDA in bf16 (marker `gpu`, `make test-gpu`; skipped, with the reason, where no CUDA device is seen).

`device_args` wraps `helpers_training.make_args` (left as it is): on CUDA it turns the CPU pin off and states bf16
the way the paper's recipes do (weights loaded in bfloat16, SDPA attention, `bf16=True`).
"""

from __future__ import annotations

import pytest
from gpu_devices import CUDA_PRECISION, DEVICES
from helpers_training import make_args

from codapo_trl import CoDaPOConfig


@pytest.fixture(params=DEVICES)
def device(request) -> str:
    """`"cpu"` (float32, `PINNED_PRECISION`) or `"cuda"` (bf16, `CUDA_PRECISION`)."""
    return request.param


@pytest.fixture
def device_args(device):
    """`device_args(tmp_path, config_class=CoDaPOConfig, **overrides)`: `make_args` for this test's device."""

    def build(tmp_path, config_class=CoDaPOConfig, **overrides):
        if device == "cuda":
            overrides = {**CUDA_PRECISION, "use_cpu": False, **overrides}
        return make_args(tmp_path, config_class=config_class, **overrides)

    return build
