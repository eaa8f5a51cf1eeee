"""The offline adaptation of TRL's GRPO tests (`tools/trl_dropin/`): its stand-ins must reproduce what the tests
rely on, or a stock failure there would be ours, not TRL's.

Expected texts are the ones TRL's test comments give for their hand-written Qwen token ids.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakes import multiply_tool


TOOLS = Path(__file__).resolve().parents[2] / "tools"


@pytest.fixture(scope="module")
def dropin():
    """The package loaded from its folder (it is not installed, and nothing edits sys.path); removed afterwards."""
    folder = TOOLS / "trl_dropin"
    spec = importlib.util.spec_from_file_location(
        "trl_dropin", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules["trl_dropin"] = package
    try:
        spec.loader.exec_module(package)
        for name in ("data", "differences", "on_run", "skips", "text_models", "vocab"):
            importlib.import_module(f"trl_dropin.{name}")
        yield package
    finally:
        for name in [n for n in sys.modules if n == "trl_dropin" or n.startswith("trl_dropin.")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def qwen3(dropin):
    return dropin.text_models.TOKENIZERS["qwen3"].build()


MULTIPLY = [151657, 198, 4913, 606, 788, 330, 64648, 22785, 497, 330, 16370, 788, 5212, 64, 788, 220, 18, 11, 330, 65,
            788, 220, 19, 11248, 151658, 151645]  # fmt: skip


def test_qwen_ids_decode_to_the_tests_text(qwen3):
    assert qwen3.decode(MULTIPLY) == (
        '<tool_call>\n{"name": "multiply_tool", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>'
    )
    assert qwen3.decode([40, 2765, 944, 16252, 151645, 151643]) == "I won't increment<|im_end|><|endoftext|>"
    assert qwen3.decode([17453, 17453, 0, 151645], skip_special_tokens=True) == "DoneDone!"
    # the first 256 ids are bytes in GPT-2's order, as in Qwen's vocabulary
    assert [qwen3.decode([i]) for i in (0, 11, 16, 64, 198, 220)] == ["!", ",", "1", "a", "\n", " "]
    assert (qwen3.pad_token_id, qwen3.eos_token_id) == (151643, 151645)  # the ids the mask-truncation test writes


def test_trl_parses_the_tool_call_with_its_qwen3_template(qwen3):
    from trl.chat_template_utils import add_response_schema, parse_response

    add_response_schema(qwen3)  # raises for a template TRL does not recognise
    messages = [{"role": "user", "content": "Hi"}]
    prefix = qwen3.apply_chat_template(messages, tools=[multiply_tool], add_generation_prompt=True, return_dict=False)
    message = parse_response(qwen3, MULTIPLY, prefix=prefix, tools=[multiply_tool])
    assert message["tool_calls"][0]["function"] == {"name": "multiply_tool", "arguments": {"a": 3, "b": 4}}


def test_pieces_never_collide_with_bytes_or_each_other(dropin):
    with pytest.raises(ValueError, match="already id"):
        dropin.vocab.build_tokenizer(300, [("<eos>", True)], {256: "ab", 257: "ab"}, eos_token="<eos>")
    with pytest.raises(ValueError, match="already id"):
        dropin.vocab.build_tokenizer(300, [("<eos>", True)], {256: "a"}, eos_token="<eos>")
    with pytest.raises(ValueError, match="outside the free ids"):
        dropin.vocab.build_tokenizer(300, [("<eos>", True)], {300: "ab"}, eos_token="<eos>")


def test_merges_shorten_the_tool_prompt_and_keep_every_fixed_id(dropin, qwen3):
    text = qwen3.apply_chat_template(
        [{"role": "user", "content": "Beautiful is better than"}],
        tools=[multiply_tool],
        tokenize=False,
        add_generation_prompt=True,
    )
    ids = qwen3(text)["input_ids"]
    assert qwen3.decode(ids) == text  # lossless
    assert len(ids) < 0.4 * len(text.encode())  # bytes alone made it one token per byte (768 for 861 bytes)
    # the merges never move a fixed id: the real Qwen pieces and specials decode as before, and the merged words
    # took ids that no piece holds
    for i, piece in dropin.vocab.QWEN2_PIECES.items():
        assert qwen3.decode([i]) == piece
    assert qwen3.convert_ids_to_tokens(151657) == "<tool_call>" and len(qwen3) == 151643 + 26
    merged = {qwen3.convert_tokens_to_ids(t) for t in qwen3.convert_ids_to_tokens(ids) if len(t) > 1}
    assert merged - set(dropin.vocab.QWEN2_PIECES) - set(range(151643, 151669))  # new words, at free ids


def test_zen_has_the_configs_splits_and_order_the_tests_read(dropin, tmp_path, monkeypatch):
    from datasets import load_dataset

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    dropin.data.build_datasets(tmp_path / "hub")
    zen = load_dataset(str(tmp_path / "hub" / "zen"), "standard_prompt_only", cache_dir=str(tmp_path / "cache"))
    assert (zen["train"].num_rows, zen["test"].num_rows) == (17, 2)
    assert zen["train"]["prompt"][:2] == ["Beautiful is better than", "Explicit is"]
    chat = load_dataset(str(tmp_path / "hub" / "zen"), "conversational_prompt_only", split="train",
                        cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert chat[0]["prompt"] == [{"role": "user", "content": "Beautiful is better than"}]
    image = load_dataset(str(tmp_path / "hub" / "zen-image"), "conversational_prompt_only", split="train",
                         cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert image.column_names == ["image", "prompt"] and image[0]["image"].mode == "RGB"
    multi = load_dataset(str(tmp_path / "hub" / "zen-multi-image"), "conversational_prompt_only", split="train",
                         cache_dir=str(tmp_path / "cache"))  # fmt: skip
    assert {len(images) for images in multi["images"]} == {1, 2, 3}


STREAMING = "codapo_sampling needs a map-style training dataset (each update batch is handed ...)"


@pytest.mark.parametrize(
    ("test", "message", "explained"),
    [
        ("TestGRPOTrainer::test_train_with_iterable_dataset", f"ValueError: {STREAMING}", True),
        # the same failure on a test the entry does not name is not explained
        ("TestGRPOTrainer::test_training[standard_prompt_only]", f"ValueError: {STREAMING}", False),
        # nor another exception type, nor CoDaPO's words anywhere but at the start of the message
        ("TestGRPOTrainer::test_train_with_iterable_dataset", f"RuntimeError: {STREAMING}", False),
        ("TestGRPOTrainer::test_train_with_iterable_dataset", f"ValueError: wrapped: {STREAMING}", False),
        (
            "TestGRPOTrainer::test_iterable_dataset_requires_dispatch_batches_false",
            "AssertionError: Regex pattern did not match.\n  Expected regex: 'Iterable datasets require'\n  Actual "
            f"message: '{STREAMING}'",
            True,
        ),
        (
            "TestGRPOTrainer::test_prepare_input_called_with_correct_data",
            "ValueError: With codapo_sampling, B's and S's rollouts must never share an optimizer step, so ...",
            True,
        ),
        (
            "TestGRPOTrainer::test_warning_raised_all_rewards_none",
            "RuntimeError: The correctness reward(s) ['always_none_reward_func'] returned None for every rollout of 5 "
            "batches in a row, so CoDaPO has trained on nothing since.",
            True,
        ),
        # the unanchored phrases that used to explain unrelated failures
        ("TestGRPOTrainer::test_train_with_tools", "AssertionError: ratio outside [0, 1] at step 3", False),
        ("TestGRPOTrainer::test_train", "AssertionError: Parameter w has not changed.", False),
    ],
)
def test_on_differences_are_keyed_by_test_exception_and_message(dropin, test, message, explained):
    assert (dropin.differences.explain(test, message) is not None) == explained


def test_every_difference_names_a_test_of_ours(dropin):
    assert dropin.differences.parse_failure("trl.x.MyError: a: b") == ("MyError", "a: b")
    assert dropin.differences.parse_failure("no type here") == ("", "no type here")
    for difference in dropin.differences.ON_DIFFERENCES:
        path, name = difference.our_test.split("::")
        assert f"def {name}(" in (TOOLS.parent / path).read_text()
        assert difference.tests and all("::" in test and "[" not in test for test in difference.tests)


def test_on_run_names_the_first_reward_with_a_threshold_unless_the_test_says(dropin):
    from codapo_trl.dynamics.mixin import DynamicsOptions

    on_run = dropin.on_run
    options = on_run.on_correctness(DynamicsOptions(), ["rm", "format_reward"])
    assert options.correctness_reward == ["rm"] and options.correctness_threshold == on_run.ON_THRESHOLD
    named = on_run.on_correctness(DynamicsOptions(correctness_kind="pass_rate"), ["rm"])
    assert named.correctness_reward is None and named.correctness_threshold is None


def test_skips_are_test_reason_pairs(dropin):
    skips = dropin.skips
    allowed = {"T::a[x]": "test requires vllm"}
    assert skips.unexpected_skips({"T::a[x]": "test requires vllm"}, allowed) == []
    # another reason for a listed test, or a listed reason for another test, is not allowed
    assert len(skips.unexpected_skips({"T::a[x]": "test requires accelerator, vllm"}, allowed)) == 1
    assert len(skips.unexpected_skips({"T::a[y]": "test requires vllm"}, allowed)) == 1
    assert (
        skips.junit_id("tests/test_grpo_trainer.py::TestGRPOTrainer::test_x[a/b-1]")
        == "TestGRPOTrainer::test_x[a/b-1]"
    )
    assert len(skips.ALLOWED_SKIPS) == 44  # docs/dropin.md: the 44 skips of TRL main at 1.10.0.dev0


def test_skip_reason_follows_pytest(dropin):
    class Item:
        def __init__(self, *marks):
            self.marks = marks

        def iter_markers(self, name):
            return (m for m in self.marks if m.name == name)

    skipif_false = pytest.mark.skipif(False, reason="test requires vllm").mark
    skipif_true = pytest.mark.skipif(True, reason="test requires liger-kernel").mark
    skip = pytest.mark.skip(reason="We should add a mock for the vLLM server.").mark
    reason = dropin.skips.skip_reason
    assert reason(Item(skipif_false)) is None
    assert reason(Item(skip, skipif_true)) == "test requires liger-kernel"  # skipif first, as pytest decides
    assert reason(Item(skipif_false, skip)) == "We should add a mock for the vLLM server."


def _junit(path: Path, cases: dict[str, str], exit_status: int | None = None) -> None:
    """A junit report with one test case per `{name: outcome}` (passed, failed or skipped), and the exit status of
    the run that wrote it (by default the one that agrees with the outcomes)."""
    body = {"passed": "", "failed": '<failure message="boom"/>', "skipped": '<skipped message="needs vllm"/>'}
    rows = "".join(
        f'<testcase classname="tests.test_grpo_trainer.TestGRPOTrainer" name="{name}">{body[outcome]}</testcase>'
        for name, outcome in cases.items()
    )
    path.write_text(f"<testsuites><testsuite>{rows}</testsuite></testsuites>")
    if exit_status is None:
        exit_status = int("failed" in cases.values())
    path.with_suffix(".status.json").write_text(json.dumps({"exit_status": exit_status}))


@pytest.fixture
def allowed_c(dropin, monkeypatch):
    """The compare tests' one skip ("c", "needs vllm") as the allowed pair."""
    main = importlib.import_module("trl_dropin.__main__")
    monkeypatch.setattr(main, "ALLOWED_SKIPS", {"TestGRPOTrainer::c": "needs vllm"})
    return main


