"""The pieces `codapo-eval` and `codapo-analyze` share: usage errors, default output directories, JSON inputs."""

import re

import pytest

from codapo_trl.command_line import EXIT_USAGE, read_json_file, timestamped_output_dir, usage_error
from codapo_trl.evaluation.metrics import load_summary


def test_usage_error_writes_to_stderr_and_returns_the_usage_status(capsys):
    assert usage_error("codapo-eval", "give a model") == EXIT_USAGE == 2
    captured = capsys.readouterr()
    assert captured.err == "codapo-eval: error: give a model\n" and captured.out == ""


@pytest.mark.parametrize(
    ("name", "stem"),
    [("Qwen/Qwen2.5-Math-1.5B", "Qwen2.5-Math-1.5B"), ("outputs/my run/", "my_run"), ("///", "model")],
)
def test_timestamped_output_dir(name, stem):
    path = timestamped_output_dir("eval", name, fallback="model")
    assert path.parent.as_posix() == "outputs/eval"
    assert re.fullmatch(re.escape(stem) + r"-\d{8}-\d{6}", path.name), path.name


def test_read_json_file_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="No such summary file"):
        load_summary(tmp_path / "missing.json")
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ValueError, match="broken.json is not valid JSON"):
        read_json_file(broken, "trainer state")
    good = tmp_path / "good.json"
    good.write_text('{"a": [1, 2]}')
    assert read_json_file(good, "anything") == {"a": [1, 2]}
