"""The pre-registered CoDaPO-vs-GRPO campaign (issue 14, PREREGISTRATION.md): train every arm of every seed, evaluate
the checkpoints the protocol names, keep what audits every number.

    python experiments/codapo_vs_grpo/warm_start.py --output-dir outputs/warm_start/smollm2-arith-boxed  # once
    python experiments/codapo_vs_grpo/run.py --seeds 0 1 2 3 4 5       # seed-major; resumable, one sitting per seed
    python experiments/codapo_vs_grpo/report.py                        # the report, from what is finished

Per run (`arm`, `seed`), in the work directory (`outputs/codapo_vs_grpo/<arm>-seed<seed>`, not committed): the
training run of `recipes/codapo_math.py` on `recipe.yaml` plus the arm's overrides (`experiments/compare.py`'s
`ARMS`, the one list of arms), 32 updates, checkpoints after the updates the protocol evaluates. Each checkpoint is
evaluated on the fixed held-out set (greedy always; avg@4 at T = 0.6 after updates 31 and 32) and then deleted
(500 MB each); the final model stays in the work directory. Into `results/runs/<arm>-seed<seed>/` (committed) go
the trainer state (every logged metric of every update), the question log, the arm's recipe and command, and per
evaluation its summary and its samples (gzip). A run whose `done.json` exists is skipped, a run whose training
finished is only evaluated, a run whose training did not finish is restarted from scratch (PREREGISTRATION.md,
"Seeds"). The warm start is evaluated once, the same way.

The same driver runs round 2 (`experiments/codapo_vs_grpo_r2/PREREGISTRATION.md`) through its options: another
recipe, results and work directories, held-out questions (`--eval-questions 4=180 5=200 7=200`), arms (the
loss-only arm `grpo_token_loss`) and, for the pilot, `--updates 16 --train-only` (training and its logs, no
read-outs). Round 1's defaults are unchanged.

Round 2's amendment 2 (issue 35) adds a third read-out kind, `pass8` (8 samples at T = 1.0 of the hard level's
held-out questions alone: pass@8 and avg@8; `--pass8-steps`, `--hard-level`), greedy read-outs of the hard level alone
at the updates outside `--all-levels-steps`, and the warm-start pin (`--warm-start-pin`): the SHA-256 of every file
of the warm start, checked at every sitting before anything is read out or trained; a mismatch stops the driver.

    python experiments/codapo_vs_grpo/run.py --recipe R --warm-start-pin PIN --record-warm-start-pin  # once

The grader is pinned to the rule the campaign was pre-registered with (`GRADER_ENVIRONMENT`: the last box alone,
also for the training subprocesses), since the grader's default later came to refuse a right box contradicted after
it (`codapo_trl.rewards.grade_answers`, `read_after_box`); the report re-grades under that rule as a sensitivity
check.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from codapo_trl.command_line import configure_logging
from codapo_trl.evaluation import evaluate_model, load_benchmark
from codapo_trl.evaluation.benchmarks import Benchmark


HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
logger = logging.getLogger("codapo_vs_grpo")

# PREREGISTRATION.md, "Arms": the names of experiments/compare.py's ARMS, in the order they run within a seed.
ARM_NAMES = ("grpo", "codapo", "codapo_weighting", "codapo_uniform")
# Round 2 (issue 27) adds GRPO's advantages under CoDaPO's per-question token-averaged loss (v = 1, no S).
ALL_ARM_NAMES = (*ARM_NAMES, "grpo_token_loss")
BASELINE_ARMS = ("grpo",)  # TRL's GRPOTrainer: no codapo_* keys, the question log through baseline_dynamics
# PREREGISTRATION.md, "Evaluation": the held-out questions per level and the models' read-out points.
EVAL_QUESTIONS = {1: 14, 2: 12, 3: 23, 4: 180, 5: 200}
UPDATES = 32
GREEDY_STEPS = (8, 16, 24, 31, 32)
SAMPLED_STEPS = (31, 32)
EVAL_SAMPLES = 4
EVAL_TEMPERATURE = 0.6
EVAL_SEED = 0
# Amendment 2 of round 2: the hard level's pass@8 and avg@8, 8 samples at the training temperature.
PASS_SAMPLES = 8
PASS_TEMPERATURE = 1.0
# PREREGISTRATION.md, "Regime": the reward is fixed for the whole campaign. Set in this process (evaluation) and
# inherited by the training subprocesses.
GRADER_ENVIRONMENT = {"CODAPO_GRADER_READ_AFTER_BOX": "0"}


@dataclass(frozen=True)
class Evaluation:
    """One read-out of a model: `greedy` (temperature 0, one sample), `avg4` (4 samples at T = 0.6) or `pass8` (8
    samples at T = 1.0: pass@8 and avg@8). `levels`: the held-out levels it reads (`None`: all of them)."""

    kind: str
    levels: tuple[int, ...] | None = None

    @property
    def num_samples(self) -> int:
        return {"greedy": 1, "avg4": EVAL_SAMPLES, "pass8": PASS_SAMPLES}[self.kind]

    @property
    def temperature(self) -> float:
        return {"greedy": 0.0, "avg4": EVAL_TEMPERATURE, "pass8": PASS_TEMPERATURE}[self.kind]


def evaluations_at(
    step: int,
    greedy_steps: tuple[int, ...] = GREEDY_STEPS,
    sampled_steps: tuple[int, ...] = SAMPLED_STEPS,
    pass8_steps: tuple[int, ...] = (),
    hard_level: int | None = None,
    all_levels_steps: tuple[int, ...] | None = None,
) -> list[Evaluation]:
    """What the protocol reads at an update: greedy at every read-out point, avg@4 as well at 31 and 32 (round 1's
    defaults; round 2 passes its own steps). Amendment 2 of round 2: `pass8` of `hard_level` alone at `pass8_steps`,
    and greedy of `hard_level` alone at greedy steps outside `all_levels_steps` (`None`: every level everywhere).

    Example:
        >>> [(e.kind, e.levels) for e in evaluations_at(8, (8, 16), (), (16,), 7, (16,))]
        [('greedy', (7,))]
        >>> [(e.kind, e.levels) for e in evaluations_at(16, (8, 16), (), (16,), 7, (16,))]
        [('greedy', None), ('pass8', (7,))]
    """
    if hard_level is None and (pass8_steps or all_levels_steps is not None):
        raise ValueError("A pass8 read-out or a hard-level-only greedy read-out needs the hard level (--hard-level).")
    hard = None if hard_level is None else (hard_level,)
    out = [Evaluation("avg4")] if step in sampled_steps else []
    if step in greedy_steps:
        out.append(Evaluation("greedy", None if all_levels_steps is None or step in all_levels_steps else hard))
    if step in pass8_steps:
        out.append(Evaluation("pass8", hard))
    return out


def load_compare():
    """experiments/compare.py as a module: its ARMS and arm_recipe are the one home of the arms' overrides."""
    spec = importlib.util.spec_from_file_location("compare", HERE.parent / "compare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def train_command(
    arm: str,
    seed: int,
    recipe_path: Path,
    run_dir: Path,
    overrides: list[str],
    updates: int = UPDATES,
    checkpoints: tuple[int, ...] | None = None,
    read_out_steps: tuple[int, ...] = GREEDY_STEPS,
) -> list[str]:
    """The training command line of one run (`recipe_path`: the arm's recipe, written by `compare.arm_recipe`).

    `checkpoints`: the updates before the last whose models are saved for a read-out (default: the protocol's
    greedy read-outs before `updates`; empty: none, e.g. a pilot that only trains)."""
    if checkpoints is None:
        checkpoints = tuple(sorted(s for s in read_out_steps if s < updates))
    command = [
        sys.executable, str(ROOT / "recipes" / "codapo_math.py"),
        "--config", str(recipe_path),
        *overrides,
        "--seed", str(seed),
        "--max_steps", str(updates),
        "--output_dir", str(run_dir),
        "--save_strategy", "no",
        *(["--save_at_steps", *[str(s) for s in checkpoints]] if checkpoints else []),
        "--save_only_model", "true",
        "--logging_steps", "1",
        "--report_to", "none",
    ]  # fmt: skip
    if arm in BASELINE_ARMS:
        command += ["--baseline_dynamics", "true", "--baseline_question_log", "questions.jsonl"]
    return command


