"""The red team's attacks on the code reward's verdict (issue 25), and their honest counterparts.

The cases (`tests/fixtures/code_judge_redteam_cases.json`: the red team's `CASES`, with its ids, families and notes)
were written by a red team that had not read the code, before the judge process existed; it probed the old
in-process harness as a black box only (against it, 22 of 128 hostile programs were paid and 6 of 78 honest ones
refused). Every hostile program is wrong and must be paid 0.0; every honest one is correct and must be paid 1.0.
Each case is bounded even if the defence fails: the sandbox's limits (2 s wall clock per test case here) and a
pytest timeout per case.

One case was changed: `mutate_arg_expected_from_input_check` used the test `assert candidate(x) == sorted(x)`,
which computes the expected value from the argument after the call. In one interpreter, and so in the judge (which
writes the candidate's mutations back into the test's arguments, as a HumanEval test that inspects its arguments
needs), a candidate that empties its argument satisfies that test as written: the hole is in the test, not in the
verdict. Its test now computes the expected value from its own copy (`candidate(list(x)) == sorted(x)`), as
HumanEval/32 does with `copy.deepcopy`; that also checks that the write-back reaches only the object passed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codapo_trl.rewards.code import evaluate_code
from codapo_trl.sandbox import Sandbox, SandboxConfig


FIXTURE = Path(__file__).parents[1] / "fixtures" / "code_judge_redteam_cases.json"
CASES = {case["id"]: case for case in json.loads(FIXTURE.read_text())}


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(SandboxConfig(timeout=2.0, memory_mb=256, max_output_bytes=1 << 20), max_workers=2) as sb:
        yield sb


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case_id", sorted(CASES))
def test_redteam_case(case_id, sandbox, tmp_path, monkeypatch):
    case = CASES[case_id]
    monkeypatch.chdir(tmp_path)
    evaluation = evaluate_code(case["program"], case["tests"], sandbox=sandbox)
    expected = 0.0 if case["kind"] == "hostile" else 1.0
    assert evaluation.reward == expected, (case["family"], case["note"], evaluation.reason)


def test_every_family_has_hostile_and_honest_cases():
    families = {(case["family"], case["kind"]) for case in CASES.values()}
    for family in {family for family, _ in families}:
        assert (family, "hostile") in families and (family, "honest") in families, family
