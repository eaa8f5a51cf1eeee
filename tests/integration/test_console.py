"""What a person sees on the console: one readable line per update (trackers keep every key), and TRL's warnings
at the user's own line."""

from __future__ import annotations

import os
import warnings

from fakes import deterministic_rollout, hash_reward, question_dataset
from helpers_training import make_args
from transformers import PrinterCallback, ProgressCallback

import codapo_trl
from codapo_trl import CoDaPOTrainer
from codapo_trl.console import PrintedProgressLine, ProgressLine


def test_each_update_prints_one_readable_line_and_the_log_keeps_every_key(tiny_model_dir, tmp_path, capsys):
    args = make_args(tmp_path, max_steps=2, codapo_correctness_reward="hash_reward")  # disable_tqdm=True
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    types = [type(c) for c in trainer.callback_handler.callbacks]
    assert PrintedProgressLine in types and PrinterCallback not in types
    capsys.readouterr()
    trainer.train()
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert len(lines) == 3  # two updates, then the end-of-training summary
    assert lines[0].startswith("step 1/2 | phase B | reward ") and lines[1].startswith("step 2/2 | phase S | reward ")
    for line in lines[:2]:
        assert all(f"| {label} " in line for label in ("value", "solved", "unsolved", "loss"))
    assert "train_runtime" in lines[2]
    assert not any("dynamics/" in line or "None" in line or "nan" in line for line in lines)
    # trackers and log_history still get TRL's whole dict, empty bins included
    first = trainer.state.log_history[0]
    assert "dynamics/bin1/count" in first and len(first) > 40


def test_the_progress_bar_writes_the_line_too(tiny_model_dir, tmp_path):
    args = make_args(tmp_path, max_steps=1, disable_tqdm=False)
    trainer = CoDaPOTrainer(
        tiny_model_dir, hash_reward, args=args, train_dataset=question_dataset(), rollout_func=deterministic_rollout
    )
    types = [type(c) for c in trainer.callback_handler.callbacks]
    assert ProgressLine in types and ProgressCallback not in types


def test_trls_construction_warnings_point_at_the_users_line(tiny_model_dir, tmp_path):
    args = make_args(tmp_path, max_steps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        CoDaPOTrainer(
            tiny_model_dir,
            hash_reward,
            args=args,
            train_dataset=question_dataset(),
            rollout_func=deterministic_rollout,
        )
    rollout = [w for w in caught if "'rollout_func', which is an experimental feature" in str(w.message)]
    assert len(rollout) == 1 and rollout[0].filename == __file__  # TRL's warning, at the line above
    package = os.path.dirname(codapo_trl.__file__)
    assert not [w.filename for w in caught if w.filename.startswith(package)]
