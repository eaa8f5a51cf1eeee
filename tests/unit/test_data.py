"""Tests of `codapo_trl.data`: registry field mappings, local files, errors and the synthetic arithmetic task.

Everything is offline: hub loads are redirected to small fixture files the tests write.
"""

import json
import random
import re

import datasets
import pytest
from datasets import Dataset

from codapo_trl import data
from codapo_trl.data import (
    ARITHMETIC_LEVELS,
    DATASET_REGISTRY,
    SYSTEM_PROMPT,
    DatasetSpec,
    arithmetic_pool_sizes,
    format_math_dataset,
    gsm8k_final_answer,
    last_boxed,
    load_math_dataset,
    make_arithmetic_dataset,
    make_conversation,
    parse_level,
)


MATH_ROWS = [
    {
        "problem": "Compute $1+1$ and then $\\frac{1}{2}$.",
        "level": "Level 2",
        "type": "Algebra",
        "solution": "First $1+1=\\boxed{2}$. Then the result is $\\boxed{\\frac{1}{2}}$.",
    },
    {
        "problem": "Find $x$ if $x^2 = 4$, $x > 0$.",
        "level": "Level 5",
        "type": "Intermediate Algebra",
        "solution": "We get $x = \\boxed{2}$ since $x>0$; note $\\{a, b\\}$ is unused.",
    },
    {
        "problem": "A problem whose level is unknown.",
        "level": "Level ?",
        "type": "Geometry",
        "solution": "The answer is $\\boxed{\\{1, 2\\}}$.",
    },
]
GSM8K_ROWS = [
    {"question": "How much is 1000 plus 234?", "answer": "1000 + 234 = <<1000+234=1234>>1234\n#### 1,234"},
    {"question": "What is 2 times 3?", "answer": "2 * 3 = <<2*3=6>>6\n#### 6"},
]
MATH500_ROWS = [
    {
        "problem": "What is $\\sqrt{16}$?",
        "solution": "It is $\\boxed{4}$.",
        "answer": "4",
        "subject": "Prealgebra",
        "level": 1,
        "unique_id": "test/prealgebra/1.json",
    },
    {
        "problem": "Simplify $\\frac{2}{4}$.",
        "solution": "$\\boxed{\\frac12}$",
        "answer": "\\frac{1}{2}",
        "subject": "Prealgebra",
        "level": 3,
        "unique_id": "test/prealgebra/2.json",
    },
]


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def fake_hub(monkeypatch, tmp_path):
    """Redirect `datasets.load_dataset(hub_id, ...)` to local fixture files; record the calls."""
    files = {}
    calls = []
    real_load_dataset = datasets.load_dataset

    def load_dataset(path, name=None, split=None, **kwargs):
        if path in ("json", "parquet"):
            return real_load_dataset(path, name, split=split, **kwargs)
        calls.append((path, name, split))
        return real_load_dataset("json", data_files=str(files[path]), split="train")

    def add(hub_id, rows):
        files[hub_id] = write_jsonl(tmp_path / f"{hub_id.replace('/', '__')}.jsonl", rows)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    return add, calls


# --------------------------------------------------------------------------------------------------------------------
# Parsers


def test_last_boxed_takes_last_brace_matched_box():
    assert last_boxed(MATH_ROWS[0]["solution"]) == "\\frac{1}{2}"
    assert last_boxed(MATH_ROWS[1]["solution"]) == "2"
    assert last_boxed(MATH_ROWS[2]["solution"]) == "\\{1, 2\\}"
    assert last_boxed("\\boxed{a^{2}+\\sqrt{b}} and \\fbox{7}") == "7"
    assert last_boxed("so \\boxed 5.") == "5"
    assert last_boxed("unbalanced \\boxed{3 and nothing else") is None
    assert last_boxed("first \\boxed{3} then broken \\boxed{4") == "3"
    assert last_boxed("no box") is None
    assert last_boxed(None) is None