def test_compare_fails_on_stock_failures_and_off_differences_and_overlays_replace_reruns(allowed_c, tmp_path, capsys):
    main = allowed_c
    full, rerun = tmp_path / "full", tmp_path / "rerun"
    full.mkdir(), rerun.mkdir()
    _junit(full / "report-stock.xml", {"a": "passed", "b": "failed", "c": "skipped"})
    _junit(full / "report-off.xml", {"a": "passed", "b": "failed", "c": "skipped"})
    assert main.compare(full) == 1  # stock fails b
    _junit(rerun / "report-stock.xml", {"b": "passed"})
    _junit(rerun / "report-off.xml", {"b": "passed"})
    assert main.compare(full, [rerun]) == 0
    assert "stock: 1 test(s) re-run" in capsys.readouterr().out
    _junit(rerun / "report-off.xml", {"b": "failed"})  # off no longer matches stock on the re-run
    assert main.compare(full, [rerun]) == 1


def test_compare_refuses_reports_of_unfinished_or_unknown_runs(allowed_c, tmp_path, capsys):
    main = allowed_c
    cases = {"a": "passed", "c": "skipped"}
    _junit(tmp_path / "report-stock.xml", cases)
    assert main.compare(tmp_path) == 0
    for status in (2, 137, -9):  # interrupted, killed
        _junit(tmp_path / "report-stock.xml", cases, exit_status=status)
        assert main.compare(tmp_path) == 1
    _junit(tmp_path / "report-stock.xml", cases, exit_status=1)  # a failure the report does not show
    assert main.compare(tmp_path) == 1
    (tmp_path / "report-stock.status.json").unlink()  # a report no finished run vouches for
    assert main.compare(tmp_path) == 1
    assert "REPORT NOT USABLE" in capsys.readouterr().out


