"""The main job under DeepSpeed ZeRO-3 in one process: on CUDA with the project's GPU config
(accelerate_configs/zero3.yaml, bf16), two updates (B, then S), the final model gathered and saved. The CUDA case passed
on an H100 (docs/performance.md, 2026-11-26); the same body runs on CPU with accelerate_configs/cpu_zero3.yaml in float32
(marked `slow`, about 35 s; two CPU processes are tests/multiprocess/test_recipes_zero3.py)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from gpu_devices import GPU_MARKS

from codapo_trl.testing import free_port


ROOT = Path(__file__).resolve().parents[2]

# device: (accelerate config, recipe overrides)
SETTINGS = {
    "cpu": ("cpu_zero3.yaml", dict(use_cpu=True, bf16=False, dtype="float32")),
    "cuda": ("zero3.yaml", dict(use_cpu=False, bf16=True, dtype="bfloat16")),
}


@pytest.mark.parametrize(
    "device",
    [
        pytest.param("cpu", id="cpu-fp32", marks=pytest.mark.slow),
        pytest.param("cuda", id="cuda-bf16", marks=GPU_MARKS),
    ],
)
def test_main_job_under_zero3_in_one_process(device, tiny_recipe, tmp_path):
    pytest.importorskip("deepspeed", reason="DeepSpeed is not installed (benchmarks/gpu_pack.py --deepspeed packs it)")
    config, overrides = SETTINGS[device]
    out = tmp_path / "run"
    recipe = tiny_recipe(out, save_strategy="no", **overrides)
    command = [sys.executable, "-m", "accelerate.commands.launch"]
    command += ["--config_file", str(ROOT / "accelerate_configs" / config), "--num_processes", "1"]
    command += ["--main_process_port", str(free_port()), str(ROOT / "recipes" / "codapo_math.py")]
    env = {**os.environ, "TRL_EXPERIMENTAL_SILENCE": "1"}
    env.pop("ACCELERATE_USE_CPU", None)  # accelerate would drop DeepSpeed (accelerate_configs/cpu_zero3.yaml)
    result = subprocess.run(
        [*command, "--config", str(recipe)], env=env, capture_output=True, text=True, timeout=1200, cwd=tmp_path
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    assert [h["codapo/phase"] for h in state["log_history"] if "codapo/phase" in h] == [0.0, 1.0]
    assert (out / "model.safetensors").exists()  # zero3_save_16bit_model: the full weights, gathered
