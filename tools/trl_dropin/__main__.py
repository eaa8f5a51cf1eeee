"""Run TRL's own GRPO trainer tests offline: stock TRL, CoDaPO with weighting and sampling off, CoDaPO with defaults.

    python -m trl_dropin --trl-tests /path/to/trl/tests --work /tmp/dropin        # all three runs, then compare
    python -m trl_dropin --trl-tests ... --work ... --runs stock -- -k test_train_with_tools
    python -m trl_dropin --work /tmp/dropin --compare                             # compare saved reports
    python -m trl_dropin --trl-tests ... --work ... --list-skips                   # the skips collection gives

(with `tools/` on `PYTHONPATH`; `make dropin TRL_TESTS=...` does this). TRL's test files are copied from
`--trl-tests` into `--work/tests` (never into this repository); the stand-ins for the hub's models and datasets are
built once under `--work/trl-internal-testing`, and pytest runs from `--work` with the hub offline, so that the
tests' hub ids resolve to those folders. Exit status: 1 when stock TRL fails or errors on a test it runs, when
CoDaPO off differs from stock on any test, when a test is skipped other than as `skips.ALLOWED_SKIPS` lists it, or
when a report is not the finished report of its run (each run removes its report first and records pytest's exit
status beside it, which the report must agree with); CoDaPO-on differences are printed with their documented
reasons (`differences.py`, keyed by test, exception and message); an undocumented one fails the check.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from .differences import explain
from .records import STOCK_LOSS_TESTS, base_test, mismatches, read
from .skips import ALLOWED_SKIPS, unexpected_skips


TOOLS = Path(__file__).resolve().parents[1]
ROOT = TOOLS.parent
TEST_FILES = ("__init__.py", "conftest.py", "testing_utils.py", "testing_constants.py", "test_grpo_trainer.py")
RUNS = ("stock", "off", "stockloss", "on")
FINISHED = (0, 1)
"""pytest's exit statuses of a run that finished: all passed, or some failed (2: interrupted, 3: internal error,
4: usage error, 5: no test collected)."""


# Assertions of the copied tests that check an older TRL's (or PEFT's) implementation rather than behaviour, adapted in
# the copy (never in TRL's checkout; docs/dropin.md lists each): `{file: [(test, exact line, replacement, why)]}`. The
# line must occur exactly once in that test's body; a line that is no longer there fails the copy, so a new TRL
# release's tests are read again rather than adapted blindly.
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
        ),
        (
            "test_train_moe_peft_model",
            '        assert "ref" not in trainer.model.peft_config\n',
            "        # adapted (codapo-trl make dropin): with PEFT >= 0.20 (peft#3350) TRL 1.16 adds a frozen 'ref' copy\n"
            "        # of the adapter beside a `target_parameters` LoRA, and the reference log probs come from it\n"
            '        assert "ref" in trainer.model.peft_config\n'
            "        for n, param in trainer.model.named_parameters():\n"
            '            if ".ref." in n:\n'
            '                assert not param.requires_grad, f"{n} of the ref adapter is trainable"\n'
            '                torch.testing.assert_close(param, trainer.model.get_parameter(n.replace(".ref.", ".default.")))\n',
            "the test was written for PEFT 0.17-0.19 (peft#3340: one adapter only with `target_parameters`, so no "
            "'ref' adapter and reference log probs with adapters disabled); with PEFT 0.21 installed, TRL 1.16 adds "
            "the 'ref' adapter, so the copy asserts that path instead: a frozen 'ref' adapter equal to the trained one "
            "at the start",
        ),
        (
            "test_train_moe_peft_model",
            '            elif "base_layer" not in n:  # We expect the peft params to be different (except for the base layer)\n',
            "            elif \".ref.\" in n:  # adapted (codapo-trl make dropin): the frozen 'ref' adapter never changes\n"
            '                torch.testing.assert_close(param, new_param, msg=f"Parameter {n} has changed.")\n'
            '            elif "base_layer" not in n:  # We expect the peft params to be different (except for the base layer)\n',
            "the 'ref' adapter's parameters are frozen, so the copy asserts that they did not change instead of "
            "expecting every non-base parameter to change",
        ),
    ]
}


def _test_body(text: str, test: str) -> tuple[int, int]:
    """Where the body of the test function `test` lies in a test module's text: from its `def` to the next
    definition or decorator at the same indentation (or the end)."""
    start = text.find(f"    def {test}(")
    if start < 0:
        raise RuntimeError(f"{test} is not in the copied tests; read them again and update trl_dropin ADAPTATIONS")
    ends = [i for i in (text.find(f"\n{p}", start + 1) for p in ("    def ", "    @", "class ")) if i >= 0]
    return start, min(ends, default=len(text))


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
            start, end = _test_body(text, test)
            body = text[start:end]
            if body.count(line) != 1:
                raise RuntimeError(
                    f"{name}: the line adapted in {test} ({line.strip()!r}) is not there exactly once; read the "
                    "test again and update trl_dropin.__main__.ADAPTATIONS"
                )
            text = text[:start] + body.replace(line, replacement) + text[end:]
        (tests / name).write_text(text)
    return tests


def _environment(work: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(work / "hf-home"),
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONPATH": os.pathsep.join(
            p for p in (str(work), str(TOOLS), str(ROOT), os.environ.get("PYTHONPATH")) if p
        ),
        **extra,
    }


def status_path(report: Path) -> Path:
    """Where the exit status of the run that wrote `report` is recorded (`report-on.xml` -> `report-on.status.json`)."""
    return report.with_suffix(".status.json")


def record_path(work: Path, mode: str) -> Path:
    """The per-step records (`records.py`) of the run `mode` in `work`."""
    return work / f"record-{mode}.jsonl"


def run(work: Path, mode: str, pytest_args: list[str], timeout: int) -> tuple[Path, float]:
    """Run the copied tests under `mode` (stock, off, stockloss or on); return the junit report and the wall time.

    The stockloss run trains only [`records.STOCK_LOSS_TESTS`]. The previous report, its status and its per-step
    records are removed first, and pytest's exit status is recorded beside the new report ([`status_path`]), so that
    a killed or failed run never leaves an earlier run's report to be compared.
    """
    report = work / f"report-{mode}.xml"
    for stale in (report, status_path(report), record_path(work, mode)):
        stale.unlink(missing_ok=True)
    module = "tests/test_grpo_trainer.py"
    selection = [f"{module}::{test}" for test in STOCK_LOSS_TESTS] if mode == "stockloss" else [module]
    command = [sys.executable, "-m", "pytest", *selection, "-v", "-p", "no:cacheprovider"]
    command += ["-p", "trl_dropin.plugin", "-o", "addopts=", f"--timeout={timeout}", f"--junitxml={report}", "-rfE"]
    start = time.perf_counter()
    with open(work / f"log-{mode}.txt", "w") as log:  # one line per test as it ends (-v): progress, partial results
        completed = subprocess.run(
            command + pytest_args,
            cwd=work,
            env=_environment(work, TRL_DROPIN_TRAINER=mode, TRL_DROPIN_RECORD=str(record_path(work, mode))),
            check=False,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    seconds = time.perf_counter() - start
    status = {"exit_status": completed.returncode, "seconds": round(seconds, 1), "pytest_args": pytest_args}
    status_path(report).write_text(json.dumps(status))
    return report, seconds


def report_problem(report: Path) -> str | None:
    """Why `report` is not the finished report of its run, or `None`: it or its recorded exit status is missing,
    pytest did not finish (exit status other than 0 or 1), or the report disagrees with the status (failures with
    status 0, none with status 1)."""
    status_file = status_path(report)
    if not report.exists():
        return f"{report.name} is missing"
    if not status_file.exists():
        return f"{status_file.name} is missing: {report.name} is not known to come from a finished run"
    status = json.loads(status_file.read_text()).get("exit_status")
    if status not in FINISHED:
        return f"pytest exited with status {status} (not finished: 2 interrupted, 3 internal, 4 usage, 5 no tests)"
    failing = sum(outcome in ("failed", "error") for outcome, _ in outcomes(report).values())
    if (status == 0) != (failing == 0):
        return f"{report.name} has {failing} failure(s) but pytest exited with status {status}"
    return None


def list_skips(work: Path) -> dict[str, str]:
    """`{test id: reason}` of the copied tests that their markers (and the plugin's) skip, from a collection only."""
    out = work / "skips.jsonl"
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", "tests/test_grpo_trainer.py", "--collect-only", "-q"]
    command += ["-p", "no:cacheprovider", "-p", "trl_dropin.plugin", "-o", "addopts="]
    subprocess.run(
        command,
        cwd=work,
        env=_environment(work, TRL_DROPIN_SKIPS_OUT=str(out)),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return dict(json.loads(line) for line in out.read_text().splitlines())


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
    for mode in results:
        reports = [work / f"report-{mode}.xml"]
        reports += [o / f"report-{mode}.xml" for o in overlays if (o / f"report-{mode}.xml").exists()]
        for report in reports:
            problem = report_problem(report)
            if problem is not None:
                print(f"{mode}: REPORT NOT USABLE ({report.parent}): {problem}")
                status = 1
    for mode, result in results.items():
        print(f"{mode}: {summary(result)}")
    if "stock" in results:
        stock = results["stock"]
        broken = sorted(n for n, (o, _) in stock.items() if o in ("failed", "error"))
        print(f"stock failures on tests it runs: {len(broken)}")
        for name in broken:
            print(f"  {name}: {stock[name][0]}: {stock[name][1][:200]}")
        status |= bool(broken)
        skipped = {name: message for name, (outcome, message) in stock.items() if outcome == "skipped"}
        reasons: dict[str, int] = {}
        for message in skipped.values():
            reasons[message] = reasons.get(message, 0) + 1
        print(f"skipped by stock: {len(skipped)}")
        for message, count in reasons.items():
            print(f"  {count} x {message}")
        for line in unexpected_skips(skipped, ALLOWED_SKIPS):
            print(f"  NOT AN ALLOWED SKIP: {line}")
            status = 1
        for mode in ("off", "stockloss", "on"):
            if mode not in results:
                continue
            other = results[mode]
            names = stock.keys() | other.keys()
            if mode == "stockloss":  # it runs these tests only
                names = {n for n in names if base_test(n) in STOCK_LOSS_TESTS}
            diff = sorted(n for n in names if stock.get(n, ("absent",))[0] != other.get(n, ("absent",))[0])
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
        if "stockloss" in results:
            stockloss = read(record_path(work, "stockloss"))
            problems = mismatches(read(record_path(work, "stock")), stockloss, STOCK_LOSS_TESTS)
            steps = sum(len(rows) for rows in stockloss.values())
            print(
                f"stockloss: per-step losses and gradients against stock, {steps} training steps: {len(problems)} mismatch(es)"
            )
            for problem in problems:
                print(f"  {problem}")
            status |= bool(problems)
    return status


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trl-tests", type=Path, help="TRL's tests/ folder (not needed with --compare)")
    parser.add_argument("--work", type=Path, required=True, help="scratch folder outside the repository")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated subset of stock,off,stockloss,on")
    parser.add_argument("--compare", action="store_true", help="only compare the saved reports")
    parser.add_argument(
        "--list-skips",
        action="store_true",
        help="collect the copied tests (nothing runs) and print the (test id, reason) pairs they skip, for ALLOWED_SKIPS",
    )
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
        if args.list_skips:
            for test, reason in sorted(list_skips(work).items()):
                print(f"    {test!r}: {reason!r},")
            return
        build_fixtures(work / "trl-internal-testing")
        for mode in args.runs.split(","):
            if mode not in RUNS:
                parser.error(f"unknown run {mode!r}")
            report, seconds = run(work, mode, pytest_args, args.timeout)
            print(f"{mode}: {summary(outcomes(report))} in {seconds:.0f} s", flush=True)
    sys.exit(compare(work, [overlay.resolve() for overlay in args.overlay]))


if __name__ == "__main__":
    main()