def test_gsm8k_final_answer():
    assert gsm8k_final_answer("steps\n#### 1,234") == "1234"
    assert gsm8k_final_answer("#### -5") == "-5"
    assert gsm8k_final_answer("18") == "18"
    assert gsm8k_final_answer(None) is None


@pytest.mark.parametrize(
    "value, expected",
    [("Level 3", 3), ("level 1", 1), ("4", 4), (2, 2), (5.0, 5), ("Level ?", None), (None, None), ("hard", None)],
)
def test_parse_level(value, expected):
    assert parse_level(value) == expected


# --------------------------------------------------------------------------------------------------------------------
# Prompt structure


def test_make_conversation_with_and_without_system_prompt():
    assert make_conversation("Q?") == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "Q?"},
    ]
    assert make_conversation("Q?", None) == [{"role": "user", "content": "Q?"}]
    assert make_conversation("Q?", "") == [{"role": "user", "content": "Q?"}]
    assert make_conversation("Q?", "Be brief.")[0] == {"role": "system", "content": "Be brief."}


def test_system_prompt_is_the_papers():
    assert SYSTEM_PROMPT == "Please reason step by step, and put your final answer within \\boxed{}."


# --------------------------------------------------------------------------------------------------------------------
# Registry specs, through a fake hub


def test_registry_has_the_required_specs():
    assert {"math", "math500", "gsm8k", "arithmetic"} <= set(DATASET_REGISTRY)
    assert DATASET_REGISTRY["math"].hub_id == "DigitalLearningGmbH/MATH-lighteval"
    assert DATASET_REGISTRY["math"].config == "default"
    assert DATASET_REGISTRY["math500"].hub_id == "HuggingFaceH4/MATH-500"
    assert DATASET_REGISTRY["gsm8k"].hub_id == "openai/gsm8k"
    assert DATASET_REGISTRY["gsm8k"].config == "main"
    for spec in DATASET_REGISTRY.values():
        assert isinstance(spec, DatasetSpec)
        assert spec.answer_type in data.ANSWER_TYPES


def test_math_spec(fake_hub):
    add, calls = fake_hub
    add("DigitalLearningGmbH/MATH-lighteval", MATH_ROWS)
    ds = load_math_dataset("math", "train")
    assert calls == [("DigitalLearningGmbH/MATH-lighteval", "default", "train")]
    assert ds["answer"] == ["\\frac{1}{2}", "2", "\\{1, 2\\}"]
    assert ds["level"] == [2, 5, None]
    assert ds["type"] == ["Algebra", "Intermediate Algebra", "Geometry"]
    assert ds["solution"] == [row["solution"] for row in MATH_ROWS]
    assert ds["question"] == [row["problem"] for row in MATH_ROWS]
    assert set(ds["answer_type"]) == {"math"}
    assert ds[0]["prompt"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": MATH_ROWS[0]["problem"]},
    ]
    assert ds.features["level"] == datasets.Value("int64")


def test_math_spec_test_split_and_level_filter(fake_hub):
    add, calls = fake_hub
    add("DigitalLearningGmbH/MATH-lighteval", MATH_ROWS)
    ds = load_math_dataset("math", "test", levels=[5])
    assert calls[-1] == ("DigitalLearningGmbH/MATH-lighteval", "default", "test")
    assert ds["level"] == [5]


def test_math500_spec(fake_hub):
    add, calls = fake_hub
    add("HuggingFaceH4/MATH-500", MATH500_ROWS)
    ds = load_math_dataset("math500", "test", system_prompt=None)
    assert calls == [("HuggingFaceH4/MATH-500", None, "test")]
    assert ds["answer"] == ["4", "\\frac{1}{2}"]
    assert ds["level"] == [1, 3]
    assert ds["subject"] == ["Prealgebra", "Prealgebra"]
    assert ds[0]["prompt"] == [{"role": "user", "content": "What is $\\sqrt{16}$?"}]


