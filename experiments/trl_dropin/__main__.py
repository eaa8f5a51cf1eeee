"""Run TRL's own GRPO trainer tests offline: stock TRL, CoDaPO with weighting and sampling off, CoDaPO with defaults.

    python -m trl_dropin --trl-tests /path/to/trl/tests --work /tmp/dropin        # all three runs, then compare
    python -m trl_dropin --trl-tests ... --work ... --runs stock -- -k test_train_with_tools
    python -m trl_dropin --work /tmp/dropin --compare                             # compare saved reports

(with `experiments/` on `PYTHONPATH`; `make dropin TRL_TESTS=...` does this). TRL's test files are copied from
`--trl-tests` into `--work/tests` (never into this repository); the stand-ins for the hub's models and datasets are
built once under `--work/trl-internal-testing`, and pytest runs from `--work` with the hub offline, so that the
tests' hub ids resolve to those folders. Exit status: 1 when stock TRL fails or errors on a test it runs, or when
CoDaPO off differs from stock on any test; CoDaPO-on differences are printed with their documented reasons
(`differences.py`); an undocumented one fails the check.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from .differences import explain


EXPERIMENTS = Path(__file__).resolve().parents[1]
ROOT = EXPERIMENTS.parent
TEST_FILES = ("__init__.py", "conftest.py", "testing_utils.py", "testing_constants.py", "test_grpo_trainer.py")
RUNS = ("stock", "off", "on")
# What may be skipped (docs/dropin.md): GPU-only, liger, bitsandbytes, kernels and vLLM tests, by the tests' own
# markers, and the VLMs this machine cannot build (`plugin.UNBUILT`). Any other skip fails the check.
ALLOWED_SKIP = re.compile(r"accelerator|liger|bitsandbytes|kernels|vllm|torchvision", re.IGNORECASE)


# Assertions of the copied tests that check an older TRL's implementation rather than behaviour, adapted in the copy
# (never in TRL's checkout; docs/dropin.md lists each): `{file: [(test, exact line, replacement, why)]}`. A line that
# is no longer there fails the copy, so a new TRL release's tests are read again rather than adapted blindly.
ADAPTATIONS = {
    "test_grpo_trainer.py": [
        (
            "test_entropy_bonus_flows_gradients",
            "        assert not entropies.requires_grad\n",
            "        # adapted (codapo-trl make dropin): TRL 1.16 keeps the entropy on the graph and skips its backward\n"
            "        # when no gradient reaches it; the test's 'detached when the bonus is off' checks the older kernel\n",
            "TRL 1.16's fused log-prob kernel returns the entropy attached to the graph and saves the backward work "
            "with `ctx.set_materialize_grads(False)`, so 'detached when the bonus is off' no longer holds for stock "
            "TRL; the test's other assertion (the bonus carries gradient when on) is kept",
        )
    ]
}


def copy_tests(trl_tests: Path, work: Path) -> Path:
    """Copy TRL's GRPO test module and the helpers it imports into `work/tests`, with the [`ADAPTATIONS`]."""
    tests = work / "tests"
    tests.mkdir(parents=True, exist_ok=True)
    for name in TEST_FILES:
        source = trl_tests / name
        if source.exists():
            shutil.copy(source, tests / name)
        elif name != "testing_constants.py":
            raise FileNotFoundError(f"{source} is missing: --trl-tests must be TRL's tests/ folder")
    for name, changes in ADAPTATIONS.items():
        text = (tests / name).read_text()
        for test, line, replacement, _ in changes:
            if text.count(line) != 1:
                raise RuntimeError(
                    f"{name}: the line adapted for {test} ({line.strip()!r}) is not there exactly once; read the "
                    "test again and update trl_dropin.__main__.ADAPTATIONS"
                )
            text = text.replace(line, replacement)
        (tests / name).write_text(text)
    return tests


def run(work: Path, mode: str, pytest_args: list[str], timeout: int) -> tuple[Path, float]:
    """Run the copied tests under `mode` (stock, off or on); return the junit report and the wall time."""
    report = work / f"report-{mode}.xml"
    command = [sys.executable, "-m", "pytest", "tests/test_grpo_trainer.py", "-v", "-p", "no:cacheprovider"]
    command += ["-p", "trl_dropin.plugin", "-o", "addopts=", f"--timeout={timeout}", f"--junitxml={report}", "-rfE"]
    env = {
        **os.environ,
        "TRL_DROPIN_TRAINER": mode,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(work / "hf-home"),
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(work), str(EXPERIMENTS), str(ROOT), os.environ.get("PYTHONPATH")) if p
        ),
    }
    start = time.perf_counter()
    with open(work / f"log-{mode}.txt", "w") as log:  # one line per test as it ends (-v): progress, partial results
        subprocess.run(command + pytest_args, cwd=work, env=env, check=False, stdout=log, stderr=subprocess.STDOUT)
    return report, time.perf_counter() - start


