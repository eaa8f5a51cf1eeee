"""The command line `codapo-analyze` (or `python -m codapo_trl.analysis`): sample and score checkpoints, redraw a
saved analysis (`--replot`), or plot a run's training logs only (`--logs-only`)."""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from codapo_trl.analysis.plots import plot_training_accuracy, plot_training_dynamics, save_figure
from codapo_trl.analysis.results import GROUP_BY, TABLES_FILE, AnalysisResult
from codapo_trl.analysis.run import analyze_checkpoints
from codapo_trl.analysis.training_logs import find_training_logs
from codapo_trl.command_line import configure_logging, timestamped_output_dir, usage_error
from codapo_trl.data import SYSTEM_PROMPT


__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `codapo-analyze`."""
    parser = argparse.ArgumentParser(
        prog="codapo-analyze",
        description="Training dynamics of checkpoints as in the CoDaPO paper (Section 3, Appendix B): sample fixed "
        "questions per level at every checkpoint, and report accuracy, confidence, advantages and per-trajectory "
        "gradient norms per level (tables and figures). With --logs-only, plot a run's logged dynamics only.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "checkpoints",
        nargs="*",
        help="run directories (all their checkpoint-<step> folders) and/or checkpoint folders",
    )
    parser.add_argument("--base", default=None, help="the model training started from, analysed as step 0")
    parser.add_argument(
        "--steps", type=int, nargs="+", default=None, help="analyse only these steps (paper: 0 60 240)"
    )
    data = parser.add_argument_group("questions")
    data.add_argument("--dataset", default="math500", help="registry name (math500, math, arithmetic) or local file")
    data.add_argument("--split", default="test", help="split of a registry dataset")
    data.add_argument("--levels", nargs="+", default=None, help="levels to analyse (default: all)")
    data.add_argument("--questions-per-level", type=int, default=100, help="fixed questions per level (paper: 100)")
    data.add_argument("--group-by", choices=GROUP_BY, default="level", help="table/figure columns")
    data.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="system turn of the prompts")
    data.add_argument("--no-system-prompt", action="store_true", help="no system turn")
    sampling = parser.add_argument_group("sampling")
    sampling.add_argument("--samples-per-question", type=int, default=20, help="trajectories per question (paper: 20)")
    sampling.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (use the training one)")
    sampling.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling mass")
    sampling.add_argument("--max-new-tokens", type=int, default=3072, help="longest trajectory")
    sampling.add_argument("--seed", type=int, default=0, help="seed of the question selection and of the samples")
    sampling.add_argument("--batch-size", type=int, default=32, help="sequences per generate call (transformers)")
    sampling.add_argument("--backend", choices=("auto", "transformers", "vllm"), default="auto")
    sampling.add_argument("--dtype", default="auto", help="auto (bf16 on GPU, else fp32), float32, bfloat16")
    sampling.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    sampling.add_argument("--tokenizer", default=None, help="tokenizer to use instead of each checkpoint's")
    sampling.add_argument("--vllm-kwargs", type=json.loads, default=None, help="extra vllm.LLM arguments as JSON")
    grads = parser.add_argument_group("gradients")
    grads.add_argument(
        "--grad-params",
        default="all",
        help="parameters of the per-trajectory gradient norm: all (full gradient), lm_head (output projection only; "
        "cheap, for CPU), last_layer (last transformer block), none, or comma-separated regexes of parameter names",
    )
    logs = parser.add_argument_group("training logs")
    logs.add_argument(
        "--trainer-state", type=Path, default=None, help="trainer_state.json (default: found in the run)"
    )
    logs.add_argument("--question-log", type=Path, default=None, help="per-question JSONL (default: found in the run)")
    logs.add_argument("--logs-only", action="store_true", help="only plot the training logs (no sampling)")
    logs.add_argument(
        "--replot", type=Path, default=None, metavar="DIR", help="redraw the tables and figures of a saved analysis"
    )
    output = parser.add_argument_group("output")
    output.add_argument("--output-dir", type=Path, default=None, help="default: outputs/analysis/<run>-<time>")
    output.add_argument("--no-plots", action="store_true", help="no figures")
    output.add_argument("--no-progress", action="store_true", help="no progress bars")
    return parser


def _default_output_dir(name: str) -> Path:
    return timestamped_output_dir("analysis", name, fallback="run")


def _error(message: str) -> int:
    return usage_error("codapo-analyze", message)


def _logs_only(args: argparse.Namespace) -> int:
    state, log = args.trainer_state, args.question_log
    for path in args.checkpoints:
        found = find_training_logs(path)
        state = state or (Path(found["trainer_state"]) if found["trainer_state"] else None)
        log = log or (Path(found["question_log"]) if found["question_log"] else None)
    if state is None and log is None:
        return _error("--logs-only needs a run directory, --trainer-state or --question-log.")
    out = args.output_dir or _default_output_dir(str(args.checkpoints[0] if args.checkpoints else state or log))
    written = []
    if state is not None:
        plot_training_dynamics(state, out)
        written.append("training_dynamics")
    if log is not None:
        figure = plot_training_accuracy(log)
        save_figure(figure, out, "training_accuracy")
        written.append("training_accuracy")
    from rich.console import Console

    Console().print(f"Figures {', '.join(written)} (PNG and SVG) in {out}/", markup=False, highlight=False)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run `codapo-analyze` with `argv` (default: the command line); returns the exit status (0, or 2 on errors)."""
    import matplotlib

    parser = build_parser()
    args = parser.parse_args(argv)
    matplotlib.use("Agg")  # a command that writes figure files: no window, whatever the environment's default
    if not logging.getLogger().handlers:
        configure_logging()
    try:
        if args.logs_only:
            return _logs_only(args)
        if args.replot is not None:
            result = AnalysisResult.load(args.replot)
            output_dir = args.output_dir or args.replot
            result.save(output_dir, plots=not args.no_plots, records=output_dir != args.replot)
            _report(result, output_dir)
            return 0
        if not args.checkpoints and args.base is None:
            return _error("give checkpoints (a run directory or checkpoint folders) and/or --base.")
        name = str(args.checkpoints[0]) if args.checkpoints else str(args.base)
        output_dir = args.output_dir or _default_output_dir(name)
        result = analyze_checkpoints(
            args.checkpoints,
            args.dataset,
            base=args.base,
            steps=args.steps,
            split=args.split,
            levels=args.levels,
            questions_per_level=args.questions_per_level,
            samples_per_question=args.samples_per_question,
            temperature=args.temperature,
            top_p=args.top_p,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            system_prompt=None if args.no_system_prompt else args.system_prompt,
            grad_params=args.grad_params,
            group_by=args.group_by,
            batch_size=args.batch_size,
            backend=args.backend,
            dtype=args.dtype,
            device=args.device,
            tokenizer=args.tokenizer,
            vllm_kwargs=args.vllm_kwargs,
            output_dir=output_dir,
            trainer_state=args.trainer_state,
            question_log=args.question_log,
            plots=not args.no_plots,
            progress=not args.no_progress,
        )
    except (ValueError, FileNotFoundError) as err:
        return _error(str(err))
    _report(result, output_dir)
    return 0


