"""Round 3's analysis (issue 63; the design note's sections 3.4-3.5, registered in PREREGISTRATION.md): the macro
primary, its tests and label at the registered looks, the secondaries and the mechanism
tables, from the committed run folders.

    PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r3/analysis.py \\
        --cost-rule experiments/codapo_vs_grpo_r3/results/cost_rule.json [--time-out RECORD]

`N_P` and the ladder (the arms of seeds 0-7) are read from the cost rule's committed output, never from the command
line; a final cut short by time reads N (10 <= N < N_P) from a committed time-out record. The look is decided from
the finished runs' folder names before any result is read: the **interim** when the seeds complete in the primary
pair (`codapo`, `grpo`) are exactly 0..7 and N_P > 8, the **final** when they are exactly 0..N-1; in both, every
ladder arm must have seeds 0..7. At any other count it stops without reading a result, and a look whose output
exists is not run again.

What it computes (seed = unit; round 1's `stats.py`):
- **run endpoint**: the unweighted mean over levels 4, 5 and 7 of the held-out greedy accuracy (points), averaged
  over the read-outs after generation batches 8, 16, 24 and 32 (optimizer steps 8/16/24/32, or 64/128/192/256 for
  the 8-steps-per-batch arms; `arms.py`);
- **primary**: `codapo - grpo` per seed; the 95 % paired t interval, the one-sided t and exact sign-flip p-values of
  "effect <= 0" (gain), "effect >= 0" (worse) and "effect <= -3" (not worse by 3 or more), and the label: **gain**
  when both tests reject "effect <= 0"; else **worse** when both reject "effect >= 0"; else **not worse by 3 or
  more** when both reject "effect <= -3"; else **inconclusive**, with the seeds a conclusive follow-up would need
  at the observed SD. Each test at the look's nominal one-sided level (`stats.group_sequential_levels`, one
  interim at 8 seeds, O'Brien-Fleming-type spending of 0.025 per direction). When `2^-n` (the smallest exact
  sign-flip p) exceeds the look's level, the sign-flip test is replaced by "all n differences on the rejecting
  side of the null" (the design note's interim rule at N_P = 14);
- **stop**: the interim stops the campaign with `gain` or `worse`; otherwise its label is "continue" (no other label
  is registered there) and A0 and A2 go on to N_P;
- **secondaries** (intervals, no labels): the primary endpoint per level; the avg@4 (T = 0.6) macro after batch
  32; the in-pool fit (fresh-rollout pass rate over batches 25-32, from the question logs); distinct level-7 pool
  questions with a success in a fresh group by batch 16 and 32; every contrast among the ladder arms on seeds 0-7;
  `codapo_authors - grpo_authors_opt` on the seeds where the matched control ran;
- **mechanism**: S picks by level and by their B group's outcome, gradient norm and clip fraction on S, and the
  gradient mass (sum over mixed groups of w x sum |A_i|, w the logged value, 1 for GRPO, A with TRL's unbiased
  std + 1e-4) shared by level and by k-class (hard: k/G <= 1/4; mid; easy: k/G >= 3/4).

An arm the cost rule dropped after seed 0 (A3) is reported on seed 0, descriptively. Writes `analysis_<stage>.json`
and `.md` to `--output-dir` (default: the results folder).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import stats  # round 1's modules, by name (PYTHONPATH=experiments/codapo_vs_grpo)
from arms import ARMS, CONTROL, LADDER, PRIMARY, READ_OUT_BATCHES, SAMPLED_BATCHES
from outcome import publish
from report import clip_fraction_on_s, s_pick_outcomes, s_picks_by_level
from round2 import analysis as round_2

from codapo_trl.analysis import load_question_log


HERE = Path(__file__).resolve().parent
LEVELS = (4, 5, 7)
HARD_LEVEL = 7
ALPHA = 0.025  # one-sided, per direction
INTERIM_SEEDS = 8
MIN_TIME_OUT_SEEDS = 10  # a final cut short by time needs at least this many seeds (design 3.8)
CONTINUE = "continue (no stopping label at the interim)"
FINAL_SEEDS = (10, 11, 12, 13, 14)  # the cost rule's N_P is 14, 12 or 10; fewer only when time runs out (3.8)
MARGIN = 3.0  # points: "not worse by 3 or more"
FIT_BATCHES = (25, 32)  # in-pool fit window (generation batches)
QUESTION_LOGS = ("questions.jsonl.gz", "questions.jsonl")
ADVANTAGE_EPSILON = 1e-4  # TRL's std stabiliser


@dataclass(frozen=True)
class Endpoint:
    """A run endpoint: the mean over the read-outs after `batches` of the mean over `levels` of `metric` (points)
    in the `kind` read-outs."""

    name: str
    kind: str
    metric: str
    batches: tuple[int, ...]
    levels: tuple[int, ...]
    description: str


ENDPOINTS = {
    e.name: e
    for e in (
        Endpoint("macro", "greedy", "avg@n", READ_OUT_BATCHES, LEVELS, "macro L4/5/7 greedy, mean of batches 8-32"),
        *(
            Endpoint(f"L{lv}", "greedy", "avg@n", READ_OUT_BATCHES, (lv,), f"L{lv} greedy, mean of batches 8-32")
            for lv in LEVELS
        ),
        Endpoint("avg4_macro", "avg4", "avg@n", SAMPLED_BATCHES, LEVELS, "macro L4/5/7 avg@4 (T = 0.6), batch 32"),
    )
}


# ---------------------------------------------------------------------------------------------------------------------
# Run folders
# ---------------------------------------------------------------------------------------------------------------------


def question_log_path(run_dir: Path) -> Path:
    """A run folder's question log: `questions.jsonl.gz` (round 3), else `questions.jsonl`."""
    for name in QUESTION_LOGS:
        if (run_dir / name).exists():
            return run_dir / name
    raise FileNotFoundError(f"{run_dir} has no question log ({' or '.join(QUESTION_LOGS)}).")


