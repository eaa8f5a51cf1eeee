"""Tests of the training-dynamics analysis (`codapo_trl.analysis`, its figures in `codapo_trl.analysis.plots`): the
statistics tables, advantages, per-trajectory gradient norms against hand computations, the end-to-end command on the tiny model
with two "checkpoints", the figures (their panels and titles), the training-log figures and the errors.

Offline: the tiny random model of `tests/tiny.py` and a leveled JSONL fixture written here.
"""

import hashlib
import json
import math
import shutil
from pathlib import Path

import matplotlib


matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from scipy import stats  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from codapo_trl.analysis import (  # noqa: E402
    STATISTICS,
    AnalysisResult,
    Checkpoint,
    Question,
    TrajectoryRecord,
    analyze_checkpoints,
    find_checkpoints,
    find_training_logs,
    group_advantages,
    main,
    plot_training_dynamics,
    resolve_grad_params,
    select_questions,
    statistics_table,
    trajectory_statistics,
)
from codapo_trl.analysis import plots as analysis_plots  # noqa: E402
from codapo_trl.analysis.scoring import grade_groups, group_records  # noqa: E402
from codapo_trl.evaluation.evaluate import QuestionRecord, SampleRecord  # noqa: E402
from codapo_trl.evaluation.generation import (  # noqa: E402
    Completion,
    GenerationRequest,
    SamplingConfig,
    TransformersGenerator,
)
from codapo_trl.rewards import GradeResult, configure_grader  # noqa: E402


RECORD_KEYS = {
    "step",
    "checkpoint",
    "level",
    "question_id",
    "question_index",
    "sample",
    "correct",
    "graded",
    "reward",
    "advantage",
    "confidence",
    "log_confidence",
    "grad_norm",
    "grad_norm_weighted",
    "group_accuracy",
    "difficulty",
    "difficulty_bin",
    "num_tokens",
    "finish_reason",
    "extracted",
    "completion",
}


@pytest.fixture(scope="module", autouse=True)
def grader():
    configure_grader(num_workers=2, timeout=2.0)
    yield
    configure_grader(num_workers=2, timeout=2.0)  # stops the workers


@pytest.fixture
def leveled_file(tmp_path):
    rows = [
        {
            "id": f"L{level}-{i}",
            "question": f"What is {10 * level + i} + {i}?",
            "answer": str(10 * level + 2 * i),
            "level": level,
        }
        for level in (1, 2, 3)
        for i in range(4)
    ]
    path = tmp_path / "leveled.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def run_dir(tiny_model_dir, tmp_path):
    """A run directory with checkpoint-1 (a copy of the tiny model) and checkpoint-2 (its weights perturbed)."""
    run = tmp_path / "run"
    shutil.copytree(tiny_model_dir, run / "checkpoint-1")
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.5 * torch.randn_like(p))
    model.save_pretrained(run / "checkpoint-2")
    AutoTokenizer.from_pretrained(tiny_model_dir).save_pretrained(run / "checkpoint-2")
    return run


def fake_grade(predictions, golds, answer_types=None):
    """Right or wrong by a hash of the completion: a mix of both, so that advantages are not all zero."""
    return [GradeResult(hashlib.sha256(p.encode()).digest()[0] % 2 == 0, "x", g) for p, g in zip(predictions, golds)]


def synthetic_trainer_state(path, steps=12, codapo=False):
    rng = np.random.default_rng(0)
    history = []
    for step in range(1, steps + 1):
        entry = {"step": step, "loss": 0.1, "reward": step / steps}
        if codapo:
            entry["codapo/phase"] = float((step - 1) % 2)
        for b in range(1, 6):
            count = float(rng.integers(0, 8))
            entry[f"dynamics/bin{b}/count"] = count
            for name in ("confidence_correct", "confidence_incorrect", "token_weight", "clipped_frac"):
                entry[f"dynamics/bin{b}/{name}"] = None if count == 0 else float(rng.uniform(0, 1))
            entry[f"dynamics/bin{b}/advantage_positive"] = float(rng.uniform(0, 2))
            entry[f"dynamics/bin{b}/advantage_negative"] = float(-rng.uniform(0, 2))
        history.append(entry)
    history.append({"step": steps, "train_runtime": 12.0})
    path.write_text(json.dumps({"global_step": steps, "log_history": history}))
    return path