def held_out_benchmark(questions: dict[int, int] | None = None) -> Benchmark:
    """The fixed held-out set: `questions` per level of the `test` split (default: round 1's `EVAL_QUESTIONS`)."""
    return load_benchmark("arithmetic", split="test", num_per_level=questions or EVAL_QUESTIONS)


def parse_level_counts(values: list[str]) -> dict[int, int]:
    """`["4=180", "6=200"]` -> `{4: 180, 6: 200}` (the `--eval-questions` option).

    Example:
        >>> parse_level_counts(["4=180", "6=200"])
        {4: 180, 6: 200}
    """
    counts = {}
    for value in values:
        level, _, count = value.partition("=")
        if not (level.isdigit() and count.isdigit()):
            raise ValueError(f"Write each held-out level as LEVEL=QUESTIONS (e.g. 6=200), got {value!r}.")
        counts[int(level)] = int(count)
    return counts


def restrict_levels(benchmark: Benchmark, levels: tuple[int, ...] | None) -> Benchmark:
    """The held-out questions of `levels` only, in their order and with their indices (`None`: all of them)."""
    if levels is None:
        return benchmark
    items = [item for item in benchmark.items if item.level is not None and int(item.level) in levels]
    if not items:
        raise ValueError(f"The held-out set has no question of level(s) {levels}: add them to --eval-questions.")
    return dataclasses.replace(benchmark, items=items)