def load_runs(runs_dir: Path) -> tuple[dict, dict[tuple[str, int], dict]]:
    """The warm start's read-outs and every finished run's (`done.json`) read-outs, log history and question log."""
    warm = {
        path.parent.name: json.loads(path.read_text()) for path in sorted(runs_dir.glob("warm_start/*/summary.json"))
    }
    runs = {}
    for path in sorted(runs_dir.iterdir()):
        match = re.fullmatch(r"(.+)-seed(\d+)", path.name)
        if not match or not (path / "done.json").exists():
            continue
        runs[match[1], int(match[2])] = {
            "evals": {p.name: json.loads((p / "summary.json").read_text()) for p in sorted(path.glob("eval/*"))},
            "log": json.loads((path / "trainer_state.json").read_text())["log_history"],
            "questions": load_question_log(question_log_path(path)),
            "path": path,
        }
    return warm, runs


def macro_points(summary: Mapping, levels: Sequence[int], metric: str = "avg@n", where: str = "a read-out") -> float:
    """The unweighted mean over `levels` of `metric` in a read-out's summary, in points (every level must be there).

    Example:
        >>> s = {"benchmarks": {"arithmetic": {"metrics": {"avg@n": 0.5}, "levels": {
        ...     "4": {"metrics": {"avg@n": 0.8}}, "5": {"metrics": {"avg@n": 0.5}}, "7": {"metrics": {"avg@n": 0.2}}}}}}
        >>> round(macro_points(s, (4, 5, 7)), 6)
        50.0
    """
    return statistics.fmean(round_2.level_points(summary, lv, metric, where) for lv in levels)


def endpoint_value(evals: Mapping[str, Mapping], arm: str, endpoint: Endpoint, where: str = "a run") -> float:
    """A run's endpoint from its read-outs (`evals`: `step<N>-<kind>` -> summary); every read-out must exist."""
    steps = [b * ARMS[arm].steps_per_batch for b in endpoint.batches]
    missing = [s for s in steps if f"step{s}-{endpoint.kind}" not in evals]
    if missing:
        raise ValueError(f"{where} lacks the {endpoint.kind} read-outs after steps {missing} ({endpoint.name}).")
    return statistics.fmean(
        macro_points(evals[f"step{s}-{endpoint.kind}"], endpoint.levels, endpoint.metric, f"{where}, step{s}")
        for s in steps
    )


# ---------------------------------------------------------------------------------------------------------------------
# Tests, labels and looks
# ---------------------------------------------------------------------------------------------------------------------


