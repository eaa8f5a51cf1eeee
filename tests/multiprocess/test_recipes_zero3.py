"""The main job launched by `accelerate launch recipes/codapo_math.py` under DeepSpeed ZeRO-3 with two CPU processes."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codapo_trl.testing import free_port


ROOT = Path(__file__).resolve().parents[2]


def run_zero3(recipe_args: list[str], tmp_path: Path) -> None:
    ds_json = tmp_path / "ds_z3.json"
    ds_json.write_text(
        json.dumps(
            {
                "zero_optimization": {
                    "stage": 3,
                    "stage3_param_persistence_threshold": 0,
                    "stage3_gather_16bit_weights_on_model_save": True,
                },
                "bf16": {"enabled": False},
                "train_batch_size": "auto",
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "gradient_clipping": "auto",
            }
        )
    )
    config = tmp_path / "zero3.yaml"
    config.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
        f"deepspeed_config:\n  deepspeed_config_file: {ds_json}\n  zero3_init_flag: true\n"
        "machine_rank: 0\nnum_machines: 1\nnum_processes: 2\n"
        "rdzv_backend: static\nsame_network: true\nuse_cpu: true\n"
    )
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    env.pop("ACCELERATE_USE_CPU", None)
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(config)]
    command += ["--main_process_port", str(free_port())]
    result = subprocess.run(
        command + [str(ROOT / "recipes" / "codapo_math.py"), *recipe_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-6000:]


def test_main_job_under_zero3_with_two_processes(tiny_recipe, tmp_path):
    out = tmp_path / "run"
    recipe = tiny_recipe(out, save_strategy="no")
    run_zero3(["--config", str(recipe)], tmp_path)
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    assert [h["codapo/phase"] for h in state["log_history"] if "codapo/phase" in h] == [0.0, 1.0]
    assert (out / "model.safetensors").exists()


@pytest.mark.slow
def test_demo_recipe_two_updates_under_zero3(tmp_path):
    """The real demo recipe (SmolLM2-135M) for 2 updates under ZeRO-3 with 2 processes."""
    out = tmp_path / "demo"
    recipe = ROOT / "recipes/SmolLM2-135M-Instruct/codapo/config_demo.yaml"
    run_zero3(
        ["--config", str(recipe), "--max_steps", "2", "--output_dir", str(out), "--save_strategy", "no",
         "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "4"],
        tmp_path,
    )  # fmt: skip
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2