def evaluate(model: Path, evaluation: Evaluation, recipe: dict, benchmark: Benchmark, out: Path) -> dict:
    """Evaluate `model` once; the summary and gzipped samples land in `out` (skipped when the summary exists)."""
    summary_path = out / "summary.json"
    if summary_path.exists():
        return json.loads(summary_path.read_text())
    scratch = out.with_name(out.name + ".partial")
    start = time.perf_counter()
    if (scratch / "summary.json").exists():  # an earlier sitting evaluated it and stopped before keeping it
        summary = json.loads((scratch / "summary.json").read_text())
        summary["seconds"] = None
    else:
        shutil.rmtree(scratch, ignore_errors=True)
        result = evaluate_model(
            str(model),
            [restrict_levels(benchmark, evaluation.levels)],
            num_samples=evaluation.num_samples,
            temperature=evaluation.temperature,
            max_new_tokens=recipe["max_completion_length"],
            system_prompt=recipe["system_prompt"],
            seed=EVAL_SEED,
            batch_size=128,
            backend="transformers",
            dtype="float32",
            output_dir=scratch,
            progress=False,
        )
        summary = result.to_summary()
        summary["seconds"] = time.perf_counter() - start
    out.mkdir(parents=True, exist_ok=True)
    with (
        open(scratch / "samples.jsonl", "rb") as src,
        open(out / "samples.jsonl.gz", "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as dst,  # mtime 0: the same samples give the same bytes
    ):
        shutil.copyfileobj(src, dst)
    summary_path.write_text(json.dumps(summary, indent=1))
    shutil.rmtree(scratch)
    logger.info("%s %s: %s s", model, evaluation.kind, summary["seconds"])
    return summary


def run_one(arm: str, seed: int, options: argparse.Namespace, compare, recipe: dict, benchmark: Benchmark) -> None:
    name = f"{arm}-seed{seed}"
    results = options.results_dir / "runs" / name
    if (results / "done.json").exists():
        logger.info("%s: done, skipped", name)
        return
    work = options.work_dir / name
    results.mkdir(parents=True, exist_ok=True)
    if not ((work / "train_results.json").exists() and (work / "model.safetensors").exists()):  # training finished
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        recipe_path = compare.arm_recipe(arm, recipe, work / "recipe.yaml")
        checkpoints = () if options.train_only else None
        command = train_command(
            arm, seed, recipe_path, work, compare.ARMS[arm], options.updates, checkpoints, read_out_steps(options)
        )
        shown = ["python", *(c.replace(f"{ROOT}/", "") for c in command[1:])]  # paths relative to the checkout
        (results / "command.txt").write_text(" ".join(shown) + "\n")
        shutil.copy(recipe_path, results / "recipe.yaml")
        logger.info("Training %s: %s", name, " ".join(command))
        start = time.perf_counter()
        with open(work / "train.log", "w") as log:
            subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        (results / "train_seconds.json").write_text(json.dumps({"seconds": time.perf_counter() - start}))
    for file in ("trainer_state.json", "questions.jsonl", "train_results.json"):
        shutil.copy(work / file, results / file)
    if options.train_only:  # a pilot: its logs are the result; no read-out
        (results / "done.json").write_text(json.dumps({"arm": arm, "seed": seed, "train_only": True}))
        return
    for step in (s for s in read_out_steps(options) if s <= options.updates):
        model = work if step == options.updates else work / f"checkpoint-{step}"
        for evaluation in evaluations_for(step, options):
            evaluate(model, evaluation, recipe, benchmark, results / "eval" / f"step{step}-{evaluation.kind}")
        if model != work and not options.keep_checkpoints:
            shutil.rmtree(model, ignore_errors=True)  # gone already when an earlier sitting read it out
    (results / "done.json").write_text(json.dumps({"arm": arm, "seed": seed}))


def protocol_steps(options: argparse.Namespace) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The greedy and avg@4 read-out updates of a campaign (`--greedy-steps`, `--sampled-steps`; round 1's by
    default, also for a namespace built without them)."""
    greedy, sampled = getattr(options, "greedy_steps", None), getattr(options, "sampled_steps", None)
    return (
        tuple(GREEDY_STEPS if greedy is None else greedy),
        tuple(SAMPLED_STEPS if sampled is None else sampled),  # empty: no avg@4 read-out
    )


def evaluations_for(step: int, options: argparse.Namespace) -> list[Evaluation]:
    """`evaluations_at` with a campaign's options (the amendment-2 options absent: round 1's read-outs)."""
    all_levels = getattr(options, "all_levels_steps", None)
    return evaluations_at(
        step,
        *protocol_steps(options),
        pass8_steps=tuple(getattr(options, "pass8_steps", None) or ()),
        hard_level=getattr(options, "hard_level", None),
        all_levels_steps=None if all_levels is None else tuple(all_levels),
    )


def read_out_steps(options: argparse.Namespace) -> tuple[int, ...]:
    """Every update with a read-out of any kind, in order."""
    greedy, sampled = protocol_steps(options)
    return tuple(sorted(set(greedy) | set(sampled) | set(getattr(options, "pass8_steps", None) or ())))


def file_hashes(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under `folder` (weights, configuration, tokenizer, its record), by relative path."""
    hashes = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        hashes[path.relative_to(folder).as_posix()] = digest.hexdigest()
    return hashes