def one_sided(differences: Sequence[float], null: float, alternative: str, level: float) -> dict:
    """The t and the exact sign-flip test of `null` against `alternative` (`greater`/`less`) at `level`; when the
    sign-flip test cannot reach `level` with n differences (`2^-n >= level`), it is replaced by "every difference
    on the `alternative` side of `null`"."""
    d = list(differences)
    t_p = stats.one_sided_t_p_value(d, null, alternative)
    flip_p = stats.sign_flip_p_value(d, null, alternative)
    substitute = 2.0 ** -len(d) >= level
    side = all((x > null) if alternative == "greater" else (x < null) for x in d)
    rejects = t_p < level and (side if substitute else flip_p < level)
    return {"t_p": t_p, "flip_p": flip_p, "unanimous_sign": side, "sign_rule": substitute, "rejects": rejects}


def label(gain: bool, worse: bool, not_worse: bool) -> str:
    """The registered label from the three one-sided decisions, in precedence order.

    Example:
        >>> label(True, False, True), label(False, True, True), label(False, False, True), label(False, False, False)
        ('gain', 'worse', 'not worse by 3 or more', 'inconclusive')
    """
    if gain:
        return "gain"
    if worse:
        return "worse"
    if not_worse:
        return "not worse by 3 or more"
    return "inconclusive"


def follow_up_seeds(mean: float, sd: float) -> dict[str, int | None]:
    """Seeds a conclusive two-sided 5 % follow-up with 80 % power would need at the observed SD: for the observed
    effect and for the margin (`None` where it is undefined or over 10 000)."""

    def seeds(effect: float) -> int | None:
        try:
            return stats.required_seeds(effect, sd)
        except (ValueError, ArithmeticError):
            return None

    return {"observed_effect": seeds(abs(mean)) if mean else None, "margin": seeds(MARGIN)}


def decide_contrast(differences: Sequence[float], level: float) -> dict:
    """The registered tests of per-seed differences at a look's nominal one-sided `level`, and the label."""
    d = [float(x) for x in differences]
    t = stats.paired_t_interval(d)
    tests = {
        "gain": one_sided(d, 0.0, "greater", level),
        "worse": one_sided(d, 0.0, "less", level),
        "not_worse": one_sided(d, -MARGIN, "greater", level),
    }
    verdict = label(*(tests[k]["rejects"] for k in ("gain", "worse", "not_worse")))
    adjusted = stats.paired_t_interval(d, confidence=1.0 - 2.0 * level)
    out = {
        "n": len(d),
        "differences": d,
        "mean": t.mean,
        "sd": t.sd,
        "t95": [t.low, t.high],
        "t_two_sided_p": t.p_value,
        "nominal_level": level,
        "t_at_level": [adjusted.low, adjusted.high],
        "tests": tests,
        "label": verdict,
    }
    if verdict == "inconclusive":
        out["follow_up_seeds"] = follow_up_seeds(t.mean, t.sd)
    return out


def interval(differences: Sequence[float]) -> dict:
    """A secondary contrast: mean, SD and 95 % paired t interval (no test, no label)."""
    d = [float(x) for x in differences]
    if len(d) < 2:
        return {"n": len(d), "differences": d, "mean": d[0] if d else None, "sd": None, "t95": None}
    t = stats.paired_t_interval(d)
    return {"n": len(d), "differences": d, "mean": t.mean, "sd": t.sd, "t95": [t.low, t.high]}


def look(primary_seeds: Sequence[int], ladder_seeds: Sequence[int], final_seeds: int) -> tuple[str, float]:
    """Which registered look this is and its nominal one-sided level. `primary_seeds`: the seeds complete in the
    primary pair; `ladder_seeds`: the seeds complete in every ladder arm.

    Example:
        >>> stage, level = look(range(8), range(8), 14)
        >>> stage, round(level, 4), look(range(14), range(8), 14)[0]
        ('interim', 0.003, 'final')
    """
    if final_seeds not in FINAL_SEEDS:
        raise ValueError(f"The registered N_P lies in {FINAL_SEEDS}, got {final_seeds}.")
    primary = sorted(primary_seeds)
    if not set(range(INTERIM_SEEDS)) <= set(ladder_seeds):
        raise ValueError(f"Seeds 0-{INTERIM_SEEDS - 1} are not complete in every ladder arm: no result is read.")
    levels = stats.group_sequential_levels(INTERIM_SEEDS / final_seeds, ALPHA)
    if primary == list(range(final_seeds)):
        return "final", levels.final_level
    if primary == list(range(INTERIM_SEEDS)):
        return "interim", levels.interim_level
    raise ValueError(
        f"Seeds {primary} complete in the primary pair are not a registered look (seeds 0-{INTERIM_SEEDS - 1}, or "
        f"0-{final_seeds - 1} for the final analysis): no result is read."
    )


