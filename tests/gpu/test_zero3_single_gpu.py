"""The main job under the project's own ZeRO-3 accelerate config (accelerate_configs/zero3.yaml, bf16) on one CUDA
process: two updates (B, then S), the final model gathered and saved. CUDA only (the CPU form of the same job, two
gloo processes, is tests/multiprocess/test_recipes_zero3.py); it has not run yet: no GPU was lent so far."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_devices import GPU_MARKS

from codapo_trl.testing import free_port


ROOT = Path(__file__).resolve().parents[2]

pytestmark = GPU_MARKS


def test_main_job_under_zero3_on_one_gpu(tiny_recipe, tmp_path):
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (benchmarks/gpu_pack.py --deepspeed packs it)")
    out = tmp_path / "run"
    recipe = tiny_recipe(out, save_strategy="no", use_cpu=False, bf16=True, dtype="bfloat16")
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    command += ["--config_file", str(ROOT / "accelerate_configs" / "zero3.yaml"), "--num_processes", "1"]
    command += ["--main_process_port", str(free_port()), str(ROOT / "recipes" / "codapo_math.py")]
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    result = subprocess.run(
        [*command, "--config", str(recipe)], env=env, capture_output=True, text=True, timeout=1200, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    assert [h["codapo/phase"] for h in state["log_history"] if "codapo/phase" in h] == [0.0, 1.0]
    assert (out / "model.safetensors").exists()  # zero3_save_16bit_model: the full weights, gathered
