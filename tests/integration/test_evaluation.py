"""Tests of the evaluation command (`codapo_trl.evaluation`): pass@k, the benchmark registry on local fixture files,
the output files, reproducibility, the CPU backend on the tiny model, sandboxed code grading, `--compare` and the CLI.

Offline: hub benchmarks are read from small files in the hub's format written here (`NAME=PATH`).
"""

import base64
import json
import math
import pickle
import re
import zlib
from pathlib import Path

import pytest
import torch
from datasets import Dataset

from codapo_trl.evaluation import (
    BENCHMARKS,
    Completion,
    compare_summaries,
    evaluate_model,
    format_level_table,
    load_benchmark,
    main,
    pass_at_k,
)
from codapo_trl.evaluation.benchmarks import BENCHMARK_GROUPS, describe_benchmarks, expand_benchmarks
from codapo_trl.evaluation.code import LCB_PRELUDE, decode_lcb_test_cases, grade_code
from codapo_trl.evaluation.generation import SamplingConfig, _RowSampler, sample_seed
from codapo_trl.evaluation.metrics import QuestionOutcome, default_ks, summarise_outcomes
from codapo_trl.rewards import configure_grader
from codapo_trl.rewards.code import InvalidTestsError


FIXTURES = Path(__file__).parents[1] / "fixtures"
PAPER_TWELVE = (
    *("math500", "aime24", "aime25", "amc23", "olympiadbench", "minerva", "gsm8k"),
    *("mmlu", "gpqa", "humaneval", "taco", "livecodebench"),
)


@pytest.fixture(scope="module", autouse=True)
def grader():
    configure_grader(num_workers=2, timeout=2.0)
    yield
    configure_grader(num_workers=2, timeout=2.0)  # stops the workers


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


class ScriptedGenerator:
    """A backend whose completions are a function of (request key, sample index)."""

    backend = "scripted"

    def __init__(self, script):
        self.script = script
        self.requests = []

    def generate(self, requests, config, progress=None):
        self.requests.extend(requests)
        out = [[Completion(self.script(r, s), 7, "stop") for s in range(config.num_samples)] for r in requests]
        if progress is not None:
            progress.advance(len(requests), 7 * config.num_samples * len(requests))
        return out


# ---------------------------------------------------------------------------------------------------------------------
# pass@k and aggregation
# ---------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (10, 3, 5, 1 - 21 / 252),  # 1 - C(7,5)/C(10,5)
        (4, 1, 2, 0.5),  # 1 - C(3,2)/C(4,2)
        (8, 1, 8, 1.0),  # k = n with one correct sample
        (8, 0, 8, 0.0),  # k = n, none correct
        (6, 0, 3, 0.0),  # c = 0
        (6, 6, 3, 1.0),  # c = n
        (32, 30, 4, 1.0),  # n - c < k
        (1000, 1, 500, 0.5),  # huge binomials, computed stably
    ],
)
def test_pass_at_k_hand_computed(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_edge_cases():
    for n in (1, 3, 32):
        for c in range(n + 1):
            assert pass_at_k(n, c, 1) == pytest.approx(c / n)
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12)
    with pytest.raises(ValueError, match="pass@5 needs at least 5 samples"):
        pass_at_k(4, 1, 5)
    for bad in ((0, 0, 1), (4, 5, 1), (4, -1, 1), (4, 1, 0)):
        with pytest.raises(ValueError):
            pass_at_k(*bad)
    with pytest.raises(TypeError):
        pass_at_k(4.0, 1, 1)
    assert default_ks(32) == [1, 2, 4, 8, 16, 32] and default_ks(6) == [1, 2, 4, 6] and default_ks(1) == [1]


def test_summarise_outcomes():
    metrics = summarise_outcomes([QuestionOutcome(4, 0), QuestionOutcome(4, 2), QuestionOutcome(4, 4)], [1, 2, 8])
    assert metrics["avg@n"] == pytest.approx(0.5) and metrics["pass@1"] == pytest.approx(0.5)
    assert metrics["pass@2"] == pytest.approx((0 + 5 / 6 + 1) / 3)
    assert "pass@8" not in metrics  # k > n is left out