def test_gsm8k_spec(fake_hub):
    add, calls = fake_hub
    add("openai/gsm8k", GSM8K_ROWS)
    ds = load_math_dataset("gsm8k", "test")
    assert calls == [("openai/gsm8k", "main", "test")]
    assert ds["answer"] == ["1234", "6"]
    assert set(ds["answer_type"]) == {"number"}
    assert ds["level"] == [None, None]
    assert ds["solution"] == [row["answer"] for row in GSM8K_ROWS]  # the worked solution is kept


def test_unknown_split_lists_valid_splits(fake_hub):
    with pytest.raises(ValueError, match=r"no split 'train'.*\['test'\]"):
        load_math_dataset("math500", "train")


def test_mmlu_spec_builds_choices_and_letter(fake_hub):
    add, _ = fake_hub
    add("cais/mmlu", [{"question": "2+2?", "subject": "math", "choices": ["3", "4", "5", "6"], "answer": 1}])
    ds = load_math_dataset("mmlu", "test")
    assert ds[0]["question"] == "2+2?\n\nA. 3\nB. 4\nC. 5\nD. 6"
    assert ds[0]["answer"] == "B"
    assert ds[0]["answer_type"] == "choice"


def test_local_file_with_registry_spec(tmp_path):
    path = write_jsonl(tmp_path / "gsm8k_test.jsonl", GSM8K_ROWS)
    ds = load_math_dataset(path, spec="gsm8k")
    assert ds["answer"] == ["1234", "6"]
    assert set(ds["answer_type"]) == {"number"}


def test_local_gsm8k_copy_with_existing_solution_column(tmp_path):
    rows = [{"question": "q", "answer": "18", "solution": "worked solution\n#### 18"}]
    ds = load_math_dataset(write_jsonl(tmp_path / "g.jsonl", rows), spec="gsm8k")
    assert ds["answer"] == ["18"]
    assert ds["solution"] == ["worked solution\n#### 18"]


# --------------------------------------------------------------------------------------------------------------------
# Local files with auto-detection


def test_local_jsonl_math_style_auto_detects_fields(tmp_path):
    ds = load_math_dataset(write_jsonl(tmp_path / "math.jsonl", MATH_ROWS))
    assert ds["question"] == [row["problem"] for row in MATH_ROWS]
    assert ds["answer"] == ["\\frac{1}{2}", "2", "\\{1, 2\\}"]  # last box of `solution`
    assert ds["level"] == [2, 5, None]
    assert set(ds["answer_type"]) == {"math"}
    assert "type" in ds.column_names


def test_local_parquet_math500_style(tmp_path):
    path = tmp_path / "math500.parquet"
    Dataset.from_list(MATH500_ROWS).to_parquet(str(path))
    ds = load_math_dataset(path)
    assert ds["answer"] == ["4", "\\frac{1}{2}"]  # `answer` wins over the boxes of `solution`
    assert ds["level"] == [1, 3]
    assert ds["unique_id"] == [row["unique_id"] for row in MATH500_ROWS]


def test_local_json_gsm8k_style_auto_parses_hashes(tmp_path):
    path = tmp_path / "gsm8k.json"
    path.write_text(json.dumps(GSM8K_ROWS))
    ds = load_math_dataset(path)
    assert ds["answer"] == ["1234", "6"]
    assert ds["solution"] == [row["answer"] for row in GSM8K_ROWS]
    assert ds["level"] == [None, None]


def test_local_conversational_prompt_column(tmp_path):
    rows = [{"prompt": [{"role": "user", "content": "What is 2 + 2?"}], "answer": 4}]
    ds = load_math_dataset(write_jsonl(tmp_path / "conv.jsonl", rows))
    assert ds[0]["question"] == "What is 2 + 2?"
    assert ds[0]["answer"] == "4"
    assert ds[0]["prompt"][0]["role"] == "system"


