"""Every round-3 arm recipe (`experiments/codapo_vs_grpo_r3/recipes/`, issue 63) trains through the main job on a
round-3 pool with the tiny model: one B/S pair (CoDaPO arms) or two batches (GRPO arms), the compressed question log
naming the pool's questions by their `unique_id`, S after B's last optimizer step."""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest

from codapo_trl.jobs.train import parse, train


ROUND_3 = Path(__file__).resolve().parents[2] / "experiments" / "codapo_vs_grpo_r3"
POOL = ROUND_3 / "pools" / "64" / "seed3.jsonl"
# arm -> (optimizer steps per generation batch, whether the second batch is S)
ARMS = {"grpo": (1, False), "codapo_weighting": (1, False), "codapo": (1, True), "codapo_authors": (8, True),
        "grpo_authors_opt": (8, False)}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("arm", sorted(ARMS))
def test_round3_arm_recipe_trains_two_batches_on_its_pool(tiny_model_dir, tmp_path, arm):
    per_batch, second_is_s = ARMS[arm]
    out = tmp_path / arm
    args = parse(["--config", str(ROUND_3 / "recipes" / f"{arm}.yaml"), "--model_name_or_path", tiny_model_dir,
                  "--dataset_name", str(POOL), "--max_steps", str(2 * per_batch), "--max_completion_length", "8",
                  "--output_dir", str(out)])  # fmt: skip
    train(*args)
    with gzip.open(out / "questions.jsonl.gz", "rt") as f:
        rows = [json.loads(line) for line in f]
    pool = {json.loads(line)["unique_id"]: json.loads(line)["level"] for line in POOL.read_text().splitlines()}
    assert Counter((r["step"], r["phase"]) for r in rows) == {(1, 0): 16, (1 + per_batch, int(second_is_s)): 16}
    assert all(pool[r["question_id"]] == r["level"] for r in rows)
    if second_is_s:  # S holds the 4 picks of B, 4 copies each
        picks = {r["question_id"] for r in rows if r["phase"] == 0 and r["selected"]}
        assert Counter(r["question_id"] for r in rows if r["phase"] == 1) == dict.fromkeys(picks, 4)
    else:  # a GRPO-like arm's second batch is the pool's next 16 questions
        assert len({r["question_id"] for r in rows}) == 32
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 2 * per_batch
