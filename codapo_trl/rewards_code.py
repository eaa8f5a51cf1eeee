"""Old import path of `codapo_trl.rewards.code`, kept because other tests, `benchmarks/sandbox_throughput.py` and
users import from it; new code imports `codapo_trl.rewards.code`."""

from codapo_trl.rewards.code import (
    FLOAT_TOLERANCE,
    CodeEvaluation,
    InvalidTestsError,
    ProblemTests,
    TestOutcome,
    code_execution_reward,
    evaluate_code,
    extract_code,
    make_code_execution_reward,
    outputs_match,
    parse_tests,
    values_match,
)


__all__ = [
    "FLOAT_TOLERANCE",
    "CodeEvaluation",
    "InvalidTestsError",
    "ProblemTests",
    "TestOutcome",
    "code_execution_reward",
    "evaluate_code",
    "extract_code",
    "make_code_execution_reward",
    "outputs_match",
    "parse_tests",
    "values_match",
]
