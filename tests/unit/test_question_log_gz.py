"""The per-question log written and read compressed (`questions.jsonl.gz`, issue 63): one gzip member per batch, so
that a resumed run's truncation to a checkpoint's size leaves whole batches, and the analysis reads either form."""

import gzip
import json

import pytest

from codapo_trl.analysis import find_training_logs, load_question_log
from codapo_trl.dynamics.question_log import append_lines, open_question_log


def row(step, qid="q"):
    return json.dumps({"step": step, "phase": 0, "question_id": qid, "num_correct": 1, "num_generations": 8}) + "\n"


def test_compressed_log_is_one_member_per_batch_and_truncates_to_whole_batches(tmp_path):
    path = tmp_path / "run" / "questions.jsonl.gz"
    append_lines(str(path), row(1) + row(1, "r"))
    size_after_first = path.stat().st_size  # what a checkpoint after update 1 records
    append_lines(str(path), row(2))
    assert gzip.decompress(path.read_bytes()).decode() == row(1) + row(1, "r") + row(2)
    assert [r["step"] for r in load_question_log(path)] == [1, 1, 2]
    with open(path, "r+b") as f:  # what a resumed run does with the rows of updates it will redo
        f.truncate(size_after_first)
    assert [r["question_id"] for r in load_question_log(path)] == ["q", "r"]
    append_lines(str(path), row(2))  # the redone update: the same bytes as the first time
    again = tmp_path / "again.jsonl.gz"
    append_lines(str(again), row(1) + row(1, "r"))
    append_lines(str(again), row(2))
    assert path.read_bytes() == again.read_bytes()


def test_plain_log_is_unchanged(tmp_path):
    path = tmp_path / "questions.jsonl"
    append_lines(str(path), row(1))
    append_lines(str(path), row(2))
    assert path.read_text() == row(1) + row(2)
    with open_question_log(path) as f:
        assert f.read() == row(1) + row(2)


def test_training_logs_find_a_compressed_question_log(tmp_path):
    append_lines(str(tmp_path / "questions.jsonl.gz"), row(1))
    (tmp_path / "other.jsonl.gz").write_bytes(gzip.compress(b'{"not": "a log"}\n'))
    (tmp_path / "broken.jsonl.gz").write_bytes(b"not gzip")
    assert find_training_logs(tmp_path)["question_log"] == str(tmp_path / "questions.jsonl.gz")
    append_lines(str(tmp_path / "questions.jsonl"), row(1))  # a plain log is preferred when both exist
    assert find_training_logs(tmp_path)["question_log"] == str(tmp_path / "questions.jsonl")


def test_compressed_row_that_is_not_a_log_row_is_named(tmp_path):
    path = tmp_path / "questions.jsonl.gz"
    append_lines(str(path), row(1) + '{"step": 2}\n')
    with pytest.raises(ValueError, match=r"questions.jsonl.gz:2 is not a question-log row"):
        load_question_log(path)