def test_explicit_column_overrides(tmp_path):
    rows = [
        {"problem": "ignored", "Q": "What is 1 + 2?", "final": "3", "tier": "Level 4", "answer": "wrong"},
        {"problem": "ignored", "Q": "What is 2 + 2?", "final": "\\boxed{4}", "tier": "2", "answer": "wrong"},
    ]
    ds = load_math_dataset(
        write_jsonl(tmp_path / "custom.jsonl", rows),
        question_column="Q",
        answer_column="final",
        level_column="tier",
        answer_type="number",
    )
    assert ds["question"] == ["What is 1 + 2?", "What is 2 + 2?"]
    assert ds["answer"] == ["3", "4"]
    assert ds["level"] == [4, 2]
    assert set(ds["answer_type"]) == {"number"}


def test_answer_parser_and_limit(tmp_path):
    rows = [{"question": f"q{i}", "answer": f"see \\boxed{{{i}}}"} for i in range(5)]
    path = write_jsonl(tmp_path / "p.jsonl", rows)
    assert load_math_dataset(path, answer_parser="plain", limit=2)["answer"] == ["see \\boxed{0}", "see \\boxed{1}"]
    assert load_math_dataset(path, answer_parser=lambda v: v[-2])["answer"] == ["0", "1", "2", "3", "4"]


def test_per_row_answer_type_column(tmp_path):
    rows = [
        {"question": "a", "answer": "1", "answer_type": "number"},
        {"question": "b", "answer": "C", "answer_type": "choice"},
    ]
    ds = load_math_dataset(write_jsonl(tmp_path / "t.jsonl", rows))
    assert ds["answer_type"] == ["number", "choice"]


def test_rows_without_answer_are_dropped(tmp_path, caplog):
    rows = [dict(MATH_ROWS[0]), {**MATH_ROWS[1], "solution": "no box here"}]
    with caplog.at_level("WARNING", logger="codapo_trl.data"):
        ds = load_math_dataset(write_jsonl(tmp_path / "m.jsonl", rows))
    assert len(ds) == 1
    assert "Dropped 1 of 2 rows" in caplog.text


# --------------------------------------------------------------------------------------------------------------------
# Errors


def test_missing_question_column_names_found_columns(tmp_path):
    path = write_jsonl(tmp_path / "noq.jsonl", [{"text": "x", "answer": "1"}])
    with pytest.raises(ValueError, match=r"question column.*\['text', 'answer'\].*question_column="):
        load_math_dataset(path)


def test_missing_answer_column_names_found_columns(tmp_path):
    path = write_jsonl(tmp_path / "noa.jsonl", [{"problem": "x", "result": "1"}])
    with pytest.raises(ValueError, match=r"answer column.*\['problem', 'result'\].*answer_column="):
        load_math_dataset(path)


def test_explicit_column_that_does_not_exist(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"problem": "x", "answer": "1"}])
    with pytest.raises(ValueError, match=r"'nope' not found.*\['problem', 'answer'\].*answer_column="):
        load_math_dataset(path, answer_column="nope")


def test_spec_field_missing_in_local_file(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"problem": "x", "answer": "1"}])
    with pytest.raises(ValueError, match=r"'question' not found.*question_column="):
        load_math_dataset(path, spec="gsm8k")


def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match=r"Unknown dataset 'nonsense'.*'arithmetic'.*'gsm8k'.*'math'"):
        load_math_dataset("nonsense")