def test_compare_refuses_a_skip_that_is_not_listed(allowed_c, tmp_path, capsys):
    _junit(tmp_path / "report-stock.xml", {"a": "passed", "c": "skipped", "d": "skipped"})
    assert allowed_c.compare(tmp_path) == 1
    assert "NOT AN ALLOWED SKIP: TestGRPOTrainer::d: skipped for 'needs vllm'" in capsys.readouterr().out


def test_a_run_removes_the_previous_report_and_records_the_exit_status(allowed_c, tmp_path, monkeypatch):
    main = allowed_c
    _junit(tmp_path / "report-on.xml", {"a": "passed"})  # a previous run's report

    def killed(command, **kwargs):  # pytest killed before it writes its report
        return subprocess.CompletedProcess(command, -9)

    monkeypatch.setattr(main.subprocess, "run", killed)
    report, _ = main.run(tmp_path, "on", [], timeout=60)
    assert not report.exists()
    assert json.loads(main.status_path(report).read_text())["exit_status"] == -9
    assert main.report_problem(report) == "report-on.xml is missing"


def test_adaptations_apply_to_the_copy_within_their_test_and_refuse_a_changed_test(dropin, tmp_path):
    main = importlib.import_module("trl_dropin.__main__")
    trl_tests = tmp_path / "trl"
    trl_tests.mkdir()
    for name in main.TEST_FILES:
        (trl_tests / name).write_text("")
    changes = main.ADAPTATIONS["test_grpo_trainer.py"]
    bodies = {}
    for test, line, _, _ in changes:
        bodies.setdefault(test, []).append(line)
    # each adapted test in a class, and another test with the same lines, which must stay as they are
    original = "class TestGRPOTrainer:\n" + "".join(
        f"    def {test}(self):\n        x = 1\n{''.join(lines)}\n    @mark\n    def other_{test}(self):\n{''.join(lines)}"
        for test, lines in bodies.items()
    )
    (trl_tests / "test_grpo_trainer.py").write_text(original)
    copied = (main.copy_tests(trl_tests, tmp_path / "work") / "test_grpo_trainer.py").read_text()
    for test, line, replacement, _ in changes:
        body, other = copied.split(f"def {test}(self):")[1].split(f"def other_{test}(self):")
        assert replacement in body and line in other.split("    def ")[0]
    assert (trl_tests / "test_grpo_trainer.py").read_text() == original  # TRL's checkout is never touched
    test, line, _, _ = changes[0]
    (trl_tests / "test_grpo_trainer.py").write_text(  # the line now only in another test: refused
        original.replace(f"def {test}(self):\n        x = 1\n{line}", f"def {test}(self):\n        x = 1\n")
    )
    with pytest.raises(RuntimeError, match="not there exactly once"):
        main.copy_tests(trl_tests, tmp_path / "work2")