# ---------------------------------------------------------------------------------------------------------------------
# Registry and field mappings
# ---------------------------------------------------------------------------------------------------------------------


def test_registry_has_the_papers_twelve_and_arithmetic(tmp_path):
    assert set(PAPER_TWELVE) | {"arithmetic"} == set(BENCHMARKS)
    rows = {r["name"]: r for r in describe_benchmarks()}
    assert rows["gpqa"]["hub_id"] == "Idavidrein/gpqa (gpqa_diamond)" and rows["gpqa"]["answer_type"] == "choice"
    assert rows["mmlu"]["answer_type"] == "choice" and rows["olympiadbench"]["split"] == "train"
    assert (
        rows["humaneval"]["kind"] == "code" and rows["livecodebench"]["hub_id"] == "livecodebench/code_generation_lite"
    )
    assert expand_benchmarks(["paper"]) == list(PAPER_TWELVE)
    assert expand_benchmarks(["paper-math", "gsm8k", "arithmetic"]) == [*BENCHMARK_GROUPS["paper-math"], "arithmetic"]
    aime = write_jsonl(tmp_path / "aime.jsonl", [{"problem": "p", "answer": "7"}])
    assert load_benchmark(f"AIME2024={aime}").name == "aime24"  # aliases, case-insensitive


@pytest.mark.parametrize(
    ("name", "row", "question_part", "gold", "answer_type", "level"),
    [
        (
            "math500",
            {"problem": "Find $x$.", "answer": "\\frac12", "level": 3, "unique_id": "t/1"},
            "Find",
            "\\frac12",
            "math",
            3,
        ),
        ("aime24", {"id": 60, "problem": "AIME q", "solution": "...", "answer": "204"}, "AIME q", "204", "math", None),
        ("aime25", {"problem": "AIME25 q", "answer": "70", "id": "0"}, "AIME25", "70", "math", None),
        ("amc23", {"id": 0, "question": "AMC q", "answer": 27.0, "url": "u"}, "AMC q", "27", "math", None),
        (
            "olympiadbench",
            {"id": 1606, "question": "Olympiad q", "final_answer": ["$2,3$"], "context": None, "answer_type": "Tuple"},
            "Olympiad q",
            "2,3",
            "math",
            None,
        ),
        ("minerva", {"question": "Minerva q", "answer": "4.5e10"}, "Minerva q", "4.5e10", "math", None),
        (
            "gsm8k",
            {"question": "How many?", "answer": "3 + 4 = <<3+4=7>>7\n#### 1,007"},
            "How many?",
            "1007",
            "number",
            None,
        ),
        (
            "mmlu",
            {"question": "Capital?", "subject": "geo", "choices": ["Rome", "Paris", "Oslo", "Bern"], "answer": 1},
            "B. Paris",
            "B",
            "choice",
            None,
        ),
    ],
)
def test_registry_field_mappings_on_local_files(tmp_path, name, row, question_part, gold, answer_type, level):
    path = write_jsonl(tmp_path / f"{name}.jsonl", [row])
    bench = load_benchmark(f"{name}={path}", system_prompt="SYS")
    assert bench.name == name and bench.display_name == BENCHMARKS[name].display_name and bench.kind == "math"
    item = bench.items[0]
    assert question_part in item.question and item.gold == gold and item.answer_type == answer_type
    assert item.level == level
    assert item.prompt[0] == {"role": "system", "content": "SYS"} and item.prompt[-1]["role"] == "user"