def boundaries_table(alpha: float = ALPHA) -> list[dict]:
    """The nominal one-sided levels of the interim (8 seeds) and final looks for every possible N_P."""
    return [{"final_seeds": n, **asdict(stats.group_sequential_levels(INTERIM_SEEDS / n, alpha))} for n in FINAL_SEEDS]


def complete_seeds(runs: Mapping, arms: Sequence[str]) -> list[int]:
    return sorted(s for s in {seed for _, seed in runs} if all((arm, s) in runs for arm in arms))


def arm_values(runs: Mapping, arm: str, seeds: Sequence[int], endpoint: Endpoint) -> list[float]:
    return [endpoint_value(runs[arm, s]["evals"], arm, endpoint, f"{arm}-seed{s}") for s in seeds]


def differences(runs: Mapping, treatment: str, control: str, seeds: Sequence[int], endpoint: Endpoint) -> list[float]:
    return stats.paired_differences(
        arm_values(runs, treatment, seeds, endpoint), arm_values(runs, control, seeds, endpoint)
    )


# ---------------------------------------------------------------------------------------------------------------------
# Question logs: in-pool fit, discovery, gradient mass
# ---------------------------------------------------------------------------------------------------------------------


def batches(rows: Sequence[dict]) -> list[tuple[int, list[dict]]]:
    """The log's generation batches in order, numbered from 1: consecutive rows with one (step, phase)."""
    out: list[tuple[int, list[dict]]] = []
    key = None
    for row in rows:
        if (row["step"], row["phase"]) != key:
            key = (row["step"], row["phase"])
            out.append((len(out) + 1, []))
        out[-1][1].append(row)
    return out


def fresh_rows(rows: Sequence[dict], first: int, last: int) -> list[dict]:
    """The fresh groups (phase 0: GRPO's batches, CoDaPO's B) of generation batches `first`..`last`."""
    return [r for number, group in batches(rows) if first <= number <= last for r in group if r["phase"] == 0]


def pool_fit(rows: Sequence[dict], first: int = FIT_BATCHES[0], last: int = FIT_BATCHES[1]) -> float:
    """In-pool fit: the fresh-rollout pass rate (points) over generation batches `first`..`last`.

    Example:
        >>> rows = [{"step": 1, "phase": 0, "num_correct": 2, "num_generations": 8},
        ...         {"step": 2, "phase": 1, "num_correct": 8, "num_generations": 8},
        ...         {"step": 3, "phase": 0, "num_correct": 6, "num_generations": 8}]
        >>> pool_fit(rows, 1, 3)  # (2 + 6) / 16, the S batch left out
        50.0
    """
    fresh = fresh_rows(rows, first, last)
    total = sum(r["num_generations"] for r in fresh)
    if not total:
        raise ValueError(f"No fresh groups in generation batches {first}-{last}.")
    return 100.0 * sum(r["num_correct"] for r in fresh) / total


def discovered(rows: Sequence[dict], last: int, level: int = HARD_LEVEL) -> int:
    """Distinct `level` questions with at least one success in a fresh group by generation batch `last`."""
    return len({r["question_id"] for r in fresh_rows(rows, 1, last) if r["level"] == level and r["num_correct"]})


def k_class(correct: int, generations: int) -> str:
    """`hard` (k/G <= 1/4), `mid` or `easy` (k/G >= 3/4) for a mixed group.

    Example:
        >>> [k_class(k, 8) for k in range(1, 8)]
        ['hard', 'hard', 'mid', 'mid', 'mid', 'easy', 'easy']
    """
    share = correct / generations
    return "hard" if share <= 0.25 else "easy" if share >= 0.75 else "mid"


