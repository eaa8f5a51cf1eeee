"""The GPU tier's devices and their precision (imported by tests/gpu/conftest.py and the tier's tests)."""

import pytest
import torch


CUDA = torch.cuda.is_available()
NO_CUDA_REASON = (
    "no CUDA device: torch.cuda.is_available() is False (the GPU tier runs on a lent GPU, docs/performance.md)"
)

# The recipes' precision on a GPU (recipes/Qwen2.5-Math-1.5B/codapo/config_math.yaml): bf16 weights and autocast.
CUDA_PRECISION = dict(bf16=True, fp16=False, model_init_kwargs={"dtype": "bfloat16", "attn_implementation": "sdpa"})

GPU_MARKS = [pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason=NO_CUDA_REASON)]
"""The marks of every CUDA case: `gpu`, and a skip with its reason where no CUDA device is seen."""

DEVICES = [pytest.param("cpu", id="cpu-fp32"), pytest.param("cuda", id="cuda-bf16", marks=GPU_MARKS)]