def format_pin(hashes: dict[str, str]) -> str:
    """The pin file: `sha256sum`'s format (`HASH  PATH` per line), so `sha256sum -c` in the folder checks it too."""
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(hashes.items()))


def parse_pin(text: str) -> dict[str, str]:
    """A pin file's hashes by relative path (`format_pin`'s inverse; `#` lines are comments).

    Example:
        >>> parse_pin("# v4\\n" + "ab" * 32 + "  model.safetensors\\n")["model.safetensors"][:4]
        'abab'
    """
    hashes = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        digest, _, name = line.partition("  ")
        if len(digest) != 64 or not name:
            raise ValueError(f"Line {number} of the pin is not `SHA256  PATH`: {line!r}.")
        hashes[name] = digest
    if not hashes:
        raise ValueError("The pin lists no file.")
    return hashes


def pin_mismatches(folder: Path, pinned: dict[str, str]) -> list[str]:
    """What differs between the files of `folder` and a pin: changed, missing and unpinned files (empty: it is the
    pinned warm start)."""
    found = file_hashes(folder)
    problems = [f"{name}: changed" for name in sorted(pinned) if name in found and found[name] != pinned[name]]
    problems += [f"{name}: missing" for name in sorted(set(pinned) - set(found))]
    problems += [f"{name}: not in the pin" for name in sorted(set(found) - set(pinned))]
    return problems


