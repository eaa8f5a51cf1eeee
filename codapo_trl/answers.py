"""The answer vocabulary shared by data, rewards, evaluation and analysis: one home for each rule.

- **Answer types** (`ANSWER_TYPES`): how a gold answer is compared, per dataset row.
- **Boxed answers** (`last_boxed`, `contains_box`, `braced_group`): what a `\\boxed{...}` holds.
- **Gold-answer parsers** (`ANSWER_PARSERS`: `plain_answer`, `gsm8k_final_answer`, `auto_answer`,
  `solution_last_boxed`): how the data loaders turn a source column into the gold answer.
- **Completion text** (`completion_text`): which text of a TRL completion a reward reads.
- **Question ids** (`QUESTION_ID_COLUMNS`, `row_question_id`): which dataset column names a question.

Where two copies of a rule used to disagree, the rule chosen and the reason are written at the rule (and in
`tests/test_answers.py`, whose cases fail under the rule that lost). The reward is read as an attacker would read it:
whatever it pays, a policy will find.

This module imports nothing from `codapo_trl`, so every wing can import it without a cycle.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any


__all__ = [
    "ANSWER_PARSERS",
    "ANSWER_TYPES",
    "QUESTION_ID_COLUMNS",
    "auto_answer",
    "braced_group",
    "braced_group_end",
    "completion_text",
    "contains_box",
    "gsm8k_final_answer",
    "last_boxed",
    "plain_answer",
    "row_question_id",
    "solution_last_boxed",
    "text_after_last_box",
    "text_around_last_box",
]

ANSWER_TYPES = ("math", "number", "choice")
"""Values of a dataset's `answer_type` column: `"math"` (any expression math-verify can compare), `"number"` (a plain
numeric literal: `\\boxed{5+2}` is not `7`) and `"choice"` (a multiple-choice letter A-J)."""


# ---------------------------------------------------------------------------------------------------------------------
# Boxed answers
# ---------------------------------------------------------------------------------------------------------------------

_BRACED_BOX_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BOX_COMMAND_RE = re.compile(r"\\(?:boxed|fbox)\b")
_BRACELESS_TOKEN_RE = re.compile(r"[^\s$]+")


def braced_group_end(text: str, open_index: int) -> int | None:
    """Index just after the `}` that closes the `{...}` group opening at `open_index`, or `None` if it is never
    closed (the scanning rule of [`braced_group`]).

    Example:
        ```python
        >>> braced_group_end(r"x{a{b}}y", 1)
        7
        >>> braced_group_end("{never closed", 0) is None
        True

        ```
    """
    depth = 0
    index = open_index
    length = len(text)
    while index < length:
        char = text[index]
        if char == "\\":
            index += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
        index += 1
    return None


def braced_group(text: str, open_index: int) -> str | None:
    """Content of the `{...}` group opening at `open_index`, or `None` if it is never closed.

    A backslash escapes the character after it, so `\\{` and `\\}` are not group braces, and neither is the brace
    after a LaTeX line break `\\\\` (the old dataset parser, which only looked at the character before a brace, read
    `\\\\}` as an escaped brace).

    Example:
        ```python
        >>> braced_group(r"{a{b}\\}c}d", 0)
        'a{b}\\\\}c'
        >>> braced_group(r"{1 \\\\}", 0)
        '1 \\\\\\\\'
        >>> braced_group("{never closed", 0) is None
        True

        ```
    """
    end = braced_group_end(text, open_index)
    return None if end is None else text[open_index + 1 : end - 1]


def contains_box(text: str) -> bool:
    """Whether `text` holds a braced `\\boxed{` / `\\fbox{` (closed or not): the answer is then the last box or
    nothing (see `last_boxed`)."""
    return _BRACED_BOX_RE.search(text) is not None


def _last_braced_box(text: str) -> tuple[int, str | None, int] | None:
    """Where the last braced `\\boxed{` / `\\fbox{` opens its brace, its content (`None` if never closed), and where
    its command starts; `None` if there is no such box. The one place the grading rule finds the last box."""
    match = None
    for match in _BRACED_BOX_RE.finditer(text):  # noqa: B007 - we want the last one
        pass
    if match is None:
        return None
    return match.end() - 1, braced_group(text, match.end() - 1), match.start()


def last_boxed(text: str | None, *, lenient: bool = False) -> str | None:
    """Content of the last `\\boxed{...}` (or `\\fbox{...}`) of `text`, braces matched, stripped; `None` if none.

    The grading rule (`lenient=False`, used by the rewards and by `codapo-eval` for predictions and golds):

    - **Only the last box counts, and an empty or unclosed last box is no answer** (`None`); the grader never falls
      back to an earlier box. `\\boxed{19}\\boxed{}` withholds its answer, and a completion truncated inside
      `\\boxed{20` did not finish it: paying the earlier `19` would pay an answer the completion moved past (or a
      hedge). This is also what MATH's reference extraction does (an unbalanced last box gives nothing).
    - **A brace-less `\\boxed 5` is not a box.** It has no end: `\\boxed 19 or 20` would read as `19`, a hedge the
      braced `\\boxed{19 \\text{ or } 20}` cannot pass (and TeX boxes only the first token, `1`).

    `lenient=True` is the dataset loaders' rule for trusted reference solutions, kept as it was because
    `tests/test_data.py` pins it: a brace-less `\\boxed 5` gives `"5"` (the argument runs to the next space or `$`),
    and when the last box is unclosed the last closed box before it is used. An empty last box is `None` in both
    modes. (`/work/notes/issue13-vocab.md` proposes dropping the fallback for golds too: a broken reference
    solution should drop its row, not grade against an intermediate result.)

    Args:
        text (`str` or `None`): A completion or a reference solution.
        lenient (`bool`, *optional*, defaults to `False`): The dataset loaders' rule (see above).

    Example:
        ```python
        >>> last_boxed(r"So $x=\\boxed{2}$, hence $\\boxed{\\frac{1}{2}}$.")
        '\\\\frac{1}{2}'
        >>> last_boxed(r"\\boxed{19} \\boxed{20") is None, last_boxed(r"\\boxed{19} \\boxed{20", lenient=True)
        (True, '19')
        >>> last_boxed(r"\\boxed 19 or 20") is None, last_boxed(r"\\boxed 19 or 20", lenient=True)
        (True, '19')
        >>> last_boxed(r"\\boxed{19}\\boxed{}") is None, last_boxed(r"\\boxed{19}\\boxed{}", lenient=True) is None
        (True, True)

        ```
    """
    if not text:
        return None
    if not lenient:
        box = _last_braced_box(text)
        if box is None or box[1] is None:
            return None
        return box[1].strip() or None
    for match in reversed(list(_BOX_COMMAND_RE.finditer(text))):
        pos = match.end()
        while pos < len(text) and text[pos] == " ":
            pos += 1
        if pos < len(text) and text[pos] == "{":
            content = braced_group(text, pos)
            if content is None:
                continue  # unclosed: the dataset rule tries an earlier box
            return content.strip() or None
        if pos > match.end():  # "\boxed 5": the argument runs up to the next space, `$` or end of text
            token = _BRACELESS_TOKEN_RE.match(text, pos)
            if token:
                return token.group(0).rstrip(".") or None
    return None


def text_around_last_box(text: str | None) -> tuple[str, str] | None:
    """What a completion writes before and after its last closed `\\boxed{...}` / `\\fbox{...}`; `None` if it has no
    such box (see `text_after_last_box`).

    Example:
        ```python
        >>> text_around_last_box(r"So $-\\boxed{23}$.")
        ('So $-', '$.')

        ```
    """
    box = _last_braced_box(text) if text else None
    if box is None or box[1] is None:
        return None
    open_index, content, start = box
    return text[:start], text[open_index + len(content) + 2 :]  # type: ignore[index]


def text_after_last_box(text: str | None) -> str | None:
    """What a completion writes after its last closed `\\boxed{...}` / `\\fbox{...}`; `None` if it has no such box.

    The grader reads one value, the last box (see `last_boxed`): text after it cannot change that value, so it is not
    read, except a mark that continues the box's value (`codapo_trl.rewards.extraction.box_in_expression`,
    `\\boxed{2}^{10}`). Analyses use it to count answers stated after the box (`\\boxed{23} = 26. The answer is 26.`);
    an unclosed last box gives `None` like `last_boxed`.

    Example:
        ```python
        >>> text_after_last_box(r"1 + 1 = 2. \\boxed{2} = 3. The answer is 3.")
        ' = 3. The answer is 3.'
        >>> text_after_last_box(r"\\boxed{\\frac{1}{2}}")
        ''
        >>> text_after_last_box("The answer is 2.") is None, text_after_last_box(r"\\boxed{2} \\boxed{3") is None
        (True, True)

        ```
    """
    around = text_around_last_box(text)
    return None if around is None else around[1]


# ---------------------------------------------------------------------------------------------------------------------
# Gold-answer parsers of the data loaders
# ---------------------------------------------------------------------------------------------------------------------


def solution_last_boxed(text: str | None) -> str | None:
    """The gold answer of a reference solution: `last_boxed(text, lenient=True)` (the `"last_boxed"` answer parser,
    exported by `codapo_trl.data` as `last_boxed`).

    Example:
        ```python
        >>> solution_last_boxed("so \\\\boxed 5.")
        '5'

        ```
    """
    return last_boxed(text, lenient=True)


def gsm8k_final_answer(text: str | None) -> str | None:
    """The final answer of a GSM8K solution: the text after the last `####`, with thousands separators removed.

    A string without `####` is taken whole, so a column that already holds the bare number parses too.

    Example:

    ```python
    >>> gsm8k_final_answer("She pays 1,000 + 234 = <<1000+234=1234>>1,234.\\n#### 1,234")
    '1234'

    ```
    """
    if text is None:
        return None
    text = str(text)
    if "####" in text:
        text = text.rsplit("####", 1)[1]
    text = text.strip().replace(",", "")
    return text.removeprefix("$").rstrip(".").strip() or None


def plain_answer(value: Any) -> str | None:
    """A gold answer given as a value: stripped string; integral floats lose their `.0`; `None` stays `None`."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    text = str(value).strip()
    return text or None