def write_question_log(path, steps=12):
    rows = []
    for step in range(1, steps + 1):
        for level in (1, 2, 3):
            rows.append(
                {
                    "step": step,
                    "phase": 0,
                    "question_id": f"q{level}",
                    "level": level,
                    "confidence": 0.5,
                    "difficulty": 0.5,
                    "value": None,
                    "selected": None,
                    "num_correct": min(4, step * (4 - level) // 4),
                    "num_generations": 4,
                }
            )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------------------------------------------------------------
# Statistics and advantages
# ---------------------------------------------------------------------------------------------------------------------


def test_statistics_tables_match_numpy_and_scipy():
    rng = np.random.default_rng(0)
    cells = {0: {1: rng.lognormal(size=200), 3: rng.uniform(size=50)}, 60: {1: rng.normal(size=30), 3: [2.0, np.nan]}}
    table = statistics_table(cells)
    for step, groups in cells.items():
        for group, values in groups.items():
            x = np.asarray(values, dtype=float)
            x = x[~np.isnan(x)]
            expected = {
                "min": x.min(),
                "max": x.max(),
                "mean": x.mean(),
                "std": x.std(),
                "median": np.median(x),
                "kurtosis": stats.kurtosis(x, fisher=True) if x.size > 1 else math.nan,
            }
            for name in STATISTICS:
                np.testing.assert_allclose(table[step][group][name], expected[name], rtol=1e-12, equal_nan=True)


def make_record(step, level, qid, sample, correct, confidence, grad):
    return TrajectoryRecord(
        step=step,
        checkpoint="c",
        level=level,
        question_id=qid,
        question_index=0,
        sample=sample,
        correct=correct,
        graded=True,
        reward=float(correct),
        advantage=0.0,
        confidence=confidence,
        log_confidence=math.log(confidence),
        grad_norm=grad,
        grad_norm_weighted=0.0,
        group_accuracy=0.5,
        difficulty=0.5,
        difficulty_bin=3,
        num_tokens=3,
        finish_reason="stop",
        extracted=None,
        completion="",
    )


def test_result_tables_are_laid_out_like_the_paper(tmp_path):
    rng = np.random.default_rng(1)
    records = [
        make_record(step, level, f"q{level}", i, bool(i % 2), float(rng.uniform(0.1, 1)), float(rng.lognormal()))
        for step in (0, 60)
        for level in (1, 3)
        for i in range(6)
    ]
    questions = [Question(0, f"q{level}", level, [], "", "1", "number") for level in (1, 3)]
    result = AnalysisResult(
        [Checkpoint(0, "base", "step 0 (base)"), Checkpoint(60, "c60", "step 60")],
        questions,
        records,
        config={"grad_params": "lm_head", "samples_per_question": 6},
    )
    table = result.table("confidence")
    values = [r.confidence for r in records if r.step == 60 and r.level == 3]
    assert table[60][3]["median"] == pytest.approx(np.median(values))
    markdown = result.format_table("grad_norm").splitlines()
    assert markdown[0] == (
        "| Gradient | Step 0 · Level 1 | Step 0 · Level 3 | Step 60 · Level 1 | Step 60 · Level 3 |"
    )
    assert [line.split(" | ")[0] for line in markdown[2:]] == [
        "| Minimum",
        "| Maximum",
        "| Mean",
        "| Std",
        "| Median",
        "| Kurtosis",
    ]
    paths = result.save(tmp_path, plots=False)
    csv_lines = paths["confidence_csv"].read_text().splitlines()
    assert csv_lines[0] == "confidence,step0/level1,step0/level3,step60/level1,step60/level3"
    assert [line.split(",")[0] for line in csv_lines[1:]] == list(STATISTICS)
    summary = json.loads(paths["summary"].read_text())
    assert summary["tables"]["confidence"]["60"]["3"]["median"] == pytest.approx(np.median(values))
    assert summary["accuracy"]["0"]["1"]["accuracy"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "rewards", [[1, 0, 0, 0], [1, 1, 1, 0, 0, 1, 0, 1], [1, 1, 1, 1], [0, 0, 0, 0, 0], [0.0, 1.0], [1, 0, 1, 1, 1, 1]]
)
def test_group_advantages_follow_trls_formula(rewards):
    r = torch.tensor(rewards, dtype=torch.float32)
    expected = (r - r.mean()) / (r.std() + 1e-4)  # TRL: Bessel std, 1e-4
    np.testing.assert_allclose(group_advantages(rewards), expected.numpy(), rtol=1e-5, atol=1e-6)
    g, mean = len(rewards), float(np.mean(rewards))
    if 0 < mean < 1:  # the paper's two-point values, with Bessel's sqrt(G / (G - 1)) on the std
        positive = (1 - mean) / (math.sqrt(mean * (1 - mean) * g / (g - 1)) + 1e-4)
        assert group_advantages(rewards).max() == pytest.approx(positive)
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages([1.0])


# ---------------------------------------------------------------------------------------------------------------------
# Per-trajectory confidence and gradient norms
# ---------------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


def hand_mean_logp(model, prompt, completion, temperature):
    ids = torch.tensor([prompt + completion])
    logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1] / temperature
    return torch.log_softmax(logits, dim=-1).gather(-1, torch.tensor(completion)[:, None]).mean()