def pin_grader() -> None:
    """Grade as the campaign was pre-registered (`GRADER_ENVIRONMENT`), here and in every subprocess started after."""
    from codapo_trl.rewards import configure_grader

    os.environ.update(GRADER_ENVIRONMENT)
    configure_grader(read_after_box=GRADER_ENVIRONMENT["CODAPO_GRADER_READ_AFTER_BOX"] == "1")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4, 5])
    parser.add_argument("--arms", nargs="+", default=list(ARM_NAMES), choices=ALL_ARM_NAMES)
    parser.add_argument("--recipe", type=Path, default=HERE / "recipe.yaml")
    parser.add_argument("--results-dir", type=Path, default=HERE / "results", help="committed artefacts")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "outputs" / "codapo_vs_grpo", help="models")
    parser.add_argument("--keep-checkpoints", action="store_true", help="do not delete evaluated checkpoints")
    parser.add_argument("--updates", type=int, default=UPDATES, help="optimizer updates per run (S updates count)")
    parser.add_argument(
        "--eval-questions",
        nargs="+",
        default=[f"{level}={count}" for level, count in EVAL_QUESTIONS.items()],
        help="held-out test questions per level, as LEVEL=QUESTIONS (default: round 1's)",
    )
    parser.add_argument("--train-only", action="store_true", help="train and keep the logs, no read-out (a pilot)")
    parser.add_argument(
        "--warm-start-only", action="store_true", help="read out the warm start (greedy and avg@4 as set) and stop"
    )
    parser.add_argument("--greedy-steps", nargs="+", type=int, default=list(GREEDY_STEPS), help="greedy read-outs")
    parser.add_argument(
        "--sampled-steps", nargs="*", type=int, default=list(SAMPLED_STEPS), help="avg@4 read-outs (none: no value)"
    )
    parser.add_argument(
        "--pass8-steps", nargs="*", type=int, default=[], help="hard-level pass@8/avg@8 read-outs at T = 1.0"
    )
    parser.add_argument("--hard-level", type=int, default=None, help="the hard level (pass8 and hard-only greedy)")
    parser.add_argument(
        "--all-levels-steps",
        nargs="+",
        type=int,
        default=None,
        help="greedy read-outs of every held-out level only at these updates; the hard level alone elsewhere",
    )
    parser.add_argument(
        "--warm-start-pin", type=Path, default=None, help="SHA-256 pin of the warm start, checked before any work"
    )
    parser.add_argument(
        "--record-warm-start-pin", action="store_true", help="write --warm-start-pin from the warm start and stop"
    )
    options = parser.parse_args(argv)
    try:
        eval_questions = parse_level_counts(options.eval_questions)
    except ValueError as error:
        parser.error(str(error))
    configure_logging()
    pin_grader()
    recipe = yaml.safe_load(options.recipe.read_text())
    model = Path(recipe["model_name_or_path"])
    model = model if model.is_absolute() else ROOT / model
    if not (model / "config.json").exists():
        parser.error(f"the warm start {model} does not exist: make it first (see this script's help)")
    if options.hard_level is None and (options.pass8_steps or options.all_levels_steps is not None):
        parser.error("--pass8-steps and --all-levels-steps need --hard-level")
    if options.record_warm_start_pin:
        if options.warm_start_pin is None or options.warm_start_pin.exists():
            parser.error("--record-warm-start-pin writes a new --warm-start-pin file (it never replaces one)")
        options.warm_start_pin.write_text(f"# {model.relative_to(ROOT) if model.is_relative_to(ROOT) else model}\n"
                                          + format_pin(file_hashes(model)))  # fmt: skip
        logger.info("Pinned %s in %s", model, options.warm_start_pin)
        return
    if options.warm_start_pin is not None:
        if not options.warm_start_pin.exists():
            parser.error(f"the pin {options.warm_start_pin} does not exist: record it with --record-warm-start-pin")
        mismatches = pin_mismatches(model, parse_pin(options.warm_start_pin.read_text()))
        if mismatches:
            parser.error(f"the warm start {model} is not the pinned one ({options.warm_start_pin}): "
                         + "; ".join(mismatches))  # fmt: skip
        logger.info("Warm start %s matches its pin %s", model, options.warm_start_pin)
    missing = [key for key in ("max_completion_length", "system_prompt") if key not in recipe]
    if missing:  # the read-outs use the training's prompt and token limit
        parser.error(f"{options.recipe} lacks {missing}")
    if options.warm_start_only and options.train_only:
        parser.error("--warm-start-only reads out and --train-only does not: pass one of them")
    compare = load_compare()
    benchmark = None if options.train_only else held_out_benchmark(eval_questions)
    for evaluation in [] if options.train_only else evaluations_for(options.updates, options):
        evaluate(model, evaluation, recipe, benchmark, options.results_dir / "runs" / "warm_start" / evaluation.kind)
    if options.warm_start_only:
        return
    for seed in options.seeds:  # seed-major: an interrupted campaign still has complete pairs
        for arm in options.arms:
            run_one(arm, seed, options, compare, recipe, benchmark)


if __name__ == "__main__":
    main()