def group_mass(correct: int, generations: int) -> float:
    """sum |A_i| over a group with binary rewards, TRL's advantages (r - mean) / (unbiased std + 1e-4).

    Example:
        >>> round(group_mass(4, 8), 4)  # 8 x 0.5 / (sqrt(8 / 7) / 2 + 1e-4)
        7.4819
    """
    mean = correct / generations
    std = math.sqrt(correct * (generations - correct) / (generations * (generations - 1)))
    deviations = correct * (1.0 - mean) + (generations - correct) * mean
    return deviations / (std + ADVANTAGE_EPSILON)


def mass_shares(logs: Sequence[Sequence[dict]]) -> dict[str, dict[str, float]]:
    """Shares of the gradient mass (w x sum |A_i| over mixed groups, w the logged value or 1) by level and by
    k-class, pooled over `logs`."""
    by_level: Counter = Counter()
    by_class: Counter = Counter()
    for rows in logs:
        for r in rows:
            k, g = r["num_correct"], r["num_generations"]
            if 0 < k < g:
                mass = (1.0 if r.get("value") is None else r["value"]) * group_mass(k, g)
                by_level[str(r["level"])] += mass
                by_class[k_class(k, g)] += mass
    total = sum(by_level.values())
    share = {"level": {}, "class": {}}
    if total:
        share["level"] = {k: v / total for k, v in sorted(by_level.items())}
        share["class"] = {k: by_class[k] / total for k in ("hard", "mid", "easy")}
    return share


def mechanism(runs: Mapping, arm: str, seeds: Sequence[int]) -> dict:
    """The mechanism row of an arm over `seeds`: S picks (pooled), gradient norm and clip on S (means of runs),
    gradient-mass shares (pooled)."""
    arm_runs = [runs[arm, s] for s in seeds if (arm, s) in runs]
    picks = sum((s_picks_by_level(r["questions"]) for r in arm_runs), Counter())
    outcomes = sum((s_pick_outcomes(r["questions"]) for r in arm_runs), Counter())

    def mean_of(values):
        values = [v for v in values if v is not None]
        return statistics.fmean(values) if values else None

    return {
        "runs": len(arm_runs),
        "s_picks_by_level": {str(lv): picks[lv] for lv in LEVELS},
        "s_picks_by_outcome": {o: outcomes[o] for o in ("none", "mixed", "all")},
        "grad_norm": mean_of([round_2.mean_logged(r["log"], "grad_norm") for r in arm_runs]),
        "clip_fraction_on_s": mean_of([clip_fraction_on_s(r["log"]) for r in arm_runs]),
        "mass_shares": mass_shares([r["questions"] for r in arm_runs]),
    }


# ---------------------------------------------------------------------------------------------------------------------
# The analysis
# ---------------------------------------------------------------------------------------------------------------------


