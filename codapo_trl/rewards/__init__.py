"""Rewards for CoDaPO training, and the answer grader shared with evaluation and analysis.

- `math` -- the maths reward for TRL (`math_accuracy_reward`, binary accuracy, the paper's reward);
- `grading` -- the grader behind it and `codapo-eval` (`grade_answers`, `configure_grader`, the verdict reasons),
  one pipeline: `extraction` (which part of an output is its final answer), `form_reading` (its LaTeX read as
  written), `equality` (exact, typed comparison), `judging` (what the answer states, and whether it was computed,
  against the question) and `checks` (answer types, absurd answers);
- `code` -- the code-execution reward (pass rate of the completion's code on the problem's tests, in the sandbox);
  imported on first use, so maths training never loads the sandbox;
- `deadline_pool` -- worker processes with a hard time limit per input (the judge runs there);
- `registry` -- rewards by name (`REWARD_FUNCS`, `get_reward_funcs`) and `check_reward_columns`.

The answer vocabulary itself (boxed answers, completion text, answer types) lives in `codapo_trl.answers`.
"""

from codapo_trl.answers import ANSWER_TYPES
from codapo_trl.rewards.extraction import extract_final_answer
from codapo_trl.rewards.grading import (
    BOX_IN_EXPRESSION,
    CRASHED,
    FORM_REASONS,
    GOLD_MISSING,
    GOLD_NOT_A_CHOICE,
    GOLD_NOT_MATH,
    GOLD_TIMED_OUT,
    GOLD_UNPARSEABLE,
    NO_ANSWER,
    NOT_A_CHOICE,
    NOT_A_NUMBER,
    NOT_FINAL,
    TIMED_OUT,
    UNAVAILABLE,
    UNPARSEABLE_ANSWER,
    GradeResult,
    configure_grader,
    grade_answers,
    grader_settings,
)
from codapo_trl.rewards.math import math_accuracy_reward
from codapo_trl.rewards.registry import REWARD_FUNCS, check_reward_columns, code_execution_reward, get_reward_funcs


__all__ = [
    "ANSWER_TYPES",
    "CRASHED",
    "GOLD_MISSING",
    "GOLD_NOT_A_CHOICE",
    "GOLD_NOT_MATH",
    "GOLD_TIMED_OUT",
    "GOLD_UNPARSEABLE",
    "NOT_A_CHOICE",
    "NOT_A_NUMBER",
    "NO_ANSWER",
    "NOT_FINAL",
    "FORM_REASONS",
    "REWARD_FUNCS",
    "BOX_IN_EXPRESSION",
    "TIMED_OUT",
    "UNAVAILABLE",
    "UNPARSEABLE_ANSWER",
    "GradeResult",
    "check_reward_columns",
    "code_execution_reward",
    "configure_grader",
    "extract_final_answer",
    "get_reward_funcs",
    "grade_answers",
    "grader_settings",
    "math_accuracy_reward",
]
