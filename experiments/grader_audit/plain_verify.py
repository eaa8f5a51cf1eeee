"""Plain math-verify, the audit's reference grader: `parse` the gold and the whole completion, then `verify`.

Default settings throughout (math-verify's own extraction of the completion's answer, its own timeouts); the gold,
a bare LaTeX answer in MATH, is put between `$...$` as math-verify's documentation does for its golds. Run in a
`DeadlineProcessPool` worker by `grade.py`, so that a hang is cut off by killing the worker.
"""

from __future__ import annotations

import logging

from math_verify import parse, verify


# math-verify logs each of its own parse timeouts with the whole input; a degenerate completion makes that megabytes.
logging.getLogger("math_verify").setLevel(logging.CRITICAL)


def verify_pair(pair: tuple[str, str]) -> tuple[bool, str, str]:
    """Grade one `(gold, completion)`: whether math-verify pays it, and how it read both (for the report)."""
    gold, completion = pair
    gold_parsed = parse(f"${gold}$")
    answer_parsed = parse(completion)
    paid = bool(verify(gold_parsed, answer_parsed))
    return paid, str(gold_parsed[-1] if gold_parsed else ""), str(answer_parsed[-1] if answer_parsed else "")
