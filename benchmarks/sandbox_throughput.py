"""Sandbox throughput: executions per second for 1, 2 and 4 workers.

The CPU column is the CPU time of every process of a run (bootstrap, program, children), per execution: the cost
measure least disturbed by other load on the machine. The trainer column is the CPU time of this process itself
(every thread: the executor's supervision, which reads the program's pipes, and the reward's comparison), per
execution: what a run costs the trainer's own process (issue 61: under 0.05 s for an honest program). Two workloads: a trivial program (`pass`: pure start-up and isolation cost) and a small stdin/stdout problem (sum of
2,000 integers read from standard input, checked by the code reward's comparator).

`--fixtures` measures the code reward itself (`evaluate_code`: sandbox, judge and comparison) on the repository's
fixtures instead: the HumanEval problems (`check` format, one execution each) and TACO's call-based and stdio
problems (one execution per test case), each solved by its reference solution, `--repeats` batches of `--runs`
executions; it prints the min/median/max over batches of the CPU time per execution of every child process (sandbox
and judge), of the reward process's own (the trainer's), and of both together: the cost per execution.

    python benchmarks/sandbox_throughput.py                  # default: 40 runs per cell
    python benchmarks/sandbox_throughput.py --runs 100 --workers 1 2 4 8
    python benchmarks/sandbox_throughput.py --disable cgroup  # cost of one isolation layer
    python benchmarks/sandbox_throughput.py --fixtures --runs 30 --repeats 5 --workers 1
    python benchmarks/sandbox_throughput.py --output-patterns --timeout 4  # trainer CPU of trickles and floods
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import random
import resource
import statistics
import time

from codapo_trl.rewards.code import evaluate_code, outputs_match
from codapo_trl.sandbox import Sandbox, SandboxConfig, Status, detect_isolation


logger = logging.getLogger("sandbox_throughput")

TRIVIAL = "pass"
SUM_PROGRAM = "import sys\ndata = sys.stdin.read().split()\nn = int(data[0])\nprint(sum(map(int, data[1 : n + 1])))\n"


def _sum_job(rng: random.Random) -> tuple[str, str, str]:
    xs = [rng.randint(-(10**6), 10**6) for _ in range(2000)]
    return SUM_PROGRAM, f"{len(xs)}\n{' '.join(map(str, xs))}\n", f"{sum(xs)}\n"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench(sandbox: Sandbox, jobs: list[tuple[str, str, str | None]]) -> dict[str, float]:
    start, cpu_start, self_start = time.perf_counter(), _children_cpu(), _self_cpu()
    results = sandbox.map([(src, stdin) for src, stdin, _ in jobs])
    elapsed = time.perf_counter() - start
    cpu = _children_cpu() - cpu_start  # every process of the run is waited for: its CPU time lands here
    trainer = _self_cpu() - self_start
    bad = 0
    for (_, _, expected), result in zip(jobs, results):
        if result.status is not Status.OK or (expected is not None and not outputs_match(result.stdout, expected)):
            bad += 1
            logger.warning("unexpected result: %s %s", result.status, result.reason)
    latencies = [r.wall_time for r in results]
    return {
        "per_s": len(jobs) / elapsed,
        "p50_ms": 1000 * statistics.median(latencies),
        "p95_ms": 1000 * sorted(latencies)[int(0.95 * (len(latencies) - 1))],
        "cpu_ms": 1000 * cpu / len(jobs),
        "trainer_ms": 1000 * trainer / len(jobs),
        "failed": bad,
    }


FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "fixtures")


def fixture_problems() -> dict[str, list[tuple[str, dict, int]]]:
    """(program, tests, executions) of every fixture problem, by workload: the reference solution of each."""
    out: dict[str, list[tuple[str, dict, int]]] = {"humaneval (check)": [], "taco (call)": [], "taco (stdio)": []}
    with open(os.path.join(FIXTURES, "humaneval_sample.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            tests = {"test": row["test"], "entry_point": row["entry_point"], "prompt": row["prompt"]}
            out["humaneval (check)"].append((row["prompt"] + row["canonical_solution"], tests, 1))
    with open(os.path.join(FIXTURES, "taco_sample.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            if not row["input_output"]:
                continue
            tests = json.loads(row["input_output"])
            kind = "taco (call)" if tests.get("fn_name") else "taco (stdio)"
            out[kind].append((json.loads(row["solutions"])[0], tests, len(tests["inputs"])))
    return out


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def bench_fixtures(sandbox: Sandbox, problems: list[tuple[str, dict, int]], runs: int) -> dict[str, float]:
    """One batch of about `runs` executions of the code reward on `problems` (cycled)."""
    n_exec, bad = 0, 0
    start, cpu_start, self_start = time.perf_counter(), _children_cpu(), _self_cpu()
    i = 0
    while n_exec < runs:
        code, tests, n = problems[i % len(problems)]
        evaluation = evaluate_code(code, tests, sandbox=sandbox, max_timeouts=None)
        bad += evaluation.reward != 1.0
        if evaluation.reward != 1.0:
            logger.warning("unexpected verdict: %s", evaluation.reason)
        n_exec += n
        i += 1
    cpu, trainer = _children_cpu() - cpu_start, _self_cpu() - self_start
    return {
        "per_s": n_exec / (time.perf_counter() - start),
        "cpu_ms": 1000 * cpu / n_exec,
        "trainer_ms": 1000 * trainer / n_exec,
        "total_ms": 1000 * (cpu + trainer) / n_exec,
        "failed": bad,
    }


def main_fixtures(config: SandboxConfig, report, workers: list[int], runs: int, repeats: int) -> None:
    header = (
        f"{'workload':<20} {'workers':>7} {'exec/s':>14} {'CPU ms/exec min/med/max':>24} "
        f"{'trainer ms/exec min/med/max':>28} {'total ms/exec min/med/max':>26} {'failed':>6}"
    )
    logger.info(header)
    logger.info("-" * len(header))
    for name, problems in fixture_problems().items():
        for n_workers in workers:
            with Sandbox(config, max_workers=n_workers, isolation=report) as sandbox:
                sandbox.run(TRIVIAL)  # warm-up (uid lease, cgroups)
                rows = [bench_fixtures(sandbox, problems, runs) for _ in range(repeats)]

            def mmm(key: str, rows: list[dict[str, float]] = rows) -> str:
                xs = sorted(r[key] for r in rows)
                return f"{xs[0]:.1f}/{statistics.median(xs):.1f}/{xs[-1]:.1f}"

            logger.info(
                f"{name:<20} {n_workers:>7} {mmm('per_s'):>14} {mmm('cpu_ms'):>24} {mmm('trainer_ms'):>28} "
                f"{mmm('total_ms'):>26} "
                f"{sum(r['failed'] for r in rows):>6}"
            )


_TRICKLE = (
    "import os, time\ndef trickle(fd):\n    while True:\n        os.write(fd, b'ab')\n        time.sleep(0.00003)\n"
)
# Programs that write until the wall-clock limit stops them (issue 61), and one honest program; (source, allow_fork).
OUTPUT_PATTERNS = {
    "honest a + b": ("a, b = map(int, input().split())\nprint(a + b)\n", False),
    "trickle stdout": (_TRICKLE + "trickle(1)\n", False),
    "trickle both, 8 threads": (
        _TRICKLE
        + "import threading\nfor fd in (1, 2) * 4:\n    threading.Thread(target=trickle, args=(fd,)).start()\n",
        False,
    ),
    "1-byte writes, both": ("import os\nwhile True:\n    os.write(1, b'a')\n    os.write(2, b'a')\n", False),
    "6 forked tricklers": (
        _TRICKLE + "for _ in range(6):\n    if os.fork() == 0:\n        break\ntrickle(1 + os.getpid() % 2)\n",
        True,
    ),
}


def main_output_patterns(config: SandboxConfig) -> None:
    """The trainer's own CPU for one run of each of `OUTPUT_PATTERNS` through the code reward (stdin `1 2`)."""
    from codapo_trl.rewards.code import make_code_execution_reward

    tests = json.dumps({"format": "stdio", "inputs": ["1 2\n"], "outputs": ["3\n"]})
    logger.info(f"{'program':<26} {'reward':>6} {'trainer CPU s':>13} {'wall s':>7}")
    for name, (source, allow_fork) in OUTPUT_PATTERNS.items():
        with Sandbox(dataclasses.replace(config, allow_fork=allow_fork), max_workers=1) as sandbox:
            reward = make_code_execution_reward(sandbox=sandbox, log_reasons=False)
            start, self_start = time.perf_counter(), _self_cpu()
            (value,) = reward([f"```python\n{source}\n```"], [tests])
            logger.info(f"{name:<26} {value:>6} {_self_cpu() - self_start:>13.3f} {time.perf_counter() - start:>7.2f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=40, help="executions per (workload, workers) cell")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--disable", nargs="*", default=[], help="isolation layers to switch off")
    parser.add_argument("--timeout", type=float, default=5.0)
    parser.add_argument("--fixtures", action="store_true", help="measure the code reward on the repo's fixtures")
    parser.add_argument("--repeats", type=int, default=5, help="batches per cell with --fixtures (min/median/max)")
    parser.add_argument(
        "--output-patterns", action="store_true", help="the trainer's CPU per run of programs that flood or trickle"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    config = SandboxConfig(timeout=args.timeout, disable=frozenset(args.disable))
    report = detect_isolation(config)
    if args.output_patterns:
        logger.info("cpus: %s, load average: %s", os.cpu_count(), " ".join(f"{x:.2f}" for x in os.getloadavg()))
        main_output_patterns(config)
        return
    if args.fixtures:
        logger.info("cpus: %s, load average: %s", os.cpu_count(), " ".join(f"{x:.2f}" for x in os.getloadavg()))
        main_fixtures(config, report, args.workers, args.runs, args.repeats)
        return
    rng = random.Random(0)
    workloads = {
        "trivial (pass)": [(TRIVIAL, "", None)] * args.runs,
        "stdin sum of 2000 ints": [_sum_job(rng) for _ in range(args.runs)],
    }
    logger.info("cpus: %s, load average: %s", os.cpu_count(), " ".join(f"{x:.2f}" for x in os.getloadavg()))
    header = (
        f"{'workload':<24} {'workers':>7} {'exec/s':>8} {'p50 ms':>8} {'p95 ms':>8} {'CPU ms/exec':>11} "
        f"{'trainer ms/exec':>15} {'failed':>6}"
    )
    logger.info(header)
    logger.info("-" * len(header))
    for name, jobs in workloads.items():
        for workers in args.workers:
            with Sandbox(config, max_workers=workers, isolation=report) as sandbox:
                sandbox.run(TRIVIAL)  # warm-up (uid lease, cgroups)
                row = bench(sandbox, jobs)
            logger.info(
                f"{name:<24} {workers:>7} {row['per_s']:>8.1f} {row['p50_ms']:>8.1f} {row['p95_ms']:>8.1f} "
                f"{row['cpu_ms']:>11.1f} {row['trainer_ms']:>15.2f} {row['failed']:>6}"
            )


if __name__ == "__main__":
    main()