def test_gradient_norm_of_one_trajectory_matches_autograd(tiny):
    model, tokenizer = tiny
    prompt = tokenizer("<|im_start|>user\nWhat is 1 + 2?<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    completion = tokenizer("The answer is \\boxed{3}.")["input_ids"] + [tokenizer.eos_token_id]
    temperature = 0.7

    # all parameters: the norm of the full gradient of the mean log-prob, computed separately
    model.zero_grad()
    s = hand_mean_logp(model, prompt, completion, temperature)
    s.backward()
    full = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())).item()
    mean_logp, norm = trajectory_statistics(
        model, prompt, completion, temperature=temperature, target=resolve_grad_params(model, "all")
    )
    assert mean_logp == pytest.approx(s.item(), rel=1e-5)
    assert norm == pytest.approx(full, rel=1e-4)
    assert all(p.requires_grad for p in model.parameters())  # restored

    # a subset by regex, and the last block: the same gradient restricted to those tensors
    names = dict(model.named_parameters())
    subset = sum((names[n].grad.double() ** 2).sum() for n in names if "layers.1." in n).sqrt().item()
    for spec in ("last_layer", r"layers\.1\."):
        target = resolve_grad_params(model, spec)
        assert target.names and all("layers.1." in n for n in target.names)
        assert trajectory_statistics(model, prompt, completion, temperature=temperature, target=target)[1] == (
            pytest.approx(subset, rel=1e-4)
        )
    model.zero_grad()

    # lm_head: the closed form (1/n) sum_t (onehot(o_t) - softmax(z_t / T)) h_t^T / T, h the last hidden states
    with torch.no_grad():
        hidden = model.model(input_ids=torch.tensor([prompt + completion])).last_hidden_state[0, len(prompt) - 1 : -1]
        probs = torch.softmax(model.lm_head(hidden) / temperature, dim=-1)
    onehot = torch.nn.functional.one_hot(torch.tensor(completion), probs.shape[-1]).float()
    closed_form = ((onehot - probs).T @ hidden / (temperature * len(completion))).norm().item()
    target = resolve_grad_params(model, "lm_head")
    assert target.names == ("lm_head.weight",) and target.num_parameters == model.lm_head.weight.numel()
    head_logp, head_norm = trajectory_statistics(model, prompt, completion, temperature=temperature, target=target)
    assert head_logp == pytest.approx(s.item(), rel=1e-5)
    assert head_norm == pytest.approx(closed_form, rel=1e-4)

    # the advantage-weighted norm is |A| times the unweighted one
    model.zero_grad()
    (-1.5 * hand_mean_logp(model, prompt, completion, temperature)).backward()
    weighted = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters())).item()
    assert weighted == pytest.approx(1.5 * full, rel=1e-5)
    model.zero_grad()

    # no target: confidence only
    assert trajectory_statistics(model, prompt, completion, temperature=temperature)[1] is None
    with pytest.raises(ValueError, match="No parameter name matches"):
        resolve_grad_params(model, "no_such_module")


def test_transformers_backend_returns_token_ids(tiny):
    model, tokenizer = tiny
    generator = TransformersGenerator(model, tokenizer, batch_size=4)
    requests = [GenerationRequest(f"t/{i}", [{"role": "user", "content": f"What is {i} + 1?"}]) for i in range(2)]
    out = generator.generate(requests, SamplingConfig(num_samples=3, temperature=1.0, max_new_tokens=12, seed=0))
    for samples in out:
        for c in samples:
            assert len(c.token_ids) == c.num_tokens > 0
            assert tokenizer.decode(c.token_ids, skip_special_tokens=True) == c.text
            assert (c.token_ids[-1] == tokenizer.eos_token_id) == (c.finish_reason == "stop")


# ---------------------------------------------------------------------------------------------------------------------
# End to end
# ---------------------------------------------------------------------------------------------------------------------


