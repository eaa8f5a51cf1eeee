"""The offline adaptation of TRL's GRPO tests (`experiments/trl_dropin/`): its stand-ins must reproduce what the tests
rely on, or a stock failure there would be ours, not TRL's.

Expected texts are the ones TRL's test comments give for their hand-written Qwen token ids.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest
from fakes import multiply_tool


EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture(scope="module")
def dropin():
    """The package loaded from its folder (it is not installed, and nothing edits sys.path); removed afterwards."""
    folder = EXPERIMENTS / "trl_dropin"
    spec = importlib.util.spec_from_file_location(
        "trl_dropin", folder / "__init__.py", submodule_search_locations=[str(folder)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules["trl_dropin"] = package
    try:
        spec.loader.exec_module(package)
        for name in ("data", "differences", "text_models", "vocab"):
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


def test_on_differences_are_classified_by_message(dropin):
    explain = dropin.differences.explain
    known = explain(
        "TestGRPOTrainer::test_train[x]", "ValueError: The correctness reward 'r' returned 2, which is not 0 or 1 (b"
    )
    assert known is not None and "test_a_continuous_score_is_refused" in known.our_test
    assert (
        explain("TestGRPOTrainer::test_train_with_iterable_dataset", "needs a map-style training dataset") is not None
    )
    assert explain("TestGRPOTrainer::test_train", "AssertionError: Parameter w has not changed.") is None
    for difference in dropin.differences.ON_DIFFERENCES:  # every reason names a test of ours that exists
        path, name = difference.our_test.split("::")
        assert f"def {name}(" in (EXPERIMENTS.parent / path).read_text()


def _junit(path: Path, cases: dict[str, str]) -> None:
    """A junit report with one test case per `{name: outcome}` (passed, failed or skipped)."""
    body = {"passed": "", "failed": '<failure message="boom"/>', "skipped": '<skipped message="needs vllm"/>'}
    rows = "".join(
        f'<testcase classname="tests.test_grpo_trainer.TestGRPOTrainer" name="{name}">{body[outcome]}</testcase>'
        for name, outcome in cases.items()
    )
    path.write_text(f"<testsuites><testsuite>{rows}</testsuite></testsuites>")


def test_compare_fails_on_stock_failures_and_off_differences_and_overlays_replace_reruns(dropin, tmp_path, capsys):
    main = importlib.import_module("trl_dropin.__main__")
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


def test_adaptations_apply_to_the_copy_and_refuse_a_changed_test(dropin, tmp_path):
    main = importlib.import_module("trl_dropin.__main__")
    trl_tests = tmp_path / "trl"
    trl_tests.mkdir()
    for name in main.TEST_FILES:
        (trl_tests / name).write_text("")
    (test_name, line, replacement, _), *_ = main.ADAPTATIONS["test_grpo_trainer.py"]
    original = f"def {test_name}(self):\n    x = 1\n{line}"
    (trl_tests / "test_grpo_trainer.py").write_text(original)
    copied = main.copy_tests(trl_tests, tmp_path / "work") / "test_grpo_trainer.py"
    assert line not in copied.read_text() and replacement in copied.read_text()
    assert (trl_tests / "test_grpo_trainer.py").read_text() == original  # TRL's checkout is never touched
    (trl_tests / "test_grpo_trainer.py").write_text(f"def {test_name}(self):\n    assert something_else\n")
    with pytest.raises(RuntimeError, match="not there exactly once"):
        main.copy_tests(trl_tests, tmp_path / "work2")


def test_vocab_doctests(dropin):
    import doctest

    result = doctest.testmod(dropin.vocab)
    assert result.attempted >= 2 and result.failed == 0
