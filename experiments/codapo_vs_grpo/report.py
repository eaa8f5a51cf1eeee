"""The report of the pre-registered CoDaPO-vs-GRPO campaign, from what `run.py` has finished.

    python experiments/codapo_vs_grpo/report.py          # writes results/report.md and its figures

Reads `results/runs/` (per run: evaluation summaries and samples, trainer state, question log) and writes
`results/report.md`, `results/summary.json` and the figures. The endpoints, test and decision rule are the ones fixed
in PREREGISTRATION.md; they are computed over the seeds for which every arm has finished. With fewer seeds than
pre-registered the intervals are printed as interim numbers and no verdict is given. The hand-written reading of
the numbers and of the completions (`results/discussion.md`) is appended unchanged.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import re
import statistics
from collections import Counter
from pathlib import Path

import run
import stats
from after_box import contradicted_after_box, stated_after_box

from codapo_trl.command_line import configure_logging


logger = logging.getLogger("codapo_vs_grpo.report")
HERE = Path(__file__).resolve().parent
PREREGISTERED_SEEDS = 6
SMALLEST_EFFECT = 5.0  # points of level-5 accuracy (PREREGISTRATION.md, "Decision rule")
HARD_LEVEL = "5"
TRAINED_LEVELS = ("3", "4", "5")
compare = run.load_compare()  # experiments/compare.py: the arms' labels, the summary reader, the bins
LABELS = compare.LABELS
READ_OUT_STEPS = (0, 8, 16, 24, 31, 32)


def accuracy(summary: dict) -> dict[str, float]:
    """Held-out accuracy in points per level, `"3-5"` (mean of the trained levels' accuracies) and `"all"`."""
    return with_trained_mean({key: 100 * value for key, value in compare.accuracy_by_level(summary).items()})


def with_trained_mean(points: dict[str, float]) -> dict[str, float]:
    """Per-level accuracies with `"3-5"` added: the mean of the trained levels' accuracies."""
    return {**points, "3-5": statistics.fmean(points[level] for level in TRAINED_LEVELS)}


def budget_at(log_history: list[dict], step: int) -> dict[str, float]:
    """What a run had spent by update `step`: generated tokens, wall seconds (sum of `step_time`) and distinct
    questions (TRL's `budget/unique_prompts` as logged by the dynamics mixin)."""
    updates = [h for h in log_history if "reward" in h and h["step"] <= step]
    if step == 0 or not updates:
        return {"tokens": 0.0, "seconds": 0.0, "questions": 0.0}
    return {
        "tokens": updates[-1]["budget/generated_tokens"],
        "seconds": sum(h.get("step_time", 0.0) for h in updates),
        "questions": updates[-1]["budget/unique_prompts"],
    }


def discovery_rate(rows: list[dict], level: int, first_sight_only: bool = True) -> tuple[int, int]:
    """Groups of `level` with at least one correct completion, and all such groups, from a question log.

    With `first_sight_only`, only groups generated for a fresh batch B (phase 0) count: CoDaPO's S repeats questions
    it already saw, which would inflate its rate against GRPO's.

    Example:
        >>> discovery_rate([{"level": 5, "phase": 0, "num_correct": 0}, {"level": 5, "phase": 0, "num_correct": 2},
        ...                 {"level": 5, "phase": 1, "num_correct": 3}, {"level": 4, "phase": 0, "num_correct": 1}], 5)
        (1, 2)
    """
    groups = [r for r in rows if r["level"] == level and (r["phase"] == 0 or not first_sight_only)]
    return sum(r["num_correct"] > 0 for r in groups), len(groups)


def pass_rate(rows: list[dict], level: int) -> tuple[int, int]:
    """Correct completions and all completions of `level` in the fresh-batch groups (phase 0) of a question log.

    Example:
        >>> pass_rate([{"level": 6, "phase": 0, "num_correct": 1, "num_generations": 8},
        ...            {"level": 6, "phase": 1, "num_correct": 8, "num_generations": 8},
        ...            {"level": 5, "phase": 0, "num_correct": 8, "num_generations": 8}], 6)
        (1, 8)
    """
    groups = [r for r in rows if r["level"] == level and r["phase"] == 0]
    return sum(r["num_correct"] for r in groups), sum(r["num_generations"] for r in groups)


def pooled(arm_runs: list[dict], measure, level: int, first: int, last: int) -> tuple[int, int]:
    """`measure` (`discovery_rate` or `pass_rate`) over updates `first`..`last` of several runs' question logs,
    pooled: (hits, total)."""
    counts = [measure([q for q in r["questions"] if first <= q["step"] <= last], level) for r in arm_runs]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def percent(hits: int, total: int) -> str:
    return f"{100 * hits / total:.1f} % ({hits}/{total})" if total else "- (0/0)"


def s_picks_by_level(rows: list[dict]) -> Counter:
    """How many of the questions S picked came from each level (B rows flagged `selected`)."""
    return Counter(r["level"] for r in rows if r["phase"] == 0 and r.get("selected"))


def s_pick_outcomes(rows: list[dict]) -> Counter:
    """S's picks by how their B group fared: `none` (0 of G correct), `mixed`, `all` (G of G)."""

    def outcome(r: dict) -> str:
        return "none" if r["num_correct"] == 0 else "all" if r["num_correct"] == r["num_generations"] else "mixed"

    return Counter(outcome(r) for r in rows if r["phase"] == 0 and r.get("selected"))


def clip_fraction_on_s(log_history: list[dict]) -> float | None:
    """Mean fraction of clipped tokens (TRL's `clip_ratio/region_mean`) over the S updates (`codapo/phase` = 1)."""
    values = [
        h["clip_ratio/region_mean"]
        for h in log_history
        if h.get("codapo/phase") == 1.0 and "clip_ratio/region_mean" in h
    ]
    return statistics.fmean(values) if values else None


QUARTERS = ((1, 8), (9, 16), (17, 24), (25, 32))


def fresh_batch_reward(log_history: list[dict], first: int, last: int) -> float | None:
    """Mean training reward (TRL's `reward`, the mean of the rollouts' rewards) over the updates `first`..`last`
    that trained on a fresh batch B: every GRPO update, CoDaPO's B updates. S updates (`codapo/phase` = 1) score
    rollouts of questions chosen for their value, so they would not show how the policy does on new questions.

    Example:

        >>> log = [{"step": 1, "reward": 0.2}, {"step": 2, "reward": 0.9, "codapo/phase": 1.0},
        ...        {"step": 3, "reward": 0.4, "codapo/phase": 0.0}, {"step": 3, "train_runtime": 1.0}]
        >>> round(fresh_batch_reward(log, 1, 4), 6), fresh_batch_reward(log, 5, 8)
        (0.3, None)
    """
    values = [
        h["reward"]
        for h in log_history
        if "reward" in h and first <= h["step"] <= last and h.get("codapo/phase") != 1.0
    ]
    return statistics.fmean(values) if values else None


def decide(primary_t, primary_bootstrap, secondary_t, smallest_effect: float = SMALLEST_EFFECT) -> str:
    """PREREGISTRATION.md's decision rule: `confirm` needs the primary t interval above 0 and the key secondary's
    lower end above `-smallest_effect`; `refute` needs the primary interval below `+smallest_effect`; the t and
    bootstrap intervals must agree; anything else is `inconclusive`.

    Example:
        >>> from stats import PairedInterval as I
        >>> decide(I(6, 2, 10, 6, 4, "paired-t", .95), I(6, 3, 9, 6, 4, "paired-bootstrap", .95),
        ...        I(1, -7, 9, 6, 9, "paired-t", .95))
        'inconclusive'
    """
    by_t = stats.verdict(primary_t, smallest_effect)
    if by_t == "confirm" and secondary_t.low <= -smallest_effect:
        by_t = "inconclusive"
    if by_t != stats.verdict(primary_bootstrap, smallest_effect):
        return "inconclusive"
    return by_t


def load_runs(runs_dir: Path) -> tuple[dict, dict[tuple[str, int], dict]]:
    """The warm start's read-outs and every finished run's read-outs, log history and question log."""
    warm = {  # round 1: avg4 and greedy; round 2: greedy (and pass8 from amendment 2)
        path.parent.name: json.loads(path.read_text()) for path in sorted(runs_dir.glob("warm_start/*/summary.json"))
    }
    runs = {}
    for path in sorted(runs_dir.iterdir()):
        match = re.fullmatch(r"(.+)-seed(\d+)", path.name)
        if not match or not (path / "done.json").exists():
            continue
        state = json.loads((path / "trainer_state.json").read_text())
        runs[match[1], int(match[2])] = {
            "evals": {p.name: json.loads((p / "summary.json").read_text()) for p in sorted(path.glob("eval/*"))},
            "log": state["log_history"],
            "questions": [json.loads(line) for line in (path / "questions.jsonl").read_text().splitlines()],
            "path": path,
        }
    return warm, runs


def complete_seeds(runs: dict, arms: tuple[str, ...] = run.ARM_NAMES) -> list[int]:
    """Seeds for which every arm in `arms` has finished (the pairs a comparison of those arms uses)."""
    seeds = {seed for _, seed in runs}
    return sorted(s for s in seeds if all((arm, s) in runs for arm in arms))


def read_out(runs: dict, warm: dict, arm: str, seed: int, step: int, kind: str) -> dict[str, float]:
    if step == 0:
        return accuracy(warm[kind])
    return accuracy(runs[arm, seed]["evals"][f"step{step}-{kind}"])


def compare_arms(runs, warm, treatment, control, seeds, step, kind, key) -> dict:
    """Per-seed differences `treatment - control` of one endpoint, with the t and bootstrap intervals (n >= 2)."""
    treated = [read_out(runs, warm, treatment, s, step, kind)[key] for s in seeds]
    controlled = [read_out(runs, warm, control, s, step, kind)[key] for s in seeds]
    return paired_comparison(treated, controlled)


def paired_comparison(treated: list[float], controlled: list[float]) -> dict:
    """Per-seed values of two arms, their differences and, from two seeds on, the t and bootstrap intervals."""
    diffs = stats.paired_differences(treated, controlled)
    out = {"treatment": treated, "control": controlled, "differences": diffs}
    if len(diffs) >= 2:
        out["t"] = stats.paired_t_interval(diffs)
        out["bootstrap"] = stats.paired_bootstrap_interval(diffs)
    return out


HEADLINES = {
    "refute": "No level-5 gain of 5 points or more in this regime",
    "confirm": "A level-5 gain in this regime",
    "inconclusive": "Neither a level-5 gain nor its absence is shown in this regime",
}
RULE_MEANING = {
    "refute": "the whole 95 % paired t interval lies below +5 points, the smallest effect of interest",
    "confirm": "the whole 95 % paired t interval lies above 0 and levels 3-5 lose less than 5 points",
    "inconclusive": "the interval holds both 0 and +5 points, or the t and bootstrap intervals disagree",
}


def verdict_sentence(verdict: str | None, seeds: list[int], primary: dict | None) -> str:
    """The report's answer: what the comparison shows in its regime (a quickly learnable hard level, |B| = 8, K = 2),
    the pre-registered rule's label next to what it means, the exact sign-flip check of "the effect is 5 or more",
    and what is not tested; or why there is no verdict yet."""
    if primary is None:
        return "**No verdict**: no seed has both GRPO and CoDaPO finished."
    if verdict is None:
        return (
            f"**No verdict yet**: {len(seeds)} of the {PREREGISTERED_SEEDS} pre-registered seeds have GRPO and CoDaPO "
            f"finished (the rule is applied at {PREREGISTERED_SEEDS}); interim level-5 difference, CoDaPO minus GRPO, "
            f"after update 32: {fmt_interval(primary)}."
        )
    differences = primary["differences"]
    p_at_least_5 = stats.sign_flip_p_value(differences, SMALLEST_EFFECT, "less")
    t = primary["t"]
    return (
        f"**{HEADLINES[verdict]}** (a quickly learnable hard level, |B| = 8, K = 2; {len(seeds)} paired seeds): "
        f"CoDaPO minus GRPO on held-out level-5 accuracy after 32 updates is {fmt_interval(primary)} points. "
        f"The pre-registered rule's label is **{verdict}**, which means only that {RULE_MEANING[verdict]}. "
        + ("GRPO is not shown better (the interval holds 0). " if t.low <= 0 <= t.high else "")
        + "The paper's claim (gains where discovery stays rare, on its models and benchmarks) is not tested here. "
        f'Exact sign-flip test of "the effect is {SMALLEST_EFFECT:.0f} points or more" over the {len(differences)} '
        f"paired seeds (not pre-registered; `stats.sign_flip_p_value`): one-sided p = {p_at_least_5:.3f} "
        f"({round(p_at_least_5 * 2 ** len(differences))} of {2 ** len(differences)} sign patterns), against the "
        "0.025 that the rule's two-sided 95 % interval implies for one side"
        + (
            ", so the label rests on the t interval's normality assumption with this few seeds."
            if verdict == "refute" and p_at_least_5 > 0.025
            else "."
        )
    )


def regime_facts(runs: dict, seeds: list[int]) -> list[str]:
    """What round 1's regime was, measured from its logs (issue 27): the hard level's pass rate on fresh rollouts
    at update 1 and 2 and GRPO's level-5 discovery, the distinct questions each arm saw, the loss confound and the
    uniform control against GRPO on levels 3-5."""
    grpo = [runs["grpo", s] for s in seeds if ("grpo", s) in runs]
    if not grpo:
        return []
    level = int(HARD_LEVEL)
    lines = [
        "## What this regime was, and what no arm isolates",
        "",
        "Measured from the GRPO runs' question logs (fresh-batch groups; pooled over seeds "
        f"{[s for s in seeds if ('grpo', s) in runs]}; the same measure on any log: `PYTHONPATH=experiments/codapo_vs_grpo python "
        "experiments/codapo_vs_grpo_r2/discovery.py --level 5 experiments/codapo_vs_grpo/results/runs/grpo-seed*/"
        "questions.jsonl`):",
        "",
        f"- level-5 pass rate on the rollouts of update 1 (the warm start): {percent(*pooled(grpo, pass_rate, level, 1, 1))}"
        f"; of update 2 (after one GRPO update): {percent(*pooled(grpo, pass_rate, level, 2, 2))};",
        "- level-5 groups with at least one success (discovery), updates 9-16: "
        f"{percent(*pooled(grpo, discovery_rate, level, 9, 16))}; updates 1-16: "
        f"{percent(*pooled(grpo, discovery_rate, level, 1, 16))}.",
        "",
        "So the skill came back within a few updates; it was not discovered. From about update 2 on, level 5 was the "
        "mid-difficulty band, so neither CoDaPO's weighting nor its top-K resampling had rare successes to amplify.",
        "",
    ]
    seen = {
        arm: [budget_at(runs[arm, s]["log"], 32)["questions"] for s in seeds if (arm, s) in runs]
        for arm in ("grpo", "codapo")
    }
    if all(seen.get(arm) for arm in ("grpo", "codapo")):
        lines += [
            f"|B| = 8 with K = 2: every S update is a full AdamW step driven by 2 questions; CoDaPO saw "
            f"{statistics.fmean(seen['codapo']):.0f} distinct questions on average in 32 updates, GRPO "
            f"{statistics.fmean(seen['grpo']):.0f} (the paper's budget rule, at an extreme batch size).",
            "",
        ]
    lines += [
        "**Loss confound.** The CoDaPO arms (CoDaPO, weighting only, uniform control) train with CoDaPO's "
        "per-question token-averaged loss (`loss_type: codapo`); GRPO trains with TRL's per-sequence loss "
        "(`loss_type: grpo`). No arm of round 1 isolates that difference, so any gap between GRPO and every CoDaPO "
        "arm may come from the loss rather than from weighting or resampling (round 2's `grpo_token_loss` arm "
        "isolates it: `experiments/codapo_vs_grpo_r2/PREREGISTRATION.md`).",
        "",
    ]
    pair = complete_seeds(runs, ("codapo_uniform", "grpo"))
    if len(pair) >= 2:
        uniform = compare_arms(runs, None, "codapo_uniform", "grpo", pair, 32, "avg4", "3-5")
        lines += [
            "**The tightest signal** of the campaign is the uniform control (a second update on K random questions "
            f"of B, constant weights) against GRPO on levels 3-5 after update 32 (avg@4): {fmt_interval(uniform)}. "
            "Its t interval holds 0; it points to repetition (fewer distinct questions for the same updates) as "
            "the likelier cost than value guidance.",
            "",
        ]
    return lines


def fmt_interval(result: dict) -> str:
    if "t" not in result:
        return f"{result['differences'][0]:+.1f} (one seed: no interval)"
    t, boot = result["t"], result["bootstrap"]
    return (
        f"{t.mean:+.1f} [{t.low:+.1f}, {t.high:+.1f}], p = {t.p_value:.2f}; bootstrap [{boot.low:+.1f}, "
        f"{boot.high:+.1f}]; SD {t.sd:.1f}"
    )


def sample_examples(path: Path, level: int, correct: bool, limit: int) -> list[str]:
    """Up to `limit` completions of one read-out for a level, correct or not, one per question, in held-out order
    (the report quotes them)."""
    out = []
    with gzip.open(path, "rt") as f:
        for question in map(json.loads, f):
            if question["level"] != level or len(out) >= limit:
                continue
            sample = next((s for s in question["samples"] if s["correct"] == correct), None)
            if sample is not None:
                completion = sample["completion"].replace("\n", " ").strip()
                out.append(f"{question['question']} (gold {question['gold']}) -> {completion}")
    return out


def answers_after_box(path: Path) -> dict[int, Counter]:
    """Per level of one read-out's samples file: `samples`, `correct` (as the campaign graded them: the last box
    alone), `stated` (samples that state an answer after their last box, `stated_after_box`: `\\boxed{23} = 26. The
    answer is 26.`) and `contradicted` (correct ones whose statement after the box is a different answer: the rule
    the grader applied from issue 25 to issue 32, `after_box.contradicted_after_box`)."""
    counts: dict[int, Counter] = {}
    to_grade: list[tuple[int, str, str, str | None]] = []
    with gzip.open(path, "rt") as f:
        for question in map(json.loads, f):
            level = counts.setdefault(question["level"], Counter())
            for sample in question["samples"]:
                level["samples"] += 1
                level["correct"] += bool(sample["correct"])
                if not stated_after_box(sample["completion"]):
                    continue
                level["stated"] += 1
                if sample["correct"]:
                    to_grade.append(
                        (question["level"], sample["completion"], question["gold"], question.get("answer_type"))
                    )
    if to_grade:
        levels, completions, golds, types = zip(*to_grade)
        for level, contradicted in zip(levels, contradicted_after_box(list(completions), list(golds), list(types))):
            counts[level]["contradicted"] += contradicted
    return counts


def strict_accuracy(counts: dict[int, Counter]) -> dict[str, float]:
    """Accuracy in points per level and `"3-5"` when a correct box contradicted by a later stated answer counts
    as wrong (`answers_after_box`)."""
    return with_trained_mean(
        {str(lv): 100 * (c["correct"] - c["contradicted"]) / c["samples"] for lv, c in counts.items()}
    )


def write_report(warm: dict, runs: dict, results_dir: Path) -> tuple[str, dict]:
    """The report's markdown and its machine-readable summary (verdict, per-seed endpoints, curves)."""
    arms = [a for a in run.ARM_NAMES if any(arm == a for arm, _ in runs)]
    seeds = complete_seeds(runs)
    lines = [
        "# Does CoDaPO beat GRPO where discovery is rare? The pre-registered comparison (issue 14)",
        "",
        "## Question, regime, calibration",
        "",
        "Fixed before any run in `PREREGISTRATION.md` (amendments dated at its end). **Question**: on the embedded "
        "SmolLM2-135M-Instruct, warm-started so that it writes the answer format, trained with RL on arithmetic "
        "levels 3-5 whose hardest level it rarely solves, does CoDaPO (`before_update`, Algorithm 1) reach a higher "
        "held-out level-5 accuracy than GRPO after the same number of optimizer updates? **Regime**: warm start = "
        "16 SFT steps on level-1/2 `train` questions answered `a + b = s` then `\\boxed{s}`; reward "
        "`math_accuracy`; G = 8, |B| = 8 questions (64 rollouts) per update, K = 2, T = 1.0, 48 new tokens, lr 2e-5, "
        "no KL, 32 updates (CoDaPO: 16 B + 16 S); arms GRPO, CoDaPO, CoDaPO weighting only, uniform-resampling "
        "control; six paired seeds (same warm start, same question order per seed). **Calibration** of the warm "
        "start (train questions, T = 1.0, `results/calibration/calibration.md`): pass rate 21.9 / 11.9 / 0.3 % on "
        "levels 3 / 4 / 5, 98-100 % of completions boxed (base model: 0-1 %). **Evaluation**: 429 held-out test "
        "questions (14/12/23/180/200 on levels 1-5), avg@4 at T = 0.6 and greedy, after updates 31 and 32 (greedy "
        "also at 8, 16, 24). **Primary endpoint**: level-5 avg@4 after update 32, CoDaPO minus GRPO, paired t 95 % "
        "interval over seeds (bootstrap as a check); confirm / refute / inconclusive against a smallest effect of 5 "
        "points. Accuracies below are in points (% of samples correct).",
        "",
        f"Command: `python experiments/codapo_vs_grpo/run.py --seeds 0 1 2 3 4 5` then `python "
        f"experiments/codapo_vs_grpo/report.py`. Finished runs: {', '.join(f'{a}-seed{s}' for a, s in sorted(runs))}.",
        "",
    ]
    summary: dict = {"seeds": seeds, "runs": sorted(f"{a}-seed{s}" for a, s in runs), "verdict": None}
    paired = complete_seeds(runs, ("codapo", "grpo"))
    summary["primary_seeds"] = paired
    verdict_at = len(lines)
    primary = None
    if paired:
        seeds = paired
        primary = compare_arms(runs, warm, "codapo", "grpo", seeds, 32, "avg4", HARD_LEVEL)
        secondary = compare_arms(runs, warm, "codapo", "grpo", seeds, 32, "avg4", "3-5")
        lines += ["## Primary endpoint: level-5 accuracy after update 32, CoDaPO minus GRPO", ""]
        lines += ["| seed | GRPO | CoDaPO | difference |", "|---|---|---|---|"]
        for s, t, c, d in zip(seeds, primary["treatment"], primary["control"], primary["differences"]):
            lines.append(f"| {s} | {c:.1f} | {t:.1f} | {d:+.1f} |")
        lines += [
            "",
            f"Mean difference [95 % paired t interval]: {fmt_interval(primary)}.",
            "",
            f"Key secondary (mean of levels 3-5): {fmt_interval(secondary)}.",
            "",
        ]
        summary["primary"] = {k: v for k, v in primary.items() if k in ("treatment", "control", "differences")}
        if len(seeds) >= PREREGISTERED_SEEDS and "t" in primary:
            summary["verdict"] = decide(primary["t"], primary["bootstrap"], secondary["t"])
        if "t" in primary and primary["t"].sd > 0:
            needed = stats.required_seeds(SMALLEST_EFFECT, primary["t"].sd)
            lines += [
                "",
                f"Measured SD of the per-seed level-5 differences: {primary['t'].sd:.1f} points; seeds a "
                f"conclusive follow-up needs for a {SMALLEST_EFFECT:.0f}-point effect at 80 % power: {needed}.",
            ]
            summary["sd_primary"], summary["required_seeds"] = primary["t"].sd, needed
        lines += [
            "",
            "## Every arm against GRPO (and CoDaPO against the uniform control)",
            "",
            "| comparison | read-out | level 5 | levels 3-5 |",
            "|---|---|---|---|",
        ]
        pairs = [(a, "grpo") for a in arms if a != "grpo"] + [("codapo", "codapo_uniform")]
        for treatment, control in pairs:
            pair_seeds = complete_seeds(runs, (treatment, control))
            if not pair_seeds:
                continue
            for step, kind in ((32, "avg4"), (31, "avg4"), (32, "greedy"), (31, "greedy")):
                cells = [
                    fmt_interval(compare_arms(runs, warm, treatment, control, pair_seeds, step, kind, key))
                    for key in (HARD_LEVEL, "3-5")
                ]
                lines.append(
                    f"| {LABELS[treatment]} - {LABELS[control]} | update {step}, {kind} (seeds {pair_seeds}) | "
                    + " | ".join(cells)
                    + " |"
                )
    lines[verdict_at:verdict_at] = [
        "## What round 1 shows",
        "",
        verdict_sentence(summary.get("verdict"), paired, primary),
        "",
        *(regime_facts(runs, paired) if summary.get("verdict") else []),
    ]
    if summary.get("verdict"):
        summary["sign_flip_p_effect_at_least_5"] = stats.sign_flip_p_value(
            primary["differences"], SMALLEST_EFFECT, "less"
        )
    levels = ["1", "2", "3", "4", "5", "3-5"]
    lines += [
        "",
        "## Held-out accuracy per arm (mean over finished runs, range)",
        "",
        "| model | read-out | " + " | ".join(f"level {lv}" for lv in levels) + " |",
        "|---|---|" + "---|" * len(levels),
    ]
    for kind in ("avg4", "greedy"):
        lines.append(
            f"| warm start | {kind} | " + " | ".join(f"{accuracy(warm[kind])[lv]:.1f}" for lv in levels) + " |"
        )
    for arm in arms:
        arm_seeds = sorted(s for a, s in runs if a == arm)
        for step, kind in ((32, "avg4"), (31, "avg4"), (32, "greedy")):
            values = [[read_out(runs, warm, arm, s, step, kind)[lv] for s in arm_seeds] for lv in levels]
            cells = [
                f"{statistics.fmean(v):.1f}" + (f" ({min(v):.1f}-{max(v):.1f})" if len(v) > 1 else "") for v in values
            ]
            lines.append(f"| {LABELS[arm]} (seeds {arm_seeds}) | update {step}, {kind} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Per seed: every arm after update 32 (avg@4)",
        "",
        "Levels 1-2 are never trained (what a run forgot); level 5 is the primary endpoint's level.",
        "",
        "| seed | model | " + " | ".join(f"level {lv}" for lv in levels) + " |",
        "|---|---|" + "---|" * len(levels),
    ]
    summary["per_seed"] = {}
    for seed in sorted({s for _, s in runs}):
        for arm in (a for a in arms if (a, seed) in runs):
            values = read_out(runs, warm, arm, seed, 32, "avg4")
            summary["per_seed"].setdefault(arm, {})[str(seed)] = {lv: values[lv] for lv in levels}
            lines.append(f"| {seed} | {LABELS[arm]} | " + " | ".join(f"{values[lv]:.1f}" for lv in levels) + " |")
    lines += [
        "",
        "## Budget axes: greedy accuracy against updates, tokens, wall time and distinct questions",
        "",
        "Mean over finished runs; level 5 / levels 3-5 (greedy, points), then what the run had spent by that "
        "update: generated completion tokens, wall seconds of training (sum of `step_time`; the machine was "
        "also used for development during some runs, so compare it within a sitting only) and distinct "
        "questions drawn.",
        "",
        "| arm | update | level 5 | levels 3-5 | tokens | wall s | distinct questions |",
        "|---|---|---|---|---|---|---|",
    ]
    curves = {}
    for arm in arms:
        arm_seeds = sorted(s for a, s in runs if a == arm)
        curves[arm] = []
        for step in READ_OUT_STEPS:
            acc = [read_out(runs, warm, arm, s, step, "greedy") for s in arm_seeds]
            spent = [budget_at(runs[arm, s]["log"], step) for s in arm_seeds]
            point = {
                "step": step,
                **{k: statistics.fmean(a[k] for a in acc) for k in (HARD_LEVEL, "3-5")},
                **{k: statistics.fmean(b[k] for b in spent) for k in ("tokens", "seconds", "questions")},
            }
            curves[arm].append(point)
            lines.append(
                f"| {LABELS[arm]} | {step} | {point[HARD_LEVEL]:.1f} | {point['3-5']:.1f} | "
                f"{point['tokens']:.0f} | {point['seconds']:.0f} | {point['questions']:.0f} |"
            )
    summary["curves"] = curves
    lines += [
        "",
        "## Where the compute went",
        "",
        "Share (%) of trained rollouts and of absolute token-update weight per difficulty bin of their question "
        "(d = error rate of its group: bin1 [0, 0.2) nearly solved ... bin5 [0.8, 1] nearly never solved), "
        "summed over all updates and finished runs. Discovery: level-5 groups of a fresh batch B with at least "
        "one correct completion (first half / second half of the run). S's picks: the questions S resampled, "
        "by level and by how their B group fared (none / mixed / all of 8 correct). Clip: mean clipped-token "
        "fraction on S updates.",
        "",
    ]
    bin_labels = list(compare.BIN_LABELS)
    lines += [
        "| arm | "
        + " | ".join(f"{b} rollouts" for b in bin_labels)
        + " | "
        + " | ".join(f"{b} weight" for b in bin_labels)
        + " | L5 discovery | S picks L3/L4/L5 | "
        "S picks none/mixed/all | clip on S |",
        "|---|" + "---|" * (2 * len(bin_labels) + 4),
    ]
    for arm in arms:
        arm_runs = [runs[a, s] for a, s in runs if a == arm]
        bins = [compare.compute_by_bin([h for h in r["log"] if "reward" in h]) for r in arm_runs]
        counts = [sum(b[label]["count"] for b in bins) for label in bin_labels]
        weights = [sum(b[label]["weight"] for b in bins) for label in bin_labels]
        halves = []
        for half in (lambda step: step <= 16, lambda step: step > 16):
            found = [discovery_rate([q for q in r["questions"] if half(q["step"])], 5) for r in arm_runs]
            hit, total = sum(f[0] for f in found), sum(f[1] for f in found)
            halves.append(f"{hit}/{total}")
        picks = sum((s_picks_by_level(r["questions"]) for r in arm_runs), Counter())
        outcomes = sum((s_pick_outcomes(r["questions"]) for r in arm_runs), Counter())
        clips = [c for c in (clip_fraction_on_s(r["log"]) for r in arm_runs) if c is not None]
        lines.append(
            f"| {LABELS[arm]} | "
            + " | ".join(f"{100 * c / max(sum(counts), 1e-9):.0f}" for c in counts)
            + " | "
            + " | ".join(f"{100 * w / max(sum(weights), 1e-9):.0f}" for w in weights)
            + f" | {' / '.join(halves)} | "
            + ("/".join(str(picks[lv]) for lv in (3, 4, 5)) if picks else "-")
            + " | "
            + ("/".join(str(outcomes[o]) for o in ("none", "mixed", "all")) if outcomes else "-")
            + " | "
            + (f"{100 * statistics.fmean(clips):.2f} %" if clips else "-")
            + " |"
        )
    lines += [
        "",
        "## Training reward on fresh batches",
        "",
        "Mean training reward (fraction of rollouts graded correct) of the updates that trained on a fresh batch B "
        "(every GRPO update; CoDaPO's B updates, not its S updates), per quarter of the run; mean over finished "
        "runs (range). Arms are compared at equal updates, not on equal questions: an arm with S updates meets a "
        "new batch every second update, so its quarter holds other questions than GRPO's (seed 1's last quarter: "
        "see the reading), and a change here is the policy and the questions together.",
        "",
        "| arm | " + " | ".join(f"updates {a}-{b}" for a, b in QUARTERS) + " |",
        "|---|" + "---|" * len(QUARTERS),
    ]
    for arm in arms:
        arm_runs = [runs[a, s] for a, s in sorted(runs) if a == arm]
        per_quarter = [
            [v for v in (fresh_batch_reward(r["log"], first, last) for r in arm_runs) if v is not None]
            for first, last in QUARTERS
        ]
        summary.setdefault("fresh_batch_reward", {})[arm] = [statistics.fmean(v) if v else None for v in per_quarter]
        cells = [
            "-" if not v else f"{statistics.fmean(v):.2f}" + (f" ({min(v):.2f}-{max(v):.2f})" if len(v) > 1 else "")
            for v in per_quarter
        ]
        lines.append(f"| {LABELS[arm]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## Completions behind the scores",
        "",
        "Level-5 completions after update 32 (avg@4 samples), first of the held-out order; every correct one "
        "in the run's samples file can be read the same way (`zcat results/runs/<run>/eval/step32-avg4/"
        "samples.jsonl.gz`).",
        "",
    ]
    for arm, seed in sorted(runs):
        path = runs[arm, seed]["path"] / "eval" / "step32-avg4" / "samples.jsonl.gz"
        right, wrong = sample_examples(path, 5, True, 2), sample_examples(path, 5, False, 1)
        lines += [
            f"- {arm}-seed{seed}: correct: "
            + ("; ".join(f"`{e}`" for e in right) or "none")
            + "; wrong: "
            + "; ".join(f"`{e}`" for e in wrong)
        ]
    lines += [
        "",
        "## A final answer stated after the box (sensitivity check, not pre-registered)",
        "",
        "The campaign's grader reads the last box and ignores what follows it (pinned: `CODAPO_GRADER_READ_AFTER_BOX=0`"
        " in `run.py`), so a completion such as `\\boxed{23} = 26. The answer is 26.` is paid as 23. Per run (avg@4 "
        "after update 32): samples that state an answer after their last box (a relation right after it or a "
        "final-answer phrase, `stated_after_box`), how many of those were graded correct although the grader's "
        "default rule (`read_after_box`, added after seed 3: a right box contradicted after it scores 0) refuses them "
        "(contradicted), and the accuracy under that rule (strict). Added after seed 3's GRPO run was read; the "
        "pre-registered endpoints above are unchanged.",
        "",
        "| run | stated after the box | contradicted | level 5 | level 5, strict | levels 3-5 | levels 3-5, strict |",
        "|---|---|---|---|---|---|---|",
    ]
    strict = {}
    for arm, seed in sorted(runs):
        counts = answers_after_box(runs[arm, seed]["path"] / "eval" / "step32-avg4" / "samples.jsonl.gz")
        strict[arm, seed] = strict_accuracy(counts)
        graded = read_out(runs, warm, arm, seed, 32, "avg4")
        stated = sum(c["stated"] for c in counts.values())
        contradicted = sum(c["contradicted"] for c in counts.values())
        total = sum(c["samples"] for c in counts.values())
        lines.append(
            f"| {arm}-seed{seed} | {stated} of {total} | {contradicted} | {graded[HARD_LEVEL]:.1f} | "
            f"{strict[arm, seed][HARD_LEVEL]:.1f} | {graded['3-5']:.1f} | {strict[arm, seed]['3-5']:.1f} |"
        )
    summary["strict"] = {f"{a}-seed{s}": v for (a, s), v in strict.items()}
    if len(paired) >= 2:
        strict_primary = paired_comparison(
            [strict["codapo", s][HARD_LEVEL] for s in paired], [strict["grpo", s][HARD_LEVEL] for s in paired]
        )
        lines += [
            "",
            f"Level 5, CoDaPO minus GRPO, strict (seeds {paired}): {fmt_interval(strict_primary)} (as graded: "
            f"{fmt_interval(primary)}).",
        ]
        summary["strict_primary_differences"] = strict_primary["differences"]
    lines += ["", "![accuracy against the budget axes](budget_axes.png)", ""]
    discussion = results_dir / "discussion.md"
    if discussion.exists():
        lines += [discussion.read_text().strip(), ""]
    return "\n".join(lines), summary


def plot(curves: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_keys = (
        ("step", "optimizer updates"),
        ("tokens", "generated tokens"),
        ("seconds", "wall seconds"),
        ("questions", "distinct questions"),
    )
    fig, axes = plt.subplots(2, 4, figsize=(18, 7.5))
    for row, (key, name) in enumerate(((HARD_LEVEL, "level 5"), ("3-5", "levels 3-5"))):
        for col, (x, xlabel) in enumerate(axes_keys):
            ax = axes[row][col]
            for arm, points in curves.items():
                ax.plot([p[x] for p in points], [p[key] for p in points], marker="o", label=LABELS[arm])
            ax.set_xlabel(xlabel)
            ax.set_ylabel(f"greedy accuracy, {name} (%)")
            ax.grid(alpha=0.3)
    axes[0][0].legend()
    fig.suptitle("Held-out greedy accuracy against the budget axes (mean over finished runs)")
    fig.tight_layout()
    fig.savefig(out / "budget_axes.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    options = parser.parse_args(argv)
    configure_logging()
    warm, runs = load_runs(options.results_dir / "runs")
    if not runs:
        parser.error(f"no finished run under {options.results_dir / 'runs'}: run run.py first")
    report, summary = write_report(warm, runs, options.results_dir)
    (options.results_dir / "summary.json").write_text(json.dumps(summary, indent=1, default=lambda o: o.__dict__))
    plot(summary["curves"], options.results_dir)
    (options.results_dir / "report.md").write_text(report + "\n")
    logger.info("Wrote %s", options.results_dir / "report.md")


if __name__ == "__main__":
    main()
