"""`dataset_limit` / `limit=` counts rows after the level filter (issue 63): `levels=[4, 5, 7], limit=64` is 64 rows
of those levels, not the first 64 rows of every level filtered afterwards (round 3's design note found 36)."""

import json

from codapo_trl.data import load_math_dataset
from codapo_trl.jobs.train import CoDaPOScriptArguments, load_math_datasets


def test_limit_counts_rows_after_the_level_filter():
    full = load_math_dataset("arithmetic", levels=[4, 5, 7])
    limited = load_math_dataset("arithmetic", levels=[4, 5, 7], limit=64)
    assert len(limited) == 64 and set(limited["level"]) <= {4, 5, 7}
    assert limited["question"] == full["question"][:64]  # the first 64 rows of the filtered data, in its order


def test_limit_after_the_level_filter_on_a_local_file(tmp_path):
    path = tmp_path / "pool.jsonl"
    rows = [{"question": f"q{i}", "answer": str(i), "level": 1 + i % 3} for i in range(12)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_math_dataset(path, levels=[3], limit=2)["question"] == ["q2", "q5"]
    assert load_math_dataset(path, levels=[3], limit=100)["question"] == ["q2", "q5", "q8", "q11"]
    assert load_math_dataset(path, limit=2)["question"] == ["q0", "q1"]  # no filter: the first rows, as before


def test_the_jobs_dataset_limit_applies_after_dataset_levels():
    args = CoDaPOScriptArguments(dataset_name="arithmetic", dataset_levels=[4, 5, 7], dataset_limit=64)
    train, evaluation = load_math_datasets(args, type("Args", (), {"eval_strategy": "no"})())
    assert len(train) == 64 and set(train["level"]) <= {4, 5, 7} and evaluation is None