def test_stockloss_compare_fails_on_a_step_that_differs_from_stock(allowed_c, tmp_path, capsys, monkeypatch):
    main = allowed_c
    monkeypatch.setattr(main, "STOCK_LOSS_TESTS", ("TestGRPOTrainer::a",))
    _junit(tmp_path / "report-stock.xml", {"a": "passed", "b": "passed", "c": "skipped"})
    _junit(tmp_path / "report-stockloss.xml", {"a": "passed"})  # it runs its tests only: b is not a difference
    steps = [{"test": "TestGRPOTrainer::a", "loss": 0.25, "grad_norm": 3.0, "grad_sum": -1.5}] * 2
    for mode in ("stock", "stockloss"):
        main.record_path(tmp_path, mode).write_text("".join(json.dumps(step) + "\n" for step in steps))
    assert main.compare(tmp_path) == 0
    assert "2 training steps: 0 mismatch(es)" in capsys.readouterr().out
    steps[1] = dict(steps[1], grad_sum=-1.6)
    main.record_path(tmp_path, "stockloss").write_text("".join(json.dumps(step) + "\n" for step in steps))
    assert main.compare(tmp_path) == 1
    assert "TestGRPOTrainer::a step 1: grad_sum -1.5 (stock) != -1.6" in capsys.readouterr().out
    main.record_path(tmp_path, "stockloss").unlink()  # trained nothing: never a pass
    assert main.compare(tmp_path) == 1


def test_records_doctests(dropin):
    import doctest

    records = importlib.import_module("trl_dropin.records")
    result = doctest.testmod(records)
    assert result.attempted >= 4 and result.failed == 0


def test_vocab_doctests(dropin):
    import doctest

    result = doctest.testmod(dropin.vocab)
    assert result.attempted >= 2 and result.failed == 0