def test_analyze_checkpoints_end_to_end(run_dir, tiny_model_dir, leveled_file, tmp_path, monkeypatch):
    monkeypatch.setattr("codapo_trl.rewards.grade_answers", fake_grade)
    synthetic_trainer_state(run_dir / "trainer_state.json")
    write_question_log(run_dir / "questions.jsonl")
    out = tmp_path / "out"
    result = analyze_checkpoints(
        [run_dir],
        leveled_file,
        base=tiny_model_dir,
        levels=[1, 3],
        questions_per_level=2,
        samples_per_question=3,
        max_new_tokens=10,
        grad_params="lm_head",
        output_dir=out,
        progress=False,
    )
    assert result.steps == [0, 1, 2]
    assert [c.label for c in result.checkpoints] == ["step 0 (base)", "step 1", "step 2"]
    assert result.training_logs == {
        "trainer_state": str(run_dir / "trainer_state.json"),
        "question_log": str(run_dir / "questions.jsonl"),
    }
    rows = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * 2 * 2 * 3 and all(set(row) == RECORD_KEYS for row in rows)
    # the same questions at every checkpoint, levels as asked
    questions = {s: sorted({(r["level"], r["question_id"]) for r in rows if r["step"] == s}) for s in (0, 1, 2)}
    assert questions[0] == questions[1] == questions[2] and {q[0] for q in questions[0]} == {1, 3}
    # checkpoint-1 is the base model: the same per-sample random streams give the same trajectories
    assert [r["completion"] for r in rows if r["step"] == 0] == [r["completion"] for r in rows if r["step"] == 1]
    assert [r["completion"] for r in rows if r["step"] == 2] != [r["completion"] for r in rows if r["step"] == 1]
    for r in rows:
        assert 0 < r["confidence"] <= 1 and r["confidence"] == pytest.approx(math.exp(r["log_confidence"]))
        assert r["grad_norm"] > 0 and r["grad_norm_weighted"] == pytest.approx(abs(r["advantage"]) * r["grad_norm"])
        assert r["difficulty"] == pytest.approx(1 - r["group_accuracy"]) and 1 <= r["difficulty_bin"] <= 5
    for step in (0, 1, 2):
        for _, qid in questions[step]:
            group = sorted(
                (r for r in rows if r["step"] == step and r["question_id"] == qid), key=lambda r: r["sample"]
            )
            assert [r["sample"] for r in group] == [0, 1, 2]
            expected = group_advantages([float(r["correct"]) for r in group])
            np.testing.assert_allclose([r["advantage"] for r in group], expected, rtol=1e-9)
    assert {r["correct"] for r in rows} == {True, False}

    for name in (
        "summary.json",
        "tables.md",
        "accuracy.csv",
        "confidence_stats.csv",
        "grad_norm_stats.csv",
        "grad_norm_weighted_stats.csv",
        "advantage_stats.csv",
    ):
        assert (out / name).stat().st_size > 0, name
    for stem in ("confidence_advantage", "gradient_norms", "gradient_norms_weighted", "accuracy", "training_dynamics"):
        for suffix in (".png", ".svg"):
            assert (out / f"{stem}{suffix}").stat().st_size > 1000, stem + suffix
    tables = (out / "tables.md").read_text()
    assert "| Confidence | Step 0 · Level 1 | Step 0 · Level 3 | Step 1 · Level 1 |" in tables
    assert "## Gradient (advantage-weighted)" in tables
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["config"]["grad_params"] == "lm_head"
        and "lm_head.weight" in summary["config"]["grad_params_description"]
    )
    assert summary["questions"].keys() == {"1", "3"} and all(len(v) == 2 for v in summary["questions"].values())

    # the figures: one panel per checkpoint and level
    figure = analysis_plots.plot_confidence_advantage(result)
    assert len(figure.axes) == 3 * 3 * 2  # scatter + two marginals per panel
    titles = [ax.get_title() for ax in figure.axes if ax.get_title()]
    assert titles == [f"{c} · Level {lvl}" for c in ("step 0 (base)", "step 1", "step 2") for lvl in (1, 3)]
    scatter_axes = [ax for ax in figure.axes if ax.get_ylabel() == "confidence"]
    assert len(scatter_axes) == 3  # first column
    labels = {t.get_text() for t in figure.legends[0].get_texts()}
    assert labels == {"correct", "incorrect"}
    plt.close(figure)
    for weighted in (False, True):
        figure = analysis_plots.plot_gradient_norms(result, weighted=weighted)
        assert len(figure.axes) == 3 * 2
        assert figure.axes[0].get_title() == "step 0 (base) · Level 1" and figure.axes[0].get_xscale() == "log"
        plt.close(figure)
    figure = analysis_plots.plot_accuracy(
        result, question_log=run_dir / "questions.jsonl", trainer_state=run_dir / "trainer_state.json"
    )
    assert [ax.get_title() for ax in figure.axes] == [
        "Sampled checkpoints",
        "Training rollouts (question log)",
        "Training questions per difficulty bin",
    ]
    assert len(figure.axes[0].get_lines()) == 2  # one curve per level
    plt.close(figure)