def test_gpqa_choices_are_lettered_in_a_fixed_order(tmp_path):
    rows = [
        {
            "Question": f"Question {i}?",
            "Correct Answer": f"right {i}",
            **{f"Incorrect Answer {j}": f"wrong {i}.{j}" for j in (1, 2, 3)},
            "Record ID": f"rec{i}",
        }
        for i in range(12)
    ]
    path = write_jsonl(tmp_path / "gpqa.jsonl", rows)
    bench = load_benchmark(f"gpqa={path}")
    letters = set()
    for i, item in enumerate(bench.items):
        options = dict(re.findall(r"^([A-D])\. (.*)$", item.question, flags=re.MULTILINE))
        assert sorted(options) == ["A", "B", "C", "D"] and options[item.gold] == f"right {i}"
        assert item.answer_type == "choice" and item.item_id == f"rec{i}"
        letters.add(item.gold)
    assert len(letters) > 1  # the correct option is not always in the same place
    assert [it.gold for it in load_benchmark(f"gpqa={path}").items] == [it.gold for it in bench.items]
    parquet = tmp_path / "gpqa.parquet"
    Dataset.from_list(rows).to_parquet(str(parquet))
    assert [it.question for it in load_benchmark(f"gpqa={parquet}").items] == [it.question for it in bench.items]


def test_code_benchmarks_from_local_files(tmp_path):
    he = load_benchmark(f"humaneval={FIXTURES / 'humaneval_sample.jsonl'}", code_system_prompt="CODE")
    assert he.kind == "code" and len(he) == 3 and he.items[0].item_id == "Fixture/0"
    assert he.items[0].prompt[0] == {"role": "system", "content": "CODE"} and he.items[0].answer_type == "code"
    assert json.loads(he.items[0].gold)["format"] == "check"
    taco = load_benchmark(f"taco={FIXTURES / 'taco_sample.jsonl'}", limit=3)
    assert len(taco) == 3 and taco.items[0].level == "EASY"
    # Detected from the columns when no name is given.
    assert load_benchmark(FIXTURES / "humaneval_sample.jsonl").kind == "code"
    lcb = load_benchmark(f"livecodebench={write_jsonl(tmp_path / 'lcb.jsonl', LCB_ROWS)}")
    assert [it.level for it in lcb.items] == ["EASY", "MEDIUM"] and lcb.code_prelude == LCB_PRELUDE
    assert [json.loads(it.gold)["format"] for it in lcb.items] == ["stdio", "call"]
    assert len(json.loads(lcb.items[0].gold)["inputs"]) == 3  # public + private cases


