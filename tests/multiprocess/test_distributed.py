"""Two CPU processes (gloo), plain DDP and DeepSpeed ZeRO-3: same selection on both ranks, same weights as one process.

With 6 rows per process and G = 4, question 1's rollouts straddle the two processes, so group statistics are only
right if they are computed on gathered tensors.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from codapo_trl.testing import free_port


ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "workers" / "train_codapo.py"

ZERO3_JSON = {
    # Every parameter is partitioned (the default threshold would keep a tiny model's parameters whole).
    "zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 0},
    "fp16": {"enabled": False},
    "bf16": {"enabled": False},
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": "auto",
    "gradient_clipping": "auto",
    "steps_per_print": 1000000,
}


def run_worker(out: Path, model: str, *options: str, accelerate_config: Path | None = None) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([str(ROOT), str(ROOT / "tests")])  # codapo_trl, and the tests' fakes
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    env.pop("ACCELERATE_USE_CPU", None)  # with a DeepSpeed config it would drop DeepSpeed after ZeRO-3 partitioned
    if accelerate_config is None:
        command = [sys.executable, str(WORKER), str(out), model, *options]
    else:
        command = [
            sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(accelerate_config),
            "--main_process_port", str(free_port()), str(WORKER), str(out), model, *options,
        ]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    records = sorted((json.loads(p.read_text()) for p in out.glob("rank*.json")), key=lambda r: r["rank"])
    for record in records:
        record["delta"] = torch.load(out / f"delta{record['rank']}.pt")
        record["out"] = out
    return records


def relative_error(got: dict, ref: dict) -> float:
    a = torch.cat([got[n].flatten() for n in ref])
    b = torch.cat([ref[n].flatten() for n in ref])
    return ((a - b).norm() / b.norm()).item()


def check_two_ranks(records, reference, per_process_rows=6, num_generations=4, steps_per_phase=1):
    assert [r["rank"] for r in records] == [0, 1] and records[0]["world_size"] == 2
    rank0, rank1 = records
    assert rank0["phases"] == rank1["phases"] == ([0.0] * steps_per_phase + [1.0] * steps_per_phase) * 2
    # Both ranks hold the same selection, and it is the one a single process makes on the same rollouts.
    assert rank0["selections"] == rank1["selections"] == reference["selections"]
    # Each rank generated its contiguous share of S: G rollouts per copy, the copies in selection order.
    for pair, selection in enumerate(rank0["selections"]):
        s_rows = rank0["generated"][2 * pair + 1] + rank1["generated"][2 * pair + 1]
        assert s_rows == [q for q in selection for _ in range(num_generations)]
        assert len(rank0["generated"][2 * pair + 1]) == per_process_rows
    assert rank0["digest"] == rank1["digest"]
    # One question log, written by the main process only: one whole line per question per update.
    lines = (records[0]["out"] / "run" / "questions.jsonl").read_text().splitlines()
    rows = [json.loads(line) for line in lines]
    num_questions = 2 * per_process_rows // num_generations
    assert len(rows) == 4 * num_questions
    for step in (1, 1 + 2 * steps_per_phase):
        batch = [r for r in rows if r["step"] == step]
        assert len({r["question_id"] for r in batch}) == num_questions and all(r["phase"] == 0 for r in batch)
    # Same update as one process taking the whole batch (up to float reassociation). With several steps per phase
    # each rank shuffles its own rows into the steps, so the chunks (and the path) differ from one process's.
    if steps_per_phase == 1:
        assert relative_error(rank0["delta"], reference["delta"]) < 1e-3


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from codapo_trl.testing import build_tiny_model

    return str(build_tiny_model(tmp_path_factory.mktemp("dist-model")))


@pytest.fixture(scope="module")
def single_process(model_dir, tmp_path_factory):
    runs = {}

    def get(timing, *options):
        key = (timing, *options)
        if key not in runs:
            out = tmp_path_factory.mktemp(f"single-{timing}")
            (runs[key],) = run_worker(out, model_dir, "per_device=12", f"timing={timing}", *options)
        return runs[key]

    return get


@pytest.mark.parametrize("timing", ["before_update", "after_update"])
def test_ddp_two_processes(model_dir, single_process, tmp_path, timing):
    config = ROOT / "accelerate_configs" / "cpu_multiprocess.yaml"
    records = run_worker(tmp_path, model_dir, "per_device=6", f"timing={timing}", accelerate_config=config)
    check_two_ranks(records, single_process(timing))


def test_ddp_two_processes_two_steps_per_phase(model_dir, single_process, tmp_path):
    """Two optimizer steps per phase on two ranks: same phases, same selections as one process, S's rows split."""
    config = ROOT / "accelerate_configs" / "cpu_multiprocess.yaml"
    records = run_worker(tmp_path, model_dir, "per_device=3", "spg=2", accelerate_config=config)
    reference = single_process("before_update", "per_device=6", "spg=2")
    check_two_ranks(records, reference, steps_per_phase=2)


def test_deepspeed_zero3_two_processes(model_dir, single_process, tmp_path):
    ds_json = tmp_path / "ds_z3.json"
    ds_json.write_text(json.dumps(ZERO3_JSON))
    config = tmp_path / "zero3.yaml"
    config.write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
        f"deepspeed_config:\n  deepspeed_config_file: {ds_json}\n  zero3_init_flag: true\n"
        "machine_rank: 0\nnum_machines: 1\nnum_processes: 2\n"
        "rdzv_backend: static\nsame_network: true\nuse_cpu: true\n"
    )
    records = run_worker(tmp_path / "run", model_dir, "per_device=6", accelerate_config=config)
    check_two_ranks(records, single_process("before_update"))