def analyse(runs: Mapping, warm: Mapping, final_seeds: int, ladder: Sequence[str] = LADDER) -> dict:
    """Everything the registration asks for, as plain data (`runs`, `warm`: `load_runs`)."""
    if PRIMARY not in ladder or CONTROL not in ladder:
        raise ValueError(f"The ladder must hold {CONTROL} and {PRIMARY}, got {list(ladder)}.")
    unknown = [a for a in ladder if a not in ARMS]
    if unknown:
        raise ValueError(f"Unknown arms {unknown}; arms: {sorted(ARMS)}.")
    primary_seeds = complete_seeds(runs, (PRIMARY, CONTROL))
    ladder_seeds = complete_seeds(runs, ladder)
    stage, level = look(primary_seeds, ladder_seeds, final_seeds)
    first_eight = list(range(INTERIM_SEEDS))
    primary = decide_contrast(differences(runs, PRIMARY, CONTROL, primary_seeds, ENDPOINTS["macro"]), level)
    out: dict = {
        "stage": stage,
        "seeds": primary_seeds,
        "ladder": list(ladder),
        "final_seeds": final_seeds,
        "nominal_level": level,
        "boundaries": boundaries_table(),
        "primary_endpoint": asdict(ENDPOINTS["macro"]),
        "primary": primary,
        "primary_values": {
            arm: arm_values(runs, arm, primary_seeds, ENDPOINTS["macro"]) for arm in (CONTROL, PRIMARY)
        },
    }
    out["stop"] = stage == "final" or primary["label"] in ("gain", "worse")
    if not out["stop"]:  # the interim registers only its stopping labels: no other label is read there
        primary["label"] = CONTINUE
        primary.pop("follow_up_seeds", None)
    out["secondaries"] = {
        name: interval(differences(runs, PRIMARY, CONTROL, primary_seeds, ENDPOINTS[name]))
        for name in ("L4", "L5", "L7", "avg4_macro")
    }
    fit = {arm: {s: pool_fit(runs[arm, s]["questions"]) for s in first_eight} for arm in ladder}
    fit.update({arm: {s: pool_fit(runs[arm, s]["questions"]) for s in primary_seeds} for arm in (CONTROL, PRIMARY)})
    out["pool_fit"] = {
        "per_arm": {arm: statistics.fmean(v.values()) for arm, v in fit.items()},
        "codapo - grpo": interval([fit[PRIMARY][s] - fit[CONTROL][s] for s in primary_seeds]),
    }
    out["discovery_level7"] = {
        arm: {
            f"by batch {b}": statistics.fmean(discovered(runs[arm, s]["questions"], b) for s in first_eight)
            for b in (16, 32)
        }
        for arm in ladder
    }
    out["ladder_contrasts"] = {
        f"{a} - {b}": interval(differences(runs, a, b, first_eight, ENDPOINTS["macro"]))
        for i, a in enumerate(ladder)
        for b in ladder[:i]
    }
    matched = complete_seeds(runs, ("codapo_authors", "grpo_authors_opt"))
    if matched:
        out["authors_vs_matched_control"] = interval(
            differences(runs, "codapo_authors", "grpo_authors_opt", matched, ENDPOINTS["macro"])
        )
    out["per_arm"] = per_arm_table(runs, warm, {a: primary_seeds if a in (CONTROL, PRIMARY) else first_eight
                                                for a in (*ladder, *(["grpo_authors_opt"] if matched else []))})  # fmt: skip
    out["mechanism"] = {arm: mechanism(runs, arm, first_eight) for arm in ladder}
    dropped = [
        a for a in ARMS if a not in ladder and a != "grpo_authors_opt" and (a, 0) in runs and (CONTROL, 0) in runs
    ]
    out["dropped_arms_seed0"] = {  # an arm the cost rule dropped after seed 0, reported descriptively
        arm: {"macro": arm_values(runs, arm, [0], ENDPOINTS["macro"])[0],
              f"{arm} - {CONTROL}": differences(runs, arm, CONTROL, [0], ENDPOINTS["macro"])[0]}
        for arm in dropped
    }  # fmt: skip
    return out


def per_arm_table(runs: Mapping, warm: Mapping, seeds_of: Mapping[str, Sequence[int]]) -> list[dict]:
    """Mean held-out points per arm and read-out (each level and the macro); the warm start's read-outs first."""
    rows = []
    for kind, summary in sorted(warm.items()):
        rows.append({"arm": "warm start", "read_out": kind, **read_out_levels(summary, kind)})
    for arm, seeds in seeds_of.items():
        values = defaultdict(list)
        for s in seeds:
            if (arm, s) in runs:
                for name, summary in runs[arm, s]["evals"].items():
                    values[name].append(read_out_levels(summary, f"{arm}-seed{s} {name}"))
        for name in sorted(values, key=lambda n: (int(n.removeprefix("step").partition("-")[0]), n)):
            keys = values[name][0].keys()
            rows.append({"arm": arm, "read_out": name, "seeds": len(values[name]),
                         **{k: statistics.fmean(v[k] for v in values[name]) for k in keys}})  # fmt: skip
    return rows


def read_out_levels(summary: Mapping, where: str) -> dict[str, float]:
    """A read-out's levels 4, 5, 7 and their macro, in points."""
    out = {f"L{lv}": round_2.level_points(summary, lv, "avg@n", where) for lv in LEVELS}
    out["macro"] = statistics.fmean(out.values())
    return out


# ---------------------------------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------------------------------


def fmt_interval(c: Mapping) -> str:
    if c.get("t95") is None:
        return "-" if c.get("mean") is None else f"{c['mean']:+.2f} (n = {c['n']})"
    return f"{c['mean']:+.2f} [{c['t95'][0]:+.2f}, {c['t95'][1]:+.2f}] (n = {c['n']}, SD {c['sd']:.2f})"