def outcomes(report: Path) -> dict[str, tuple[str, str]]:
    """`{test id: (outcome, message)}` from a junit report; outcome is passed, failed, error, skipped or xfailed."""
    result = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname').split('.')[-1]}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                message = child.get("message") or ""
                outcome = {"failure": "failed", "error": "error"}.get(child.tag, "skipped")
                if child.tag == "skipped" and child.get("type") == "pytest.xfail":
                    outcome = "xfailed"
                break
        result[name] = (outcome, message)
    return result


def summary(result: dict[str, tuple[str, str]]) -> str:
    kinds = ("passed", "failed", "error", "skipped", "xfailed")
    counts = {kind: sum(1 for outcome, _ in result.values() if outcome == kind) for kind in kinds}
    return ", ".join(f"{n} {kind}" for kind, n in counts.items() if n or kind in ("passed", "failed", "skipped"))


def compare(work: Path, overlays: Sequence[Path] = ()) -> int:
    """Print each run's counts, the skips, stock's failures and the off and on differences; return the exit status.

    Each folder of `overlays` holds reports of a re-run of some tests (after a fix to the adaptation): their outcomes
    replace those of the same tests in `work`'s reports, and the replaced tests are listed.
    """
    results = {mode: outcomes(work / f"report-{mode}.xml") for mode in RUNS if (work / f"report-{mode}.xml").exists()}
    for overlay in overlays:
        for mode, result in results.items():
            if (overlay / f"report-{mode}.xml").exists():
                rerun = outcomes(overlay / f"report-{mode}.xml")
                result.update(rerun)
                print(f"{mode}: {len(rerun)} test(s) re-run in {overlay}: {', '.join(sorted(rerun))}")
    status = 0
    for mode, result in results.items():
        print(f"{mode}: {summary(result)}")
    if "stock" in results:
        stock = results["stock"]
        broken = sorted(n for n, (o, _) in stock.items() if o in ("failed", "error"))
        print(f"stock failures on tests it runs: {len(broken)}")
        for name in broken:
            print(f"  {name}: {stock[name][0]}: {stock[name][1][:200]}")
        status |= bool(broken)
        reasons: dict[str, list[str]] = {}
        for name, (outcome, message) in sorted(stock.items()):
            if outcome == "skipped":
                reasons.setdefault(message, []).append(name)
        print(f"skipped by stock: {sum(len(v) for v in reasons.values())}")
        for message, names in reasons.items():
            allowed = ALLOWED_SKIP.search(message) is not None
            print(f"  {len(names)} x {message}" + ("" if allowed else "  <- NOT AN ALLOWED SKIP: " + ", ".join(names)))
            status |= not allowed
        for mode in ("off", "on"):
            if mode not in results:
                continue
            other = results[mode]
            diff = sorted(
                n for n in stock.keys() | other.keys() if stock.get(n, ("absent",))[0] != other.get(n, ("absent",))[0]
            )
            print(f"{mode} differs from stock on {len(diff)} test(s)")
            for name in diff:
                line = (
                    f"  {name}: stock {stock.get(name, ('absent',))[0]}, {mode} {other.get(name, ('absent', ''))[0]}"
                )
                if mode == "on":
                    known = explain(name, other.get(name, ("", ""))[1])
                    line += f"\n      {known.reason} (ours: {known.our_test})" if known else "\n      UNDOCUMENTED"
                    line += f"\n      {other.get(name, ('', ''))[1][:200]}"
                    status |= known is None
                else:
                    line += f": {other.get(name, ('', ''))[1][:200]}"
                    status = 1
                print(line)
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trl-tests", type=Path, help="TRL's tests/ folder (not needed with --compare)")
    parser.add_argument("--work", type=Path, required=True, help="scratch folder outside the repository")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated subset of stock,off,on")
    parser.add_argument("--compare", action="store_true", help="only compare the saved reports")
    parser.add_argument(
        "--overlay",
        type=Path,
        action="append",
        default=[],
        help="with --compare: a --work folder of a re-run of some tests, whose outcomes replace theirs (repeatable)",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=3600,
        help="seconds per test before pytest-timeout fails it (a hang guard: on a shared 2-core machine under load a "
        "training test of TRL's took over 900 s)",
    )
    args, pytest_args = parser.parse_known_args()
    pytest_args = [a for a in pytest_args if a != "--"]
    work = args.work.resolve()
    if not args.compare:
        if args.trl_tests is None:
            parser.error("--trl-tests is required unless --compare")
        if importlib.util.find_spec("jmespath") is None:
            parser.error("TRL's tool-calling tests need jmespath: pip install -e '.[test]' (or pip install jmespath)")
        from .fixtures import build_fixtures

        copy_tests(args.trl_tests.resolve(), work)
        build_fixtures(work / "trl-internal-testing")
        for mode in args.runs.split(","):
            if mode not in RUNS:
                parser.error(f"unknown run {mode!r}")
            report, seconds = run(work, mode, pytest_args, args.timeout)
            print(f"{mode}: {summary(outcomes(report))} in {seconds:.0f} s", flush=True)
    sys.exit(compare(work, [overlay.resolve() for overlay in args.overlay]))


if __name__ == "__main__":
    main()