def test_group_by_difficulty_and_no_gradients(run_dir, leveled_file, monkeypatch):
    monkeypatch.setattr("codapo_trl.rewards.grade_answers", fake_grade)
    result = analyze_checkpoints(
        run_dir / "checkpoint-2",
        leveled_file,
        questions_per_level=2,
        samples_per_question=2,
        max_new_tokens=6,
        grad_params="none",
        group_by="difficulty",
        progress=False,
    )
    assert result.steps == [2] and result.groups == [1, 2, 3, 4, 5]
    assert all(r.grad_norm is None and r.grad_norm_weighted is None for r in result.records)
    assert sum(len(result.cell(2, b)) for b in result.groups) == 3 * 2 * 2
    assert result.group_label(3) == "d∈[0.4, 0.6)" and result.group_label(5) == "d∈[0.8, 1]"
    figure = analysis_plots.plot_confidence_advantage(result)
    assert len(figure.axes) == 3 * 5
    plt.close(figure)


def test_cli_end_to_end(run_dir, leveled_file, tmp_path, capsys):
    out = tmp_path / "cli"
    argv = [
        str(run_dir),
        "--dataset",
        str(leveled_file),
        "--levels",
        "1",
        "2",
        "--questions-per-level",
        "1",
        "--samples-per-question",
        "2",
        "--max-new-tokens",
        "6",
        "--grad-params",
        "lm_head",
        "--steps",
        "2",
        "--output-dir",
        str(out),
        "--no-progress",
    ]
    assert main(argv) == 0
    report = capsys.readouterr().out
    assert "Per checkpoint and level" in report and "tables.md" in report
    rows = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 1 * 2 and {r["step"] for r in rows} == {2}
    assert (out / "gradient_norms.png").stat().st_size > 0

    # a saved analysis reads back, and --replot redraws the same tables without sampling
    loaded = AnalysisResult.load(out)
    summary = json.loads((out / "summary.json").read_text())
    assert loaded.steps == [2] and loaded.groups == [1, 2]
    assert loaded.table("grad_norm")[2][1] == pytest.approx(summary["tables"]["grad_norm"]["2"]["1"])
    again = tmp_path / "replot"
    assert main(["--replot", str(out), "--output-dir", str(again), "--no-plots"]) == 0
    assert (again / "tables.md").read_text() == (out / "tables.md").read_text()
    assert (again / "trajectories.jsonl").read_text() == (out / "trajectories.jsonl").read_text()
    assert main(["--replot", str(tmp_path)]) == 2
    assert "not the output directory of an analysis" in capsys.readouterr().err


def test_vllm_backend_samples_then_scores_with_transformers(tiny_model_dir, leveled_file, monkeypatch):
    """The vLLM path with a stand-in module: its token ids are scored by the checkpoint loaded with transformers."""
    import importlib.machinery
    import sys
    import types

    monkeypatch.setattr("codapo_trl.rewards.grade_answers", fake_grade)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    calls = {"shutdown": 0}

    class LLM:
        def __init__(self, **kwargs):
            calls["llm"] = kwargs
            self.llm_engine = types.SimpleNamespace(engine_core=types.SimpleNamespace(shutdown=self.shutdown))

        def shutdown(self):
            calls["shutdown"] += 1

        def get_tokenizer(self):
            return tokenizer

        def generate(self, prompts, params, use_tqdm=True):
            ids = tokenizer("The answer is 3")["input_ids"] + [tokenizer.eos_token_id]
            out = types.SimpleNamespace
            return [
                out(
                    outputs=[
                        out(text="The answer is 3", token_ids=ids[: 3 + j], finish_reason="stop") for j in range(p.n)
                    ]
                )
                for p in params
            ]

    module = types.ModuleType("vllm")
    module.__spec__ = importlib.machinery.ModuleSpec("vllm", None)
    module.LLM, module.SamplingParams = LLM, lambda **kwargs: types.SimpleNamespace(**kwargs)
    monkeypatch.setitem(sys.modules, "vllm", module)
    result = analyze_checkpoints(
        [],
        leveled_file,
        base=tiny_model_dir,
        levels=[2],
        questions_per_level=2,
        samples_per_question=2,
        grad_params="lm_head",
        backend="vllm",
        device="cpu",
        progress=False,
    )
    assert calls["llm"]["gpu_memory_utilization"] == 0.5 and calls["shutdown"] == 1
    assert [r.num_tokens for r in result.records] == [3, 4, 3, 4]
    assert all(r.grad_norm > 0 and 0 < r.confidence <= 1 for r in result.records)


# ---------------------------------------------------------------------------------------------------------------------
# Training logs
# ---------------------------------------------------------------------------------------------------------------------


