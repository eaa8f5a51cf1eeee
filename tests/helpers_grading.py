"""Checks shared by the maths red-team suites (tests/unit/test_maths_redteam*.py)."""

from codapo_trl.rewards import grade_answers
from codapo_trl.rewards.judging import RESTATED


def developer_probes_wrong(hostile: list[tuple[str, str]], honest: list[tuple[str, str]]) -> list[tuple]:
    """The developer's `(boxed answer, gold)` probes graded without a question: the ones graded against expectation.

    Issue 60: a hostile probe that is another closed form of the gold's value is paid where no question states it
    (restatement is judged against the question), so it is not counted wrong here; it must be refused, as a
    restatement, where the question writes that expression, which this asserts."""
    pairs = [(a, g, 0.0) for a, g in hostile] + [(a, g, 1.0) for a, g in honest]
    results = grade_answers([f"So the answer is $\\boxed{{{a}}}$." for a, _, _ in pairs], [g for _, g, _ in pairs])
    wrong = [(a, g, r.reward, r.reason) for (a, g, want), r in zip(pairs, results) if (r.reward or 0.0) != want]
    closed_forms = [(a, g) for a, g, reward, _ in wrong if reward == 1.0 and (a, g) in hostile]
    restated = grade_answers(
        [f"So the answer is $\\boxed{{{a}}}$." for a, _ in closed_forms],
        [g for _, g in closed_forms],
        questions=[f"Simplify ${a}$." for a, _ in closed_forms],
    )
    assert all(r.reason == RESTATED for r in restated), [(c, r) for c, r in zip(closed_forms, restated)]
    return [w for w in wrong if (w[0], w[1]) not in closed_forms]