def _report(result: AnalysisResult, output_dir: Path) -> None:
    """A compact console summary: one row per checkpoint and level (the paper-layout tables are in tables.md)."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console()
    with_grads = result.config.get("grad_params") != "none"
    accuracy, confidence = result.accuracy(), result.table("confidence")
    gradient = result.table("grad_norm") if with_grads else {}

    def short(value: float) -> str:
        return "–" if math.isnan(value) else f"{value:.3g}"

    table = Table(title=f"Per checkpoint and {result.group_by}", box=box.SIMPLE, title_justify="left")
    columns = ["step", "level" if result.group_by == "level" else "bin", "n", "acc %", "conf mean", "conf med"]
    if with_grads:
        columns += ["grad mean", "grad med"]
    for name in columns:
        table.add_column(name, justify="right", no_wrap=True)
    for step in result.steps:
        for group in result.groups:
            cell, conf = accuracy[step][group], confidence[step][group]
            acc = cell["accuracy"]
            row = [
                str(step),
                str(group),
                str(cell["num_trajectories"]),
                "–" if math.isnan(acc) else f"{100 * acc:.1f}",
            ]
            row += [short(conf["mean"]), short(conf["median"])]
            if with_grads:
                row += [short(gradient[step][group]["mean"]), short(gradient[step][group]["median"])]
            table.add_row(*row)
    console.print(table)
    total = result.timing.get("total_s", math.nan)
    console.print(
        f"{len(result.records)} trajectories from {len(result.checkpoints)} checkpoint(s) in {total:.1f} s; "
        f"gradient norms over {result.config.get('grad_params_description')}. Tables in the paper's layout: "
        f"{output_dir / TABLES_FILE}; files and figures in {output_dir}/"
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