def fmt_primary(c: Mapping) -> str:
    parts = []
    for name, t in c["tests"].items():
        rule = f" (sign rule: all on one side {t['unanimous_sign']})" if t["sign_rule"] else ""
        parts.append(f"{name}: t {t['t_p']:.4f}, sign-flip {t['flip_p']:.4f}{rule}")
    tests = "; ".join(parts)
    text = (
        f"{c['mean']:+.2f} [{c['t95'][0]:+.2f}, {c['t95'][1]:+.2f}] (95 % t; at the look's level "
        f"[{c['t_at_level'][0]:+.2f}, {c['t_at_level'][1]:+.2f}]), SD {c['sd']:.2f}; one-sided p: {tests}; "
        f"label: **{c['label']}**"
    )
    if "follow_up_seeds" in c:
        f = c["follow_up_seeds"]
        text += f" (a conclusive follow-up would need {f['observed_effect']} seeds for the observed effect, "
        text += f"{f['margin']} for {MARGIN:g} points, at this SD)"
    return text


def to_markdown(result: Mapping) -> str:
    """The analysis as markdown: the look, the label, the tests, and the tables."""
    p = result["primary"]
    lines = [
        f"# Round 3 analysis: {result['stage']} look, seeds {result['seeds'][0]}-{result['seeds'][-1]} of N_P = "
        f"{result['final_seeds']}",
        "",
        f"Primary endpoint: {result['primary_endpoint']['description']} (points). Nominal one-sided level at this "
        f"look: {result['nominal_level']:.4f} per direction (the t and the sign-flip test must both pass it).",
        "",
        f"- **CoDaPO - GRPO (primary)**: {fmt_primary(p)}",
        f"- The campaign {'stops here' if result['stop'] else 'goes on to the final analysis (A0 and A2)'}.",
        "",
        "| seed | GRPO | CoDaPO | difference |",
        "|---|---|---|---|",
    ]
    values = result["primary_values"]
    for seed, g, c, d in zip(result["seeds"], values[CONTROL], values[PRIMARY], p["differences"]):
        lines.append(f"| {seed} | {g:.2f} | {c:.2f} | {d:+.2f} |")
    lines += ["", "## Secondaries (intervals, no labels)", "", "| contrast | endpoint | result |", "|---|---|---|"]
    for name, c in result["secondaries"].items():
        lines.append(f"| codapo - grpo | {ENDPOINTS[name].description} | {fmt_interval(c)} |")
    lines.append(f"| codapo - grpo | in-pool fit, fresh pass rate, batches 25-32 | {fmt_interval(result['pool_fit']['codapo - grpo'])} |")  # fmt: skip
    for pair, c in result["ladder_contrasts"].items():
        lines.append(f"| {pair} | macro, seeds 0-7 | {fmt_interval(c)} |")
    if "authors_vs_matched_control" in result:
        lines.append(f"| codapo_authors - grpo_authors_opt | macro | {fmt_interval(result['authors_vs_matched_control'])} |")  # fmt: skip
    lines += ["", "## Held-out points per arm (mean over seeds)", "", "| arm | read-out | seeds | L4 | L5 | L7 | macro |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for row in result["per_arm"]:
        lines.append(f"| {row['arm']} | {row['read_out']} | {row.get('seeds', '-')} | {row['L4']:.2f} | "
                     f"{row['L5']:.2f} | {row['L7']:.2f} | {row['macro']:.2f} |")  # fmt: skip
    lines += ["", "## Pool: fit and level-7 discovery (seeds 0-7; fit of the pair over all its seeds)", "",
              "| arm | fit (batches 25-32) | L7 discovered by batch 16 | by batch 32 |", "|---|---|---|---|"]  # fmt: skip
    for arm, d in result["discovery_level7"].items():
        lines.append(f"| {arm} | {result['pool_fit']['per_arm'][arm]:.2f} | {d['by batch 16']:.2f} | {d['by batch 32']:.2f} |")  # fmt: skip
    lines += ["", "## Mechanism (seeds 0-7)", "",
              "| arm | S picks L4/L5/L7 | S picks none/mixed/all | grad norm | clip on S | mass L4/L5/L7 | mass hard/mid/easy |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for arm, m in result["mechanism"].items():
        by_level, by_class = m["mass_shares"]["level"], m["mass_shares"]["class"]
        level_mass = "/".join(f"{100 * by_level.get(str(lv), 0):.1f}" for lv in LEVELS) if by_level else "-"
        class_mass = "/".join(f"{100 * v:.1f}" for v in by_class.values()) if by_class else "-"
        picks = "/".join(str(v) for v in m["s_picks_by_level"].values())
        outcomes = "/".join(str(v) for v in m["s_picks_by_outcome"].values())
        lines.append(
            f"| {arm} | {picks} | {outcomes} | {_num(m['grad_norm'], '.3f')} | "
            f"{_num(m['clip_fraction_on_s'], '.4f')} | {level_mass} | {class_mass} |"
        )
    for arm, d in result.get("dropped_arms_seed0", {}).items():
        lines += ["", f"Dropped by the cost rule, seed 0 only (descriptive): {arm} macro {d['macro']:.2f}, "
                  f"{arm} - {CONTROL} {d[f'{arm} - {CONTROL}']:+.2f}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def finished_seeds(runs_dir: Path) -> dict[str, list[int]]:
    """The seeds of each arm with a finished run (`done.json`), read from the folder names alone: no result."""
    seeds = defaultdict(list)
    for path in sorted(runs_dir.glob("*-seed*/done.json")):
        match = re.fullmatch(r"(.+)-seed(\d+)", path.parent.name)
        if match:
            seeds[match[1]].append(int(match[2]))
    return {arm: sorted(v) for arm, v in seeds.items()}


def registered_look(cost_rule: Mapping, time_out: Mapping | None) -> tuple[int, tuple[str, ...]]:
    """N for the look's spending and the ladder, from the committed cost rule and, where time ran out before N_P, the
    committed time-out record (`{"reached": N, "reason": ...}`, 10 <= N < N_P).

    Example:
        >>> registered_look({"start": True, "final_seeds": 12, "ladder": ["grpo", "codapo"]}, None)
        (12, ('grpo', 'codapo'))
        >>> registered_look({"start": True, "final_seeds": 12, "ladder": ["grpo", "codapo"]}, {"reached": 10})[0]
        10
    """
    if not cost_rule.get("start"):
        raise ValueError("The cost rule did not start the campaign: there is no look to analyse.")
    final_seeds, ladder = int(cost_rule["final_seeds"]), tuple(cost_rule["ladder"])
    if time_out is not None:
        reached = int(time_out["reached"])
        if not MIN_TIME_OUT_SEEDS <= reached < final_seeds:
            raise ValueError(f"A time-out final needs {MIN_TIME_OUT_SEEDS} <= N < N_P = {final_seeds}, got {reached}.")
        final_seeds = reached
    return final_seeds, ladder


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results-dir", type=Path, default=HERE / "results")
    parser.add_argument("--cost-rule", type=Path, required=True, help="cost_rule.py's committed output: N_P, ladder")
    parser.add_argument("--time-out", type=Path, default=None, help="committed time-out record (final at N < N_P)")
    parser.add_argument("--output-dir", type=Path, default=None, help="default: --results-dir")
    options = parser.parse_args(argv)
    time_out = None if options.time_out is None else json.loads(options.time_out.read_text())
    try:
        final_seeds, ladder = registered_look(json.loads(options.cost_rule.read_text()), time_out)
        seeds = finished_seeds(options.results_dir / "runs")  # the look is decided before any result is read
        paired = sorted(set(seeds.get(PRIMARY, [])) & set(seeds.get(CONTROL, [])))
        stage, _ = look(paired, sorted(set.intersection(*(set(seeds.get(a, [])) for a in ladder))), final_seeds)
    except ValueError as error:
        parser.error(str(error))
    out = (options.output_dir or options.results_dir) / f"analysis_{stage}.json"
    if out.exists():
        parser.error(f"{out} exists: each registered look runs once (write elsewhere with --output-dir to reproduce)")
    warm, runs = load_runs(options.results_dir / "runs")
    result = analyse(runs, warm, final_seeds, ladder)
    return publish(result, out, to_markdown(result))


if __name__ == "__main__":
    main()