def test_plot_training_dynamics_on_a_synthetic_trainer_state(tmp_path):
    path = synthetic_trainer_state(tmp_path / "trainer_state.json", steps=30)
    figure = plot_training_dynamics(path, tmp_path / "figs")
    assert [ax.get_title() for ax in figure.axes] == [title for _, title in analysis_plots.DYNAMICS_PANELS]
    assert len(figure.axes[1].get_lines()) == 5  # one line per difficulty bin
    assert (tmp_path / "figs" / "training_dynamics.png").stat().st_size > 1000
    assert (tmp_path / "figs" / "training_dynamics.svg").stat().st_size > 1000
    plt.close(figure)

    # CoDaPO: only the B updates (phase 0) are drawn; a run directory is accepted
    run = tmp_path / "codapo"
    (run / "checkpoint-4").mkdir(parents=True)
    synthetic_trainer_state(run / "checkpoint-4" / "trainer_state.json", steps=10, codapo=True)
    figure = plot_training_dynamics(run, smoothing=1)
    assert "CoDaPO B updates" in figure._suptitle.get_text()
    xdata = figure.axes[1].get_lines()[0].get_xdata()
    assert [x for x in xdata if not np.isnan(x)] == [1, 3, 5, 7, 9]
    # no line across the S updates between two B updates: a break (NaN) between every two points
    assert len(xdata) == 9 and all(np.isnan(xdata[1::2]))
    assert not figure.axes[0].collections and len(figure.axes[0].patches) == 5 * 5  # stacked bars, no filled area
    plt.close(figure)

    empty = tmp_path / "plain.json"
    empty.write_text(json.dumps({"log_history": [{"step": 1, "loss": 0.5}]}))
    with pytest.raises(ValueError, match="no dynamics/ metrics"):
        plot_training_dynamics(empty)
    with pytest.raises(FileNotFoundError):
        plot_training_dynamics(tmp_path / "missing.json")