def auto_answer(value: Any) -> str | None:
    """Parse an `answer`-like value whose style is unknown: GSM8K `#### n`, a `\\boxed{}` or a plain value."""
    if isinstance(value, str):
        if "####" in value:
            return gsm8k_final_answer(value)
        if _BOX_COMMAND_RE.search(value):
            return solution_last_boxed(value)
    return plain_answer(value)


ANSWER_PARSERS: dict[str, Callable[[Any], str | None]] = {
    "auto": auto_answer,
    "plain": plain_answer,
    "last_boxed": solution_last_boxed,
    "gsm8k": gsm8k_final_answer,
}
"""Named gold-answer parsers, selectable with `answer_parser=` in `codapo_trl.data.load_math_dataset`."""


# ---------------------------------------------------------------------------------------------------------------------
# Completion text
# ---------------------------------------------------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: [{"type": "text", "text": ...}, {"type": "image"}, ...]
        return "".join(
            part.get("text") or "" for part in content if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def completion_text(completion: Any) -> str:
    """The text a reward grades: a string as it is, or the content of the LAST assistant message of a conversational
    completion (TRL's `[{"role": "assistant", "content": ...}, ...]`; a message without a role counts as the
    assistant's).

    One rule for the maths and the code reward (the code reward used to join every assistant message, the maths
    reward took the last one): the final message is the answer. Joining would let an earlier draft (a code block
    or a box the model moved past) be graded when the final message has none, the same fallback `last_boxed`
    refuses. Messages of other roles (tool results, the user) are never graded, even when there is no assistant
    message (the maths reward used to fall back to them); content blocks other than `{"type": "text"}` (reasoning,
    images) are left out; `None` content is empty.

    Example:
        ```python
        >>> completion_text([{"role": "assistant", "content": "draft \\\\boxed{19}"},
        ...                  {"role": "assistant", "content": "final \\\\boxed{20}"}])
        'final \\\\boxed{20}'
        >>> completion_text([{"role": "tool", "content": "\\\\boxed{19}"}])
        ''

        ```
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        completion = [completion]
    if isinstance(completion, (list, tuple)):
        assistant = [m for m in completion if isinstance(m, dict) and m.get("role", "assistant") == "assistant"]
        return _content_text(assistant[-1].get("content")) if assistant else ""
    return str(completion)


def prompt_text(prompt: Any) -> str:
    """The question a prompt asks: a string as it is, or the text of every user message of a conversational prompt
    (TRL's `[{"role": "system", ...}, {"role": "user", "content": ...}]`), joined by blank lines; the system prompt
    and the assistant's turns (few-shot answers) are left out. The maths reward judges restatements against it.

    Example:
        ```python
        >>> prompt_text([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+3?"}])
        'What is 2+3?'

        ```
    """
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, dict):
        prompt = [prompt]
    if isinstance(prompt, (list, tuple)):
        return "\n\n".join(
            _content_text(m.get("content")) for m in prompt if isinstance(m, dict) and m.get("role") == "user"
        )
    return str(prompt)


# ---------------------------------------------------------------------------------------------------------------------
# Question ids
# ---------------------------------------------------------------------------------------------------------------------

QUESTION_ID_COLUMNS = (
    "id",
    "qid",
    "unique_id",
    "question_id",
    "problem_id",
    "task_id",
    "Record ID",
    "problem_idx",
    "name",
)
"""Dataset columns that name a question, in order of precedence: the first one a row holds (not `None`) is its id.

One order for the training question log, the analysis and `codapo-eval`, so that they name a row the same way when
it holds several of these columns (they used to use three orders). The order is the training question log's
(`codapo_question_log` files already on disk keep their ids), followed by the columns only evaluation knew
(GPQA's `Record ID`, MathArena's `problem_idx`, TACO's `name`)."""


def row_question_id(row: Mapping[str, Any]) -> str | None:
    """The id of a dataset row: the first `QUESTION_ID_COLUMNS` column it holds, as a string; `None` if none (callers
    then name the row by its index or a digest of its prompt).

    Example:
        ```python
        >>> row_question_id({"task_id": "HumanEval/0", "id": 7})
        '7'
        >>> row_question_id({"problem": "1+1?"}) is None
        True

        ```
    """
    for column in QUESTION_ID_COLUMNS:
        value = row.get(column)
        if value is not None:
            return str(value)
    return None
