"""Round 3's runner (issue 63): train an arm of a seed on that seed's pool, read out the checkpoints the design
names, keep what audits every number. Resumable per run; one training at a time.

    OMP_NUM_THREADS=2 PYTHONPATH=experiments/codapo_vs_grpo python experiments/codapo_vs_grpo_r3/campaign.py \\
        --seeds 0 --arms grpo codapo_weighting codapo codapo_authors \\
        --warm-start-pin experiments/codapo_vs_grpo_r2/warm_start_v4.sha256
    # the pilot: --seeds 200 201 --arms grpo --results-dir experiments/codapo_vs_grpo_r3/results/pilot, then
    #            --seeds 202 --arms codapo_authors (same results dir)

Per run (`arm`, `seed`): the arm's recipe (`arms.py`, `recipes/`) with `seed` and the seed's pool
(`pools/<size>/seed<seed>.jsonl`, checked against `pools.py` before training), trained by `recipes/codapo_math.py`
with a checkpoint at every read-out step; greedy read-outs of the held-out set (`test`: 180 / 200 / 200 questions of
levels 4 / 5 / 7, round 2's) after generation batches 8, 16, 24 and 32, and avg@4 at T = 0.6 after batch 32 (round 1's
`run.evaluate`: summary plus gzipped samples). Into `results/runs/<arm>-seed<seed>/` go the trainer state, the
compressed question log (`questions.jsonl.gz`), the recipe, the command, the training's wall seconds, the read-outs
and `done.json` (pool file and its SHA-256, the repository commit, the CPU and any preload). A run with `done.json` is
skipped; a run whose training finished is only read out; a run whose training did not finish restarts from scratch,
its earlier read-outs deleted (the registered rule: a restart needs no checkpoint to be trusted). The warm start is read
out once the same way (`runs/warm_start/`).

Refused before anything runs: a thread count other than `OMP_NUM_THREADS=2`; a `CODAPO_GRADER_*` variable (round 3
grades with the grader as registered, defaults included); tracked files changed since the commit (a run records its
commit, the library's tree and the package versions); an AMD CPU without round 2's `mkl_intel_path` preload (MKL's
kernels differ by vendor); `--set` beside an arm other than A3 or its matched control. Models live in
`--work-dir/<results folder's name>/<run>`, and a model trained from another recipe is trained again.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import run as round_1  # round 1's runner, by name (PYTHONPATH=experiments/codapo_vs_grpo)
import yaml
from arms import ARMS, LADDER, load_recipe, seeded_recipe
from pools import POOL_LEVELS, pool_path, stale_pools

from codapo_trl.command_line import configure_logging
from codapo_trl.versions import package_versions


HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
logger = logging.getLogger("codapo_vs_grpo_r3")
EVAL_QUESTIONS = {4: 180, 5: 200, 7: 200}  # round 2's held-out set
COPIED = ("trainer_state.json", "questions.jsonl.gz", "train_results.json")


def read_outs(arm: str) -> list[tuple[int, round_1.Evaluation]]:
    """The (step, read-out) pairs of a run of `arm`, in step order.

    Example:
        >>> [(s, e.kind) for s, e in read_outs("codapo_authors")][-2:]
        [(256, 'greedy'), (256, 'avg4')]
    """
    spec = ARMS[arm]
    pairs = [(s, round_1.Evaluation("greedy")) for s in spec.greedy_steps]
    pairs += [(s, round_1.Evaluation("avg4")) for s in spec.sampled_steps]
    return sorted(pairs, key=lambda p: (p[0], p[1].kind != "greedy"))


def train_command(arm: str, recipe_path: Path, run_dir: Path) -> list[str]:
    """The training command of one run: the seeded recipe (its own algorithm, logging and `max_steps`), a
    checkpoint at every read-out step before the last."""
    spec = ARMS[arm]
    checkpoints = sorted({s for s, _ in read_outs(arm) if s < spec.updates})
    return [
        sys.executable, str(ROOT / "recipes" / "codapo_math.py"),
        "--config", str(recipe_path),
        "--output_dir", str(run_dir),
        "--save_strategy", "no",
        "--save_at_steps", *[str(s) for s in checkpoints],
        "--save_only_model", "true",
    ]  # fmt: skip


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def repository_commit() -> str | None:
    return _git("rev-parse", "HEAD")


def provenance() -> dict:
    """What a run's numbers rest on besides its recipe and pool: the commit, the git tree of the library and of the
    training entry point (the registration's rule on training code compares these), the versions of the packages that
    decide a result, the thread count, the CPU and any preload."""
    return {
        "commit": repository_commit(),
        "codapo_trl_tree": _git("rev-parse", "HEAD:codapo_trl"),
        "recipes_tree": _git("rev-parse", "HEAD:recipes"),
        "versions": package_versions(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS", ""),
        "cpu": cpu_model(),
        "ld_preload": os.environ.get("LD_PRELOAD", ""),
    }


def environment_problem(environment: dict[str, str], dirty: str | None) -> str | None:
    """Why this shell may not run a registered run, or None: two threads, as registered; no grader variable (the
    grader runs as registered, defaults included); a checkout whose tracked files match its commit (`dirty`: `git
    status --porcelain --untracked-files=no`), so that the commit a run records is the code it ran.

    Example:
        >>> environment_problem({"OMP_NUM_THREADS": "2"}, "") is None
        True
        >>> environment_problem({}, "")
        'set OMP_NUM_THREADS=2: the registered runs use two threads'
        >>> environment_problem({"OMP_NUM_THREADS": "2", "CODAPO_GRADER_READ_AFTER_BOX": "0"}, "")
        'unset CODAPO_GRADER_READ_AFTER_BOX: round 3 grades with the grader as registered, defaults included'
        >>> environment_problem({"OMP_NUM_THREADS": "2"}, " M codapo_trl/trainer.py")[:44]
        'commit or discard the changes to tracked fil'
    """
    if environment.get("OMP_NUM_THREADS") != "2":
        return "set OMP_NUM_THREADS=2: the registered runs use two threads"
    names = sorted(name for name in environment if name.startswith("CODAPO_GRADER_"))
    if names:
        return f"unset {' '.join(names)}: round 3 grades with the grader as registered, defaults included"
    if dirty:
        return f"commit or discard the changes to tracked files first (a run records its commit): {dirty}"
    return None


def overrides_problem(arms: list[str], overrides: dict) -> str | None:
    """Why `--set` may not apply to these arms, or None: an override (the pilot rule's lr for A3) applies to one run
    per invocation of A3 or its matched control alone, never to the ladder's other arms.

    Example:
        >>> overrides_problem(["codapo_authors"], {"learning_rate": 5e-06}) is None
        True
        >>> overrides_problem(["grpo", "codapo_authors"], {"learning_rate": 5e-06})
        "--set applies to codapo_authors or grpo_authors_opt alone; run ['grpo'] in an invocation without it"
    """
    others = [arm for arm in arms if arm not in ("codapo_authors", "grpo_authors_opt")]
    if overrides and others:
        return f"--set applies to codapo_authors or grpo_authors_opt alone; run {others} in an invocation without it"
    return None


def _cpuinfo(field: str) -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            lines = [line.split(":", 1) for line in cpuinfo if ":" in line]
    except OSError:
        return ""
    return next((value.strip() for key, value in lines if key.strip() == field), "")


def cpu_model() -> str:
    """The CPU's model name (runs of one campaign may land on machines of different models: each run says which)."""
    return _cpuinfo("model name") or "unknown"


def mkl_path_problem(vendor: str, preload: str) -> str | None:
    """Why MKL would not compute on its Intel code path here, or None. MKL picks its float32 kernels by CPU vendor;
    the pinned warm start and round 2's Xeon runs used its Intel path, which an AMD CPU takes only with round 2's shim
    preloaded (`experiments/codapo_vs_grpo_r2/mkl_intel_path.c`).

    Example:
        >>> mkl_path_problem("GenuineIntel", ""), mkl_path_problem("AuthenticAMD", "/tmp/mkl_intel_path.so")
        (None, None)
        >>> mkl_path_problem("AuthenticAMD", "")[:34]
        'an AMD CPU without mkl_intel_path:'
    """
    if vendor != "AuthenticAMD" or "mkl_intel_path" in preload:
        return None
    return (
        "an AMD CPU without mkl_intel_path: build it with `gcc -shared -fPIC -O2 -o /tmp/mkl_intel_path.so "
        "experiments/codapo_vs_grpo_r2/mkl_intel_path.c` and run with LD_PRELOAD=/tmp/mkl_intel_path.so, so that MKL "
        "computes on the Intel code path every run of this campaign uses"
    )


def run_one(arm: str, seed: int, options: argparse.Namespace, benchmark) -> None:
    name = f"{arm}-seed{seed}"
    results = options.results_dir / "runs" / name
    if (results / "done.json").exists():
        logger.info("%s: done, skipped", name)
        return
    pool = pool_path(seed, options.pool_size)
    work = options.work_dir / options.results_dir.name / name  # a pilot's repeat never meets the first pilot's model
    results.mkdir(parents=True, exist_ok=True)
    recipe = seeded_recipe(arm, seed, pool.relative_to(ROOT) if pool.is_relative_to(ROOT) else pool, options.set)
    trained = (work / "train_results.json").exists() and (work / "model.safetensors").exists()
    same_recipe = (work / "recipe.yaml").exists() and yaml.safe_load((work / "recipe.yaml").read_text()) == recipe
    if not (trained and same_recipe):
        shutil.rmtree(work, ignore_errors=True)  # an unfinished training restarts from scratch,
        shutil.rmtree(results / "eval", ignore_errors=True)  # and an earlier training's read-outs are not its own
        work.mkdir(parents=True)
        recipe_path = work / "recipe.yaml"
        recipe_path.write_text(yaml.safe_dump(recipe, sort_keys=False))
        command = train_command(arm, recipe_path, work)
        shown = ["python", *(c.replace(f"{ROOT}/", "") for c in command[1:])]
        (results / "command.txt").write_text(" ".join(shown) + "\n")
        shutil.copy(recipe_path, results / "recipe.yaml")
        logger.info("Training %s: %s", name, " ".join(command))
        start, load_before = time.perf_counter(), os.getloadavg()
        with open(work / "train.log", "w") as log:
            subprocess.run(command, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        seconds = {"seconds": time.perf_counter() - start, "load_before": load_before, "load_after": os.getloadavg()}
        (results / "train_seconds.json").write_text(json.dumps(seconds))  # load: 1/5/15-min averages (quiet?)
    for file in COPIED:
        shutil.copy(work / file, results / file)
    for step, evaluation in read_outs(arm):
        model = work if step == ARMS[arm].updates else work / f"checkpoint-{step}"
        round_1.evaluate(model, evaluation, recipe, benchmark, results / "eval" / f"step{step}-{evaluation.kind}")
    for step in {s for s, _ in read_outs(arm) if s < ARMS[arm].updates}:
        if not options.keep_checkpoints:
            shutil.rmtree(work / f"checkpoint-{step}", ignore_errors=True)
    done = {"arm": arm, "seed": seed, "pool": str(recipe["dataset_name"]), "pool_sha256": sha256(pool),
            "overrides": dict(options.set), **provenance()}  # fmt: skip
    (results / "done.json").write_text(json.dumps(done))


def parse_overrides(values: list[str]) -> dict:
    """`["learning_rate=5e-6"]` -> `{"learning_rate": 5e-06}` (values read as YAML).

    Example:
        >>> parse_overrides(["learning_rate=5.0e-6", "codapo_top_k=4"])
        {'learning_rate': 5e-06, 'codapo_top_k': 4}
    """
    out = {}
    for value in values:
        key, sep, text = value.partition("=")
        if not sep or not key:
            raise ValueError(f"Write each override as KEY=VALUE, got {value!r}.")
        out[key] = yaml.safe_load(text)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", nargs="+", type=int, required=True)
    parser.add_argument("--arms", nargs="+", default=list(LADDER), choices=sorted(ARMS))
    parser.add_argument("--pool-size", type=int, default=64, choices=sorted(POOL_LEVELS))
    parser.add_argument("--results-dir", type=Path, default=HERE / "results", help="committed artefacts")
    parser.add_argument("--work-dir", type=Path, default=ROOT / "outputs" / "codapo_vs_grpo_r3", help="models")
    parser.add_argument("--keep-checkpoints", action="store_true", help="do not delete read-out checkpoints")
    parser.add_argument("--set", nargs="*", default=[], help="recipe overrides KEY=VALUE (the pilot rule's lr)")
    parser.add_argument("--warm-start-pin", type=Path, default=None, help="SHA-256 pin of the warm start")
    options = parser.parse_args(argv)
    try:
        options.set = parse_overrides(options.set)
    except ValueError as error:
        parser.error(str(error))
    configure_logging()
    problem = mkl_path_problem(_cpuinfo("vendor_id"), os.environ.get("LD_PRELOAD", ""))
    problem = problem or environment_problem(dict(os.environ), _git("status", "--porcelain", "--untracked-files=no"))
    problem = problem or overrides_problem(options.arms, options.set)
    if problem:
        parser.error(problem)
    stale = stale_pools(options.seeds, options.pool_size)
    if stale:
        parser.error("pools not as pools.py writes them: " + "; ".join(stale))
    recipe = load_recipe(options.arms[0])  # every arm's recipe names the same warm start, prompt and token limit
    model = Path(recipe["model_name_or_path"])
    model = model if model.is_absolute() else ROOT / model
    if not (model / "config.json").exists():
        parser.error(f"the warm start {model} does not exist")
    if options.warm_start_pin is not None:
        mismatches = round_1.pin_mismatches(model, round_1.parse_pin(options.warm_start_pin.read_text()))
        if mismatches:
            parser.error(f"the warm start {model} is not the pinned one: " + "; ".join(mismatches))
    benchmark = round_1.held_out_benchmark(EVAL_QUESTIONS)
    for kind in ("greedy", "avg4"):
        warm = options.results_dir / "runs" / "warm_start" / kind
        round_1.evaluate(model, round_1.Evaluation(kind), recipe, benchmark, warm)
    for seed in options.seeds:  # seed-major: an interrupted campaign still has complete pairs
        for arm in options.arms:
            run_one(arm, seed, options, benchmark)


if __name__ == "__main__":
    main()