def test_local_math_file_auto_detection_and_arithmetic(tmp_path):
    path = write_jsonl(
        tmp_path / "mine.jsonl",
        [{"question": "What is 2 + 2?", "answer": "4", "difficulty": 1}, {"question": "1+1?", "answer": "2"}],
    )
    bench = load_benchmark(path, system_prompt=None)
    assert bench.name == "mine" and [it.gold for it in bench.items] == ["4", "2"] and bench.items[0].level == 1
    assert bench.items[0].prompt == [{"role": "user", "content": "What is 2 + 2?"}]
    Dataset.from_list(QA_ROWS).to_parquet(str(tmp_path / "qa.parquet"))
    assert [it.gold for it in load_benchmark(tmp_path / "qa.parquet").items] == ["2", "5", "17"]
    arith = load_benchmark("arithmetic")
    assert len(arith) == 129 and {it.level for it in arith.items} == {1, 2, 3, 4, 5}
    assert all(it.answer_type == "number" for it in arith.items)


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("nonsense_benchmark", "Unknown benchmark 'nonsense_benchmark'"),
        ("missing.jsonl", "No such benchmark file"),
        ("empty.jsonl", "is empty"),
        ("noquestion.jsonl", "Could not find a question column"),
        ("gpqa=noquestion.jsonl", "gpqa: none of the columns \\['Question'\\]"),
        ("humaneval=noquestion.jsonl", "missing field"),
        ("mmlu=empty.jsonl", "is empty"),
    ],
)
def test_load_benchmark_errors(tmp_path, monkeypatch, argument, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    write_jsonl(tmp_path / "noquestion.jsonl", [{"text": "hi", "answer": "1"}])
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        load_benchmark(argument)


# ---------------------------------------------------------------------------------------------------------------------
# LiveCodeBench test decoding
# ---------------------------------------------------------------------------------------------------------------------


def _compress(cases) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


LCB_ROWS = [
    {
        "question_title": "sum",
        "question_content": "Read two integers and print their sum.",
        "platform": "atcoder",
        "question_id": "abc001_a",
        "contest_date": "2024-09-01T00:00:00",
        "starter_code": "",
        "difficulty": "easy",
        "public_test_cases": json.dumps([{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]),
        "private_test_cases": _compress(
            [
                {"input": "5 5\n", "output": "10\n", "testtype": "stdin"},
                {"input": "0 -1\n", "output": "-1\n", "testtype": "stdin"},
            ]
        ),
        "metadata": "{}",
    },
    {
        "question_title": "pair",
        "question_content": "Return indices of two numbers adding up to target.",
        "platform": "leetcode",
        "question_id": "1",
        "contest_date": "2024-10-01T00:00:00",
        "starter_code": "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        ",
        "difficulty": "medium",
        "public_test_cases": json.dumps([{"input": "[2,7,11,15]\n9", "output": "[0,1]", "testtype": "functional"}]),
        "private_test_cases": _compress([{"input": "[3,2,4]\n6", "output": "[1,2]", "testtype": "functional"}]),
        "metadata": json.dumps({"func_name": "twoSum"}),
    },
]
LCB_SOLUTIONS = [
    "a, b = map(int, input().split())\nprint(a + b)\n",
    "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
    "        seen = {}\n        for i, x in enumerate(nums):\n            if target - x in seen:\n"
    "                return [seen[target - x], i]\n            seen[x] = i\n",
]


class _Boom:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_lcb_private_tests_refuse_pickled_globals(capsys):
    assert decode_lcb_test_cases(_compress([{"input": "1", "output": "1", "testtype": "stdin"}]))[0]["output"] == "1"
    evil = base64.b64encode(zlib.compress(pickle.dumps(_Boom()))).decode()
    with pytest.raises(InvalidTestsError, match="refusing to load builtins.print"):
        decode_lcb_test_cases(evil)
    assert "never run" not in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------------------
# Sampling
# ---------------------------------------------------------------------------------------------------------------------


def test_row_sampler_matches_the_distribution():
    torch.manual_seed(0)
    rows, vocab = 20_000, 6
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -math.inf])
    uniforms = torch.rand(rows, 1)
    for temperature, top_p in ((1.0, 1.0), (0.6, 1.0), (1.0, 0.8)):
        sampler = _RowSampler(uniforms, prompt_length=3, temperature=temperature, top_p=top_p)
        scores = sampler(torch.zeros(rows, 3, dtype=torch.long), logits.repeat(rows, 1))
        assert torch.isfinite(scores).sum(-1).eq(1).all()
        counts = torch.bincount(scores.argmax(-1), minlength=vocab).double() / rows
        probs = torch.softmax(logits / temperature, -1).double()
        if top_p < 1:
            keep = (probs.cumsum(0) - probs) < top_p  # the nucleus: tokens 0-2 here
            probs = torch.where(keep, probs, 0) / probs[keep].sum()
            assert counts[~keep].sum() == 0
        assert torch.allclose(counts, probs, atol=0.015), (temperature, top_p, counts, probs)
    greedy = _RowSampler(uniforms[:2], 3, 0.0, 1.0)(torch.zeros(2, 3, dtype=torch.long), logits.repeat(2, 1))
    assert greedy.argmax(-1).tolist() == [0, 0]


def test_sample_seeds_and_config_validation():
    assert sample_seed(0, "math500/3", 1) == sample_seed(0, "math500/3", 1)
    assert (
        len({sample_seed(0, "b/0", 0), sample_seed(1, "b/0", 0), sample_seed(0, "b/1", 0), sample_seed(0, "b/0", 1)})
        == 4
    )
    for bad in ({"num_samples": 0}, {"temperature": -1}, {"top_p": 0}, {"top_p": 1.5}, {"max_new_tokens": 0}):
        with pytest.raises(ValueError):
            SamplingConfig(**bad)