def test_empty_file_is_a_clear_error(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    with pytest.raises(ValueError, match="empty"):
        load_math_dataset(path)


def test_missing_file_and_bad_suffix(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_math_dataset(tmp_path / "missing.jsonl")
    bad = tmp_path / "data.txt"
    bad.write_text("hello")
    with pytest.raises(ValueError, match="Unsupported file type"):
        load_math_dataset(bad)


def test_bad_answer_type_and_parser(tmp_path):
    path = write_jsonl(tmp_path / "x.jsonl", [{"problem": "x", "answer": "1"}])
    with pytest.raises(ValueError, match="answer_type"):
        load_math_dataset(path, answer_type="text")
    with pytest.raises(ValueError, match="Unknown answer_parser"):
        load_math_dataset(path, answer_parser="magic")


def test_format_math_dataset_on_in_memory_rows():
    ds = format_math_dataset(Dataset.from_list(MATH500_ROWS), "math500", system_prompt="S")
    assert ds[1]["prompt"][0] == {"role": "system", "content": "S"}
    assert ds["answer"] == ["4", "\\frac{1}{2}"]


# --------------------------------------------------------------------------------------------------------------------
# Synthetic arithmetic


_QUESTION_RE = re.compile(r"What is (\d+) \+ (\d+)\?")


def test_arithmetic_answers_levels_and_sizes():
    ds = make_arithmetic_dataset(10, seed=3)
    assert len(ds) == 50
    assert sorted(ds.unique("level")) == [1, 2, 3, 4, 5]
    for row in ds:
        a, b = map(int, _QUESTION_RE.fullmatch(row["question"]).groups())
        assert row["answer"] == str(a + b)
        assert (row["a"], row["b"]) == (a, b)
        assert ARITHMETIC_LEVELS[row["level"]].accepts(a, b)
        assert row["answer_type"] == "number"
    for level in range(1, 6):
        assert ds["level"].count(level) == 10
    assert len(set(ds["question"])) == len(ds)  # no duplicates within a split


def test_arithmetic_is_deterministic_per_seed():
    first = make_arithmetic_dataset(8, seed=7).to_list()
    assert first == make_arithmetic_dataset(8, seed=7).to_list()
    assert first != make_arithmetic_dataset(8, seed=8).to_list()


def test_arithmetic_levels_are_independent_streams():
    both = make_arithmetic_dataset(5, levels=(1, 3), seed=0)
    only3 = make_arithmetic_dataset(5, levels=(3,), seed=0)
    assert sorted(q for q, lvl in zip(both["question"], both["level"]) if lvl == 3) == sorted(only3["question"])


def test_arithmetic_train_and_test_never_share_a_question():
    train_sizes, test_sizes = arithmetic_pool_sizes("train"), arithmetic_pool_sizes("test")
    listed = {level: spec for level, spec in ARITHMETIC_LEVELS.items() if not spec.sampled}
    assert set(train_sizes) == set(test_sizes) == set(listed)
    for level, spec in listed.items():
        pools = data._arithmetic_pools(level)
        assert not set(pools["train"]) & set(pools["test"])
        assert len(pools["train"]) + len(pools["test"]) == spec.pool_size()
        assert test_sizes[level] >= 0.25 * spec.pool_size() and train_sizes[level] > test_sizes[level]
    # generated rows stay inside their split's pool, whatever the seed
    test_questions = {data.arithmetic_question(a, b) for lvl in listed for a, b in data._arithmetic_pools(lvl)["test"]}
    capped = {level: min(size, 300) for level, size in train_sizes.items()}
    for seed in (0, 1, 2):
        train = make_arithmetic_dataset(capped, seed=seed, split="train")["question"]
        assert not set(train) & test_questions
        test = make_arithmetic_dataset(10, seed=seed, split="test")["question"]
        assert set(test) <= test_questions


def test_arithmetic_level_definitions():
    assert ARITHMETIC_LEVELS[1].accepts(3, 4) and not ARITHMETIC_LEVELS[1].accepts(5, 7)
    assert ARITHMETIC_LEVELS[2].accepts(5, 7) and not ARITHMETIC_LEVELS[2].accepts(3, 4)
    assert ARITHMETIC_LEVELS[3].accepts(17, 8) and not ARITHMETIC_LEVELS[3].accepts(57, 8)
    assert ARITHMETIC_LEVELS[4].accepts(57, 8) and not ARITHMETIC_LEVELS[4].accepts(57, 18)
    assert ARITHMETIC_LEVELS[5].accepts(157, 38) and not ARITHMETIC_LEVELS[5].accepts(57, 38)
    # level 6: three-digit + three-digit with at least two carrying columns (a carry passed on counts)
    assert ARITHMETIC_LEVELS[6].accepts(158, 263)  # 8+3 carries, 5+6+1 carries
    assert ARITHMETIC_LEVELS[6].accepts(505, 596)  # 5+6 carries, 0+9+1 carries only through the carry passed on
    assert not ARITHMETIC_LEVELS[6].accepts(158, 261)  # one carry
    assert not ARITHMETIC_LEVELS[6].accepts(158, 63)  # two carries but a two-digit operand
    # the levels never overlap: each question has one level
    seen = {}
    for level, spec in ARITHMETIC_LEVELS.items():
        for a in range(0, 1000):
            for b in range(0, 100):
                if spec.accepts(a, b):
                    assert (a, b) not in seen, (a, b, seen.get((a, b)), level)
                    seen[(a, b)] = level


def test_sampled_level_splits_by_hash_and_never_repeats():
    spec = ARITHMETIC_LEVELS[7]
    assert spec.sampled and spec.pool_size() == 9000 * 9000
    with pytest.raises(ValueError, match="no listed pool"):
        data._arithmetic_pools(7)
    train = make_arithmetic_dataset({7: 400}, seed=0, split="train")
    test = make_arithmetic_dataset({7: 400}, seed=0, split="test")
    for rows, split in ((train, "train"), (test, "test")):
        pairs = list(zip(rows["a"], rows["b"]))
        assert len(set(pairs)) == 400  # distinct within a request
        assert all(spec.accepts(a, b) and data.sampled_split(a, b) == split for a, b in pairs)
        assert all(r == str(a + b) for r, a, b in zip(rows["answer"], rows["a"], rows["b"]))
    assert not set(train["question"]) & set(test["question"])
    # the split is the hash's, not the seed's: other seeds draw other questions on the same side
    other = make_arithmetic_dataset({7: 400}, seed=1, split="test")
    assert other["question"] != test["question"] and all(
        data.sampled_split(a, b) == "test" for a, b in zip(other["a"], other["b"])
    )
    # about a quarter of uniformly drawn pairs are test questions (400 draws: 4 SD is about 0.087)
    rng = random.Random(5)
    draws = [data.sampled_split(rng.randint(1000, 9999), rng.randint(1000, 9999)) for _ in range(400)]
    assert abs(draws.count("test") / 400 - data.ARITHMETIC_TEST_FRACTION) < 0.09
    # deterministic, and an independent stream: adding another level changes none of level 7's rows
    assert make_arithmetic_dataset({7: 400}, seed=0, split="test").to_list() == test.to_list()
    mixed = make_arithmetic_dataset({5: 10, 7: 400}, seed=0, split="test")
    assert sorted(q for q, lv in zip(mixed["question"], mixed["level"]) if lv == 7) == sorted(test["question"])
    # the registry's default test size for it, like any level, is 40
    assert load_math_dataset("arithmetic", "test", levels=[7], system_prompt=None)["level"] == [7] * 40
    with pytest.raises(ValueError, match="draws at most 810000"):
        make_arithmetic_dataset({7: 810_001})
    with pytest.raises(ValueError, match="cannot take a carry condition"):
        data.ArithmeticLevel(8, (1000, 9999), (1000, 9999), min_carries=2, sampled=True)


def test_carry_count_matches_column_addition():
    # against the written algorithm on digit lists, for every pair of a grid that crosses all carry patterns
    for a in range(0, 1000, 7):
        for b in range(0, 1000, 11):
            digits_a, digits_b = str(a)[::-1], str(b)[::-1]
            incoming, expected = 0, 0
            for i in range(max(len(digits_a), len(digits_b))):
                column = int((digits_a + "0" * 4)[i]) + int((digits_b + "0" * 4)[i]) + incoming
                incoming = column // 10
                expected += incoming
            assert data.carry_count(a, b) == expected, (a, b)
    assert ARITHMETIC_LEVELS[6].min_carries == 2 and ARITHMETIC_LEVELS[5].min_carries == 0


def test_arithmetic_repeats_and_per_level_counts():
    ds = make_arithmetic_dataset(100, levels=(1,), seed=0, allow_repeats=True)
    questions = ds["question"]
    assert len(questions) == 100
    pool = arithmetic_pool_sizes("train")[1]
    assert len(set(questions)) == pool  # the whole pool is used before any question repeats
    counts = {q: questions.count(q) for q in set(questions)}
    assert set(counts.values()) <= {100 // pool, 100 // pool + 1}
    mixed = make_arithmetic_dataset({1: 3, 5: 7}, seed=0)
    assert sorted(mixed["level"]) == [1] * 3 + [5] * 7


def test_arithmetic_validation_is_test_and_errors():
    assert (
        make_arithmetic_dataset(3, split="validation").to_list() == make_arithmetic_dataset(3, split="test").to_list()
    )
    with pytest.raises(ValueError, match="splits"):
        make_arithmetic_dataset(3, split="dev")
    with pytest.raises(ValueError, match="Unknown arithmetic level"):
        make_arithmetic_dataset(3, levels=(99,))
    with pytest.raises(ValueError, match=r"only 14 distinct test questions.*allow_repeats=True"):
        make_arithmetic_dataset(15, levels=(1,), split="test")


def test_arithmetic_registry_entry():
    ds = load_math_dataset("arithmetic", "validation", num_per_level=4, seed=1, system_prompt=None)
    assert len(ds) == 20
    assert ds[0]["prompt"] == [{"role": "user", "content": ds[0]["question"]}]
    assert set(ds["answer_type"]) == {"number"}
    assert ds.features["level"] == datasets.Value("int64")
    assert ds["question"] == make_arithmetic_dataset(4, seed=1, split="test")["question"]
    train = load_math_dataset("arithmetic", "train", num_per_level=4, levels=[1, 2])
    assert set(train["level"]) == {1, 2}
    assert train[0]["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}


def test_arithmetic_registry_builds_a_level_outside_the_defaults():
    # level 6 is not in the builder's default levels: asking for it must give its rows, not an empty filter
    mix = load_math_dataset("arithmetic", "train", num_per_level=5, levels=[4, 5, 6])
    assert sorted(mix["level"]) == [4] * 5 + [5] * 5 + [6] * 5
    assert all(
        ARITHMETIC_LEVELS[6].accepts(int(a), int(b)) for a, b, lv in zip(mix["a"], mix["b"], mix["level"]) if lv == 6
    )
    # a request within the defaults builds exactly what it did before level 6 existed: filtered from levels 1-5
    within = load_math_dataset("arithmetic", "train", num_per_level=5, levels=[3, 4, 5])
    full = make_arithmetic_dataset(5, levels=(1, 2, 3, 4, 5), seed=0, split="train")
    assert within["question"] == [q for q, lv in zip(full["question"], full["level"]) if lv in (3, 4, 5)]


def test_arithmetic_registry_defaults():
    train = load_math_dataset("arithmetic", "train")
    assert len(train) == 5 * 200
    test = load_math_dataset("arithmetic", "test")
    assert [test["level"].count(level) for level in range(1, 6)] == [14, 12, 23, 40, 40]
    assert len(set(test["question"])) == len(test)
    assert not set(train["question"]) & set(test["question"])


def test_rows_are_conversational_for_trl(tiny_model_dir):
    from transformers import AutoTokenizer
    from trl.data_utils import is_conversational, maybe_apply_chat_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    row = load_math_dataset("arithmetic", "test", num_per_level=1)[0]
    assert is_conversational(row)
    text = maybe_apply_chat_template({"prompt": row["prompt"]}, tokenizer)["prompt"]
    assert text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT)
    assert text.endswith(row["question"] + "<|im_end|>\n<|im_start|>assistant\n")


def test_arithmetic_doctests():
    import doctest

    from codapo_trl.data import arithmetic

    result = doctest.testmod(arithmetic)
    assert result.attempted >= 2 and result.failed == 0