def test_logs_only_cli(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    synthetic_trainer_state(run / "trainer_state.json")
    write_question_log(run / "questions.jsonl")
    assert find_training_logs(run) == {
        "trainer_state": str(run / "trainer_state.json"),
        "question_log": str(run / "questions.jsonl"),
    }
    out = tmp_path / "figs"
    assert main([str(run), "--logs-only", "--output-dir", str(out)]) == 0
    for stem in ("training_dynamics", "training_accuracy"):
        assert (out / f"{stem}.png").stat().st_size > 1000
    assert main([str(tmp_path / "figs"), "--logs-only"]) == 2
    assert "--logs-only needs" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------------------------------


def test_checkpoint_discovery_and_errors(run_dir, tiny_model_dir, tmp_path):
    found = find_checkpoints([run_dir], base=tiny_model_dir)
    assert [(c.step, c.label) for c in found] == [(0, "step 0 (base)"), (1, "step 1"), (2, "step 2")]
    assert [c.step for c in find_checkpoints([run_dir], steps=[2])] == [2]
    assert [c.step for c in find_checkpoints([run_dir / "checkpoint-2"])] == [2]
    # a final model in the run's root counts when it is newer than the last checkpoint
    for name in ("config.json", "model.safetensors"):
        shutil.copy(run_dir / "checkpoint-2" / name, run_dir / name)
    (run_dir / "trainer_state.json").write_text(json.dumps({"global_step": 2, "log_history": []}))
    assert [c.label for c in find_checkpoints([run_dir])] == ["step 1", "step 2"]
    (run_dir / "trainer_state.json").write_text(json.dumps({"global_step": 3, "log_history": []}))
    assert [c.label for c in find_checkpoints([run_dir])] == ["step 1", "step 2", "step 3 (final)"]
    with pytest.raises(FileNotFoundError, match="No such checkpoint"):
        find_checkpoints([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="No checkpoints found"):
        find_checkpoints([tmp_path / "empty"])
    with pytest.raises(ValueError, match="Cannot tell the training step"):
        find_checkpoints([tiny_model_dir])
    with pytest.raises(ValueError, match="Two checkpoints with step 1"):
        find_checkpoints([run_dir, run_dir / "checkpoint-1"])
    with pytest.raises(ValueError, match=r"No checkpoint for step\(s\) \[60\]"):
        find_checkpoints([run_dir], steps=[1, 60])
    with pytest.raises(ValueError, match="No checkpoints found"):
        find_checkpoints([])


def test_question_selection_and_errors(leveled_file):
    from codapo_trl.data import load_math_dataset

    dataset = load_math_dataset(leveled_file)
    picked = select_questions(dataset, levels=["Level 3", 1], questions_per_level=2, seed=0)
    assert [q.level for q in picked] == [3, 3, 1, 1]
    assert select_questions(dataset, levels=[3, 1], questions_per_level=2, seed=0) == picked  # seeded
    assert len(select_questions(dataset, questions_per_level=10)) == 12  # fewer than asked: all of them
    with pytest.raises(ValueError, match=r"Unknown level\(s\) \[7\]: the dataset has levels \[1, 2, 3\]"):
        select_questions(dataset, levels=[1, 7])
    unleveled = Dataset.from_dict(
        {"prompt": [[{"role": "user", "content": "q"}]] * 3, "answer": ["1"] * 3, "level": [None] * 3}
    )
    with pytest.raises(ValueError, match="no difficulty levels"):
        select_questions(unleveled)
    assert {q.level for q in select_questions(unleveled, require_levels=False)} == {"all"}


def test_cli_errors(run_dir, leveled_file, tmp_path, capsys):
    common = ["--dataset", str(leveled_file), "--no-progress", "--output-dir", str(tmp_path / "o")]
    for argv, message in [
        ([], "give checkpoints"),
        ([str(tmp_path / "nowhere"), *common], "No such checkpoint"),
        ([str(run_dir), "--levels", "9", *common], "Unknown level(s) [9]"),
        ([str(run_dir), "--steps", "5", *common], "No checkpoint for step(s) [5]"),
        ([str(run_dir), "--samples-per-question", "1", *common], "samples_per_question must be >= 2"),
        ([str(run_dir), "--temperature", "0", *common], "temperature must be > 0"),
    ]:
        assert main(argv) == 2, argv
        assert message in capsys.readouterr().err, message


# ---------------------------------------------------------------------------------------------------------------------
# Built on evaluation: grading with the question, ungraded samples as evaluation treats them
# ---------------------------------------------------------------------------------------------------------------------


def completion(text, n=3):
    return Completion(text, n, "stop", token_ids=tuple(range(1, n + 1)))


def test_grading_is_evaluations_and_judges_the_final_form():
    """An unevaluated answer scores 0 whatever the question says (the final-form rule, as in training and
    evaluation): `12 + 2` for the gold 14 is refused for a question that contains it and for one that does not."""
    asked = Question(0, "q", 1, [], "What is 12 + 2?", "14", "math")
    other = Question(1, "r", 1, [], "Add twelve and two.", "14", "math")
    samples = [completion(r"so \boxed{12 + 2}"), completion(r"so \boxed{14}")]
    verdicts = grade_groups([asked, other], [samples, samples])
    assert [[v.correct for v in group] for group in verdicts] == [[False, True], [False, True]]
    assert verdicts[0][0].reason == verdicts[1][0].reason == "not a numeric literal"


def ungraded_result(group_by="level"):
    """Two questions of level 1 at step 5: `a` graded (2 of 4 correct), `b` ungraded (unusable gold)."""
    checkpoint = Checkpoint(5, "c5", "step 5")
    a = Question(0, "a", 1, [], "What is 1 + 1?", "2", "math")
    b = Question(1, "b", 1, [], "What colour?", "blue", "math")
    samples = [completion(f"sample {i}", n=2 + i) for i in range(4)]
    scores = [(-0.5 - 0.1 * i, 1.0 + i) for i in range(4)]
    graded = [GradeResult(i % 2 == 0, str(i), "2") for i in range(4)]
    ungraded = [GradeResult(None, str(i), "blue", "gold rejected") for i in range(4)]
    records = group_records(checkpoint, a, samples, graded, scores) + group_records(
        checkpoint, b, samples, ungraded, scores
    )
    config = {"grad_params": "lm_head", "samples_per_question": 4}
    return AnalysisResult([checkpoint], [a, b], records, group_by=group_by, config=config)


def test_ungraded_groups_are_left_out_as_in_evaluation(tmp_path):
    """Evaluation leaves a question with an ungraded sample out of its metrics; the analysis leaves the group out of
    its tables, accuracy and figures and keeps its trajectories (graded=false). Counting ungraded samples as incorrect
    (the old rule) gives accuracy 0.25 over 8 trajectories and puts `b` in the hardest bin."""
    result = ungraded_result()
    b_rows = [r for r in result.records if r.question_id == "b"]
    assert len(result.records) == 8 and len(b_rows) == 4
    assert all(
        not r.graded and r.correct is None and r.reward is None and r.advantage is None and r.difficulty_bin is None
        for r in b_rows
    )
    assert [r.grad_norm for r in b_rows] == [1.0, 2.0, 3.0, 4.0]  # scored, but no advantage
    assert all(r.grad_norm_weighted is None for r in b_rows)
    cell = result.accuracy()[5][1]
    assert cell["accuracy"] == 0.5 and cell["num_trajectories"] == 4 and cell["num_questions"] == 1
    assert cell["unsolved_frac"] == 0.0
    a_rows = [r for r in result.records if r.question_id == "a"]
    np.testing.assert_allclose(result.values("advantage", 5, 1), [r.advantage for r in a_rows])
    np.testing.assert_allclose([r.advantage for r in a_rows], group_advantages([1.0, 0.0, 1.0, 0.0]))

    # evaluation's rule on the same verdicts: the question is ungraded there too
    record = QuestionRecord("bench", 1, "b", 1, "What colour?", "blue", "math")
    record.samples = [SampleRecord(i, "", None, None, None, None, "gold", 2, "stop") for i in range(4)]
    assert record.graded is False and {r.graded for r in b_rows} == {record.graded}

    by_bin = ungraded_result(group_by="difficulty")
    assert [len(by_bin.cell(5, b)) for b in by_bin.groups] == [0, 0, 4, 0, 0]  # a: d = 0.5; b in no bin

    # saved: every trajectory in the file, the tables without b, and the same after reading it back
    paths = result.save(tmp_path, plots=False)
    rows = [json.loads(line) for line in paths["trajectories"].read_text().splitlines()]
    assert len(rows) == 8 and sum(not r["graded"] for r in rows) == 4
    summary = json.loads(paths["summary"].read_text())
    assert summary["ungraded_questions"] == {"5": 1} and summary["accuracy"]["5"]["1"]["accuracy"] == 0.5
    assert "1 question(s) at step 5" in paths["tables"].read_text()
    loaded = AnalysisResult.load(tmp_path)
    assert loaded.accuracy()[5][1] == cell and len(loaded.records) == 8

    figure = analysis_plots.plot_confidence_advantage(result)
    scatter = [ax for ax in figure.axes if ax.get_ylabel() == "confidence"][0]
    assert sum(len(c.get_offsets()) for c in scatter.collections) == 4  # b's trajectories are not drawn
    plt.close(figure)


def test_analyze_checkpoints_grades_with_the_golds_and_leaves_ungraded_out(run_dir, leveled_file, monkeypatch):
    """End to end: the grader gets each question's gold answer (never its text: the final form is judged on the
    answer itself), and a question whose gold it cannot use is left out."""
    seen = []

    def grade(predictions, golds, answer_types=None):
        seen.extend(golds)
        return [
            GradeResult(None, "x", g) if g == "10" else fake_grade([p], [g])[0] for p, g in zip(predictions, golds)
        ]

    monkeypatch.setattr("codapo_trl.rewards.grade_answers", grade)
    result = analyze_checkpoints(
        run_dir / "checkpoint-1",
        leveled_file,
        levels=[1],
        questions_per_level=4,
        samples_per_question=2,
        max_new_tokens=4,
        grad_params="none",
        progress=False,
    )
    assert sorted(set(seen)) == sorted(str(10 + 2 * i) for i in range(4)) and len(seen) == 4 * 2
    ungraded = {r.question_id for r in result.records if not r.graded}
    assert ungraded == {"L1-0"} and result.ungraded_questions() == {1: 1}
    assert result.accuracy()[1][1]["num_questions"] == 3 and result.accuracy()[1][1]["num_trajectories"] == 6


# ---------------------------------------------------------------------------------------------------------------------
# The package: no import cycle, matplotlib's backend left alone
# ---------------------------------------------------------------------------------------------------------------------


def test_importing_analysis_leaves_matplotlib_backend_alone():
    """The figures module used to call `matplotlib.use("Agg")` on import, switching every user's backend."""
    import subprocess
    import sys

    code = (
        "import matplotlib; matplotlib.use('svg'); "
        "import codapo_trl.analysis, codapo_trl.analysis.plots, codapo_trl.analysis.cli; "
        "print(matplotlib.get_backend())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == "svg"


def test_command_entry_points():
    """`codapo-analyze` (the console script named in pyproject.toml) and `python -m codapo_trl.analysis` run the CLI."""
    import importlib
    import subprocess
    import sys
    import tomllib

    import codapo_trl

    pyproject = Path(codapo_trl.__file__).parent.parent / "pyproject.toml"
    module, _, attribute = tomllib.loads(pyproject.read_text())["project"]["scripts"]["codapo-analyze"].partition(":")
    assert getattr(importlib.import_module(module), attribute) is main
    out = subprocess.run(
        [sys.executable, "-m", "codapo_trl.analysis", "--help"], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.startswith("usage: codapo-analyze")