# ---------------------------------------------------------------------------------------------------------------------
# End to end with a scripted backend: metrics and output files
# ---------------------------------------------------------------------------------------------------------------------

QA_ROWS = [
    {"question": "What is 1 + 1?", "answer": "2", "level": 1},
    {"question": "What is 2 + 3?", "answer": "5", "level": 1},
    {"question": "What is 10 + 7?", "answer": "17", "level": 2},
]


def _qa_script(correct_counts):
    """Sample s of question i answers right iff s < correct_counts[i]."""

    def script(request, s):
        index = int(request.key.rsplit("/", 1)[1])
        gold = QA_ROWS[index]["answer"]
        return f"Adding up, the result is $\\boxed{{{gold if s < correct_counts[index] else '0'}}}$."

    return script


def test_scripted_run_metrics_and_output_files(tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", QA_ROWS)
    generator = ScriptedGenerator(_qa_script([0, 2, 4]))
    out = tmp_path / "run"
    result = evaluate_model(
        "scripted-model", [str(path)], num_samples=4, ks=[1, 2, 4, 8], generator=generator, output_dir=out,
        progress=False, label="A",
    )  # fmt: skip
    bench = result.benchmarks["qa"]
    assert bench.metrics == pytest.approx({"avg@n": 0.5, "pass@1": 0.5, "pass@2": (5 / 6 + 1) / 3, "pass@4": 2 / 3})
    assert bench.levels["1"]["metrics"]["avg@n"] == pytest.approx(0.25) and bench.levels["2"]["num_questions"] == 1
    assert result.average["avg@n"] == pytest.approx(0.5) and result.config["ks"] == [1, 2, 4]
    assert [r.key for r in generator.requests] == ["qa/0", "qa/1", "qa/2"]

    lines = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and [q["num_correct"] for q in lines] == [0, 2, 4]
    question_keys = {"benchmark", "index", "id", "level", "question", "gold", "answer_type", "num_samples", "samples"}
    assert question_keys <= set(lines[1])
    sample = lines[1]["samples"][0]
    assert set(sample) == {
        "sample", "completion", "extracted", "parsed", "correct", "score", "reason", "num_tokens", "finish_reason",
    }  # fmt: skip
    assert sample["extracted"] == "5" and sample["correct"] is True and lines[1]["samples"][3]["correct"] is False

    summary = json.loads((out / "summary.json").read_text())
    assert {
        "schema_version",
        "model",
        "label",
        "backend",
        "config",
        "benchmarks",
        "average",
        "timing",
        "versions",
    } <= set(summary)
    assert summary["backend"] == "scripted" and summary["config"]["num_samples"] == 4
    qa = summary["benchmarks"]["qa"]
    assert qa["num_questions"] == 3 and qa["num_samples"] == 12 and qa["metrics"]["pass@4"] == pytest.approx(2 / 3)
    assert set(qa["levels"]) == {"1", "2"} and qa["no_answer_frac"] == 0 and qa["truncated_frac"] == 0
    assert summary["timing"]["completions"] == 12 and summary["timing"]["generated_tokens"] == 84

    table = (out / "results.md").read_text()
    assert "| Model | qa | Average |" in table and "| A | 50.00 | 50.00 |" in table
    assert "| Benchmark | Questions | avg@4 | pass@1 | pass@2 | pass@4 |" in table
    assert "| Level | Questions | avg@4 |" in table and "| 2 | 1 | 100.00 |" in table


def test_ungraded_questions_are_left_out(tmp_path):
    rows = [{"question": "Pick one.", "answer": "banana", "answer_type": "choice"}, QA_ROWS[0]]
    path = write_jsonl(tmp_path / "mixed.jsonl", rows)
    generator = ScriptedGenerator(lambda request, s: "The answer is \\boxed{2}.")
    result = evaluate_model("m", [str(path)], num_samples=2, generator=generator, progress=False)
    summary = result.to_summary()["benchmarks"]["mixed"]
    assert summary["num_questions"] == 1 and summary["num_ungraded_questions"] == 1
    assert summary["metrics"]["avg@n"] == 1.0
    assert result.benchmarks["mixed"].questions[0].samples[0].reason == "gold is not a choice letter"


def test_compare_summaries_and_cli(tmp_path, capsys):
    path = write_jsonl(tmp_path / "qa.jsonl", QA_ROWS)
    for label, counts in (("A", [0, 2, 4]), ("B", [4, 2, 4])):
        evaluate_model(
            "model-" + label, [str(path), "arithmetic"], num_samples=4, limit=3, generator=ScriptedGenerator(_qa_script(counts)),
            output_dir=tmp_path / label, label=label, progress=False,
        )  # fmt: skip
    text = compare_summaries([tmp_path / "A" / "summary.json", tmp_path / "B" / "summary.json"])
    assert "| Model | qa | Arithmetic | Average |" in text
    assert "| A | 50.00 | 0.00 | 25.00 |" in text and "| B | 83.33 | 0.00 | 41.67 |" in text
    assert "| Δ B vs A | +33.33 | +0.00 | +16.67 |" in text
    assert "### qa per level" in text and "| 1 | 2 | 25.00 | 75.00 | +50.00 |" in text

    rc = main(
        [
            "--compare",
            str(tmp_path / "A" / "summary.json"),
            str(tmp_path / "B" / "summary.json"),
            "--metric",
            "pass@2",
            "--output-dir",
            str(tmp_path / "cmp"),
        ]
    )
    assert rc == 0 and "### pass@2 (%)" in capsys.readouterr().out and (tmp_path / "cmp" / "comparison.md").is_file()
    assert main(["--compare", str(tmp_path / "A" / "summary.json")]) == 2
    assert "at least two" in capsys.readouterr().err
    (tmp_path / "junk.json").write_text("[1, 2]")
    assert main(["--compare", str(tmp_path / "A" / "summary.json"), str(tmp_path / "junk.json")]) == 2
    assert "not an evaluation summary" in capsys.readouterr().err

    a = json.loads((tmp_path / "A" / "summary.json").read_text())
    b = json.loads((tmp_path / "B" / "summary.json").read_text())
    level_table = format_level_table({"before": a, "after": b}, "qa")
    assert "| Level | Questions | before avg@4 | after avg@4 | Δ after |" in level_table


# ---------------------------------------------------------------------------------------------------------------------
# Code benchmarks through the sandbox
# ---------------------------------------------------------------------------------------------------------------------


def _block(code: str) -> str:
    return f"Here is my solution.\n```python\n{code}```\nDone."


def test_humaneval_fixture_pass_rates_through_the_sandbox(tmp_path):
    rows = [json.loads(line) for line in (FIXTURES / "humaneval_sample.jsonl").read_text().splitlines()]

    def script(request, s):
        row = rows[int(request.key.rsplit("/", 1)[1])]
        if s == 0:
            return _block(row["prompt"] + row["canonical_solution"])  # the reference solution passes
        if s == 1:
            return _block(row["prompt"] + "    pass\n")  # returns None: check() fails
        return "I am not sure how to do this."  # no code block

    result = evaluate_model(
        "scripted", [f"humaneval={FIXTURES / 'humaneval_sample.jsonl'}"], num_samples=3, generator=ScriptedGenerator(script),
        output_dir=tmp_path, progress=False,
    )  # fmt: skip
    bench = result.benchmarks["humaneval"]
    assert bench.kind == "code" and bench.num_questions == 3
    assert bench.metrics == pytest.approx({"avg@n": 1 / 3, "pass@1": 1 / 3, "pass@2": 2 / 3, "pass@3": 1.0})
    first = bench.questions[0].samples
    assert [s.correct for s in first] == [True, False, False] and [s.score for s in first] == [1.0, 0.0, 0.0]
    assert (
        first[0].extracted.startswith("def add") and first[2].extracted is None and first[2].reason == "no code block"
    )
    saved = json.loads((tmp_path / "samples.jsonl").read_text().splitlines()[0])
    assert saved["gold_sha256"] and json.loads(saved["gold"])["entry_point"] == "add"


def test_livecodebench_fixture_through_the_sandbox(tmp_path):
    tests = [it.gold for it in load_benchmark(f"livecodebench={write_jsonl(tmp_path / 'lcb.jsonl', LCB_ROWS)}").items]
    completions = [_block(code) for code in LCB_SOLUTIONS] + [_block("print(0)\n")]
    verdicts = grade_code(completions, [*tests, tests[0]], prelude=LCB_PRELUDE)
    assert [v.correct for v in verdicts] == [True, True, False]
    assert verdicts[0].reason == "3/3 passed" and verdicts[2].score == 0.0
    # Without the prelude, the LeetCode starter's `List` is undefined.
    assert grade_code(completions[1:2], tests[1:2])[0].correct is False


# ---------------------------------------------------------------------------------------------------------------------
# The CPU backend on the tiny model
# ---------------------------------------------------------------------------------------------------------------------


def _texts(result, name):
    return [[s.completion for s in q.samples] for q in result.benchmarks[name].questions]


def test_transformers_backend_end_to_end_and_determinism(tiny_model_dir, tmp_path):
    path = write_jsonl(tmp_path / "qa.jsonl", QA_ROWS)
    common = {"num_samples": 3, "max_new_tokens": 8, "progress": False, "backend": "transformers"}
    first = evaluate_model(
        tiny_model_dir, [str(path), "arithmetic"], limit=5, batch_size=4, output_dir=tmp_path / "o", **common
    )
    assert first.backend.startswith("transformers (cpu")
    assert set(first.benchmarks) == {"qa", "arithmetic"} and first.benchmarks["arithmetic"].num_questions == 5
    samples = [s for _, s in first.samples]
    assert len(samples) == 24 and all(0 < s.num_tokens <= 8 and s.finish_reason in ("stop", "length") for s in samples)
    assert first.benchmarks["arithmetic"].levels and (tmp_path / "o" / "summary.json").is_file()

    again = evaluate_model(tiny_model_dir, [str(path), "arithmetic"], limit=5, batch_size=4, **common)
    assert _texts(again, "qa") == _texts(first, "qa") and _texts(again, "arithmetic") == _texts(first, "arithmetic")
    # A sample depends on its question, index and seed, not on the batch it was generated in or the other questions.
    other_batching = evaluate_model(tiny_model_dir, [str(path)], batch_size=7, **common)
    assert _texts(other_batching, "qa") == _texts(first, "qa")
    reseeded = evaluate_model(tiny_model_dir, [str(path)], seed=1, **common)
    assert _texts(reseeded, "qa") != _texts(first, "qa")

    # A model object from a training loop (in train mode): the same samples, and its mode is left as it was.
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).train()
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    in_memory = evaluate_model(model, [str(path)], tokenizer=tokenizer, label="in-memory", **common)
    assert _texts(in_memory, "qa") == _texts(first, "qa") and model.training
    assert "| Δ in-memory vs" in compare_summaries([first, in_memory])  # results compare without files too


def test_cli_end_to_end_and_errors(tiny_model_dir, tmp_path, capsys):
    path = write_jsonl(tmp_path / "qa.jsonl", QA_ROWS)
    out = tmp_path / "cli"
    rc = main(
        [
            tiny_model_dir,
            "-b",
            str(path),
            "-n",
            "2",
            "--max-new-tokens",
            "4",
            "--k",
            "1",
            "2",
            "64",
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    assert rc == 0
    printed = capsys.readouterr().out
    assert "Backend: transformers" in printed and "| Model | qa | Average |" in printed
    assert {p.name for p in out.iterdir()} == {"samples.jsonl", "summary.json", "results.md"}
    assert json.loads((out / "summary.json").read_text())["config"]["ks"] == [1, 2]

    (tmp_path / "empty.jsonl").write_text("")
    write_jsonl(tmp_path / "noanswer.jsonl", [{"question": "q"}])
    for args, message in (
        (["-b", "no_such_benchmark"], "Unknown benchmark 'no_such_benchmark'"),
        (["-b", str(tmp_path / "empty.jsonl")], "is empty"),
        (["-b", str(tmp_path / "noanswer.jsonl")], "Could not find an answer column"),
        (["-b", f"amc23={tmp_path / 'noanswer.jsonl'}"], "Column 'answer' not found"),
        ([], "give at least one benchmark"),
    ):
        assert main([tiny_model_dir, *args, "--no-progress"]) == 2, args
        assert message in capsys.readouterr().err, message
    assert main(["--list-benchmarks"]) == 0
    listing = capsys.readouterr().out
    assert all(f"| {name} |" in listing for name in PAPER_TWELVE)


def test_vllm_backend_wiring_with_a_stand_in_module(tiny_model_dir, monkeypatch):
    """The vLLM path cannot run here (no GPU, no vllm): check what it hands to vLLM with a stand-in module."""
    import importlib.machinery
    import sys
    import types

    from transformers import AutoTokenizer

    from codapo_trl.evaluation import generation

    calls = {}

    class SamplingParams:
        def __init__(self, **kwargs):
            self.__dict__.update(kwargs)

    class LLM:
        def __init__(self, **kwargs):
            calls["llm"] = kwargs

        def get_tokenizer(self):
            return AutoTokenizer.from_pretrained(tiny_model_dir)

        def generate(self, prompts, params, use_tqdm=True):
            calls["prompts"], calls["params"] = prompts, params
            out = types.SimpleNamespace
            return [
                out(outputs=[out(text=f"{i}:{j}", token_ids=[1] * (j + 1), finish_reason="stop") for j in range(p.n)])
                for i, p in enumerate(params)
            ]

    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM, module.SamplingParams = LLM, SamplingParams
    monkeypatch.setitem(sys.modules, "vllm", module)
    generator = generation.VLLMGenerator("some/model", seed=3, max_model_len=512)
    requests = [generation.GenerationRequest(f"b/{i}", [{"role": "user", "content": f"q{i}"}]) for i in range(3)]
    results = generator.generate(requests, SamplingConfig(num_samples=2, temperature=0.6, max_new_tokens=9, seed=5))
    assert calls["llm"] == {"model": "some/model", "dtype": "auto", "seed": 3, "max_model_len": 512}
    assert [[c.text for c in r] for r in results] == [["0:0", "0:1"], ["1:0", "1:1"], ["2:0", "2:1"]]
    params = calls["params"]
    assert all(p.n == 2 and p.temperature == 0.6 and p.top_p == 1.0 and p.max_tokens == 9 for p in params)
    assert len({p.seed for p in params}) == 3 and params[0].seed == sample_seed(5, "b/0", -1) >> 1
    assert "<|im_start|>assistant" in generator.tokenizer.decode(calls["prompts"][0]["prompt_token_ids"])
    # Without a GPU, "auto" picks transformers even when vllm is importable.
    assert not generation.vllm_available()


def test_limit_says_it_keeps_the_first_questions_unbalanced(tmp_path, caplog):
    path = write_jsonl(tmp_path / "qa.jsonl", QA_ROWS)  # levels 1, 1, 2: the first two are both level 1
    with caplog.at_level("WARNING", logger="codapo_trl.evaluation.evaluate"):
        result = evaluate_model(
            "m", [str(path)], num_samples=1, limit=2, generator=ScriptedGenerator(_qa_script([1, 1, 1])),
            output_dir=tmp_path / "out", progress=False,
        )  # fmt: skip
    assert "limit=2 keeps the first 2 questions of qa in its own order, not balanced across levels: level 1: 2" in (
        caplog.text
    )
    assert {q.level for q in result.benchmarks["qa"].questions} == {1}
    assert "not balanced across levels" in (tmp_path / "out" / "results.md").read_text()
