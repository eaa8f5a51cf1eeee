#!/usr/bin/env python3
"""Normalise committed model outputs from public repos into one jsonl corpus.

Standalone, stdlib only (Python 3.11), except the lighteval source (a parquet file), which needs pyarrow and is
skipped with a message on stderr where pyarrow is missing.

    python convert_r4.py --raw raw --out corpus.jsonl

--raw DIR is laid out as DIR/<owner+repo>/<path inside repo>.
Output line: {"id","source","model","dataset","problem","gold","completion","source_verdict"}
"""

import argparse
import collections
import contextlib
import glob
import json
import os
import re
import sys


ODYSSEY = "protagolabs+odyssey-math"
SIMPLE_EVALS = "kuk+simple-evals-ru"
SIMPLERL = "hkust-nlp+simpleRL-reason"
OLYMPIAD = "MotaTasher+llm-olympiad-bench"
LIGHTEVAL_QWEN3 = "pingzhili+lm-reasoning-eval"

# lighteval's per-sample details of one run: (path inside the repo, model name). Long chain-of-thought output
# (Qwen3-32B in thinking mode, <think> ... </think> then the answer), AIME 2024.
LIGHTEVAL_RUNS = [
    (
        "data/evals/Qwen/Qwen3-32B/details/Qwen/Qwen3-32B/2025-07-11T09-28-07.098405/"
        "details_lighteval|aime24|0_2025-07-11T09-28-07.098405.parquet",
        "Qwen3-32B-thinking",
    ),
]
# lighteval's AIME prompt: an instruction paragraph, a blank line, then the problem.
LIGHTEVAL_PROMPT_END = "Think step by step before answering.\n\n"

ODY_RUNS = [
    # (completion file, verdict file, model name)
    ("gpt-3.5-turbo-0125-solution", "gpt-3.5-turbo-0125"),
    ("gpt-4-0613-solution", "gpt-4-0613"),
    ("gpt-4-1106-preview-solution", "gpt-4-1106-preview"),
    ("gpt-4-0125-preview-solution", "gpt-4-0125-preview"),
    ("gpt-4-turbo-2024-04-09-solution", "gpt-4-turbo-2024-04-09"),
    ("gpt-4-o1-preview-solution", "o1-preview"),
    ("deepseek-v3-Instruct-solution", "deepseek-v3"),
]

MAX_RUN_FRACTION = 0.30

# kuk runs that are older re-runs of a model also present under a later number; skipped
# so MATH level 5 stays a minority of the corpus.
KUK_SKIP = {
    "04_llama_3_1_8b",
    "05_llama_3_3_70b",
    "08_gigachat_lite",
    "12_gigachat_pro",
    "14_gigachat_max",
    "21_saiga",
    "24_ruadapt",
}


def read_jsonl(path):
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def clean_ody_text(s):
    """MathOdyssey strings carry LaTeX-document debris (\\end{problem}, \\noindent, trailing \\\\)."""
    s = s.replace("\\end{problem}", "")
    s = re.sub(r"\\noindent\s*$", "", s.strip())
    s = s.strip()
    s = re.sub(r"(\\\\\s*)+$", "", s).strip()
    return s


CHOICE_GOLD_RE = re.compile(r"\$?\(?[A-E]\)?\.?\$?")


def odyssey(raw):
    base = os.path.join(raw, ODYSSEY)
    probs = {}
    for row in read_jsonl(os.path.join(base, "final-odyssey-math-with-levels.jsonl")):
        ((k, v),) = row.items()
        probs[k] = v
    items = []
    for stem, model in ODY_RUNS:
        cpath = f"jsonl/{stem}.jsonl"
        vpath = f"jsonl/eval/result-{stem}-clean.jsonl"
        verdict = {}
        vp = os.path.join(base, vpath)
        if os.path.exists(vp):
            for row in read_jsonl(vp):
                ((k, v),) = row.items()
                ic = str(v.get("is_correct", "")).strip()
                verdict[k] = True if ic == "1" else False if ic == "0" else None
        for i, row in enumerate(read_jsonl(os.path.join(base, cpath))):
            ((k, comp),) = row.items()
            p = probs.get(k)
            if p is None or not isinstance(comp, str):
                continue
            level = (p.get("level") or "").strip().lower().replace(" ", "_")
            gold = clean_ody_text(p.get("answer", ""))
            items.append(
                {
                    "id": f"{ODYSSEY}:{cpath}:{i}",
                    "source": "protagolabs/odyssey-math",
                    "model": model,
                    "dataset": f"mathodyssey_{level}" if level else "mathodyssey",
                    "problem": clean_ody_text(p.get("question", "")),
                    "gold": gold,
                    # a multiple-choice question's gold is its option letter: graded as a choice, as a user
                    # training on such rows sets `answer_type`
                    "answer_type": "choice" if CHOICE_GOLD_RE.fullmatch(gold) else "math",
                    "completion": comp,
                    "source_verdict": verdict.get(k),
                }
            )
    return items


def kuk(raw, levels):
    base = os.path.join(raw, SIMPLE_EVALS)
    bench = {r["id"]: r for r in read_jsonl(os.path.join(base, "data/benches/math.jsonl"))}
    items = []
    for path in sorted(glob.glob(os.path.join(base, "data/results/math/*.jsonl"))):
        rel = os.path.relpath(path, base)
        stem = os.path.basename(path)[:-6]
        if stem in KUK_SKIP:
            continue
        for i, r in enumerate(read_jsonl(path)):
            b = bench.get(r.get("id"))
            if b is None:
                continue
            lvl = levels.get(norm_problem(b["problem"]))
            if lvl != 5:  # keep only MATH level 5 (Olympiad-adjacent minority)
                continue
            ic = r.get("is_correct")
            items.append(
                {
                    "id": f"{SIMPLE_EVALS}:{rel}:{i}",
                    "source": "kuk/simple-evals-ru",
                    "model": f"{stem}",
                    "dataset": "math500_level5",
                    "problem": b["problem"],
                    "gold": b.get("target", ""),
                    "completion": r.get("answer") or "",
                    "source_verdict": ic if isinstance(ic, bool) else None,
                }
            )
    return items


def norm_problem(s):
    return re.sub(r"\s+", " ", s or "").strip()


def math500_levels(raw):
    p = os.path.join(raw, SIMPLERL, "examples/simplelr_math_eval/data/math500/test.jsonl")
    out = {}
    if os.path.exists(p):
        for r in read_jsonl(p):
            with contextlib.suppress(TypeError, ValueError):
                out[norm_problem(r["problem"])] = int(r.get("level"))
    return out


def load_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def motatasher(raw):
    base = os.path.join(raw, OLYMPIAD)
    # human scores: result_id -> (score, max_score)
    scores = {}
    for path in glob.glob(os.path.join(base, "data/results/**/*.json"), recursive=True):
        try:
            d = load_json(path)
        except Exception:
            continue
        for rid, ev in (d.get("evaluations") or {}).items():
            if isinstance(ev, dict) and ev.get("score") is not None:
                scores[rid] = (ev.get("score"), ev.get("max_score"))
    items = []
    for path in sorted(glob.glob(os.path.join(base, "logs/**/*.json"), recursive=True)):
        rel = os.path.relpath(path, base)
        try:
            d = load_json(path)
        except Exception:
            continue
        prob = d.get("problem") or {}
        gold = prob.get("answer")
        if not gold:
            continue
        text = d.get("problem_text") or prob.get("statement") or ""
        for j, res in enumerate(d.get("results") or []):
            if res.get("status") != "success":
                continue
            comp = res.get("answer") or ""
            sc = scores.get(res.get("result_id"))
            verdict = None
            if sc is not None:
                s, m = sc
                try:
                    s = float(s)
                    m = float(m) if m is not None else float(prob.get("max_score") or 0)
                    verdict = True if (m and s >= m) else False if s == 0 else None
                except (TypeError, ValueError):
                    verdict = None
            items.append(
                {
                    "id": f"{OLYMPIAD}:{rel}:{res.get('result_index', j)}",
                    "source": "MotaTasher/llm-olympiad-bench",
                    "model": res.get("resolved_model_id") or res.get("model") or res.get("alias") or "?",
                    "dataset": d.get("competition_id") or "math-cup",
                    "problem": text,
                    "gold": gold,
                    "completion": comp,
                    "source_verdict": verdict,
                }
            )
    return items


def lighteval_details(raw):
    """lighteval `details_*.parquet` rows: the gold is `doc.choices[doc.gold_index]`, the completion the first
    `model_response.text`, the verdict lighteval's `math_pass@1:1_samples` (1.0 or 0.0)."""
    base = os.path.join(raw, LIGHTEVAL_QWEN3)
    paths = [(rel, model) for rel, model in LIGHTEVAL_RUNS if os.path.exists(os.path.join(base, rel))]
    if not paths:
        return []
    try:
        import pyarrow.parquet as pq
    except ImportError:
        print(f"pyarrow missing: {LIGHTEVAL_QWEN3} skipped", file=sys.stderr)
        return []
    items = []
    for rel, model in paths:
        for i, row in enumerate(pq.read_table(os.path.join(base, rel)).to_pylist()):
            doc = row.get("doc") or {}
            choices = doc.get("choices") or []
            gold_index = doc.get("gold_index") or 0
            texts = (row.get("model_response") or {}).get("text") or []
            if not choices or not texts:
                continue
            query = doc.get("query") or ""
            problem = query.split(LIGHTEVAL_PROMPT_END, 1)[-1]
            score = (row.get("metric") or {}).get("math_pass@1:1_samples")
            items.append(
                {
                    "id": f"{LIGHTEVAL_QWEN3}:{rel}:{i}",
                    "source": "pingzhili/lm-reasoning-eval",
                    "model": model,
                    "dataset": "aime24",
                    "problem": problem,
                    "gold": str(choices[gold_index]),
                    "completion": texts[0] or "",
                    "source_verdict": None if score is None else bool(score),
                }
            )
    return items


def cap_runs(items):
    runs = collections.OrderedDict()
    for it in items:
        runs.setdefault((it["source"], it["model"]), []).append(it)
    total = len(items)
    # iterate: cap largest runs at 30% of the (shrinking) total
    while True:
        limit = int(MAX_RUN_FRACTION * total)
        over = [k for k, v in runs.items() if len(v) > limit]
        if not over:
            break
        for k in over:
            runs[k] = runs[k][:limit]
        total = sum(len(v) for v in runs.values())
    out = []
    for v in runs.values():
        out.extend(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--raw", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    items = []
    items += odyssey(a.raw)
    items += kuk(a.raw, math500_levels(a.raw))
    items += motatasher(a.raw)
    items += lighteval_details(a.raw)
    items = [it for it in items if (it["completion"] or "").strip() and (str(it["gold"]) or "").strip()]
    seen = set()
    uniq = []
    for it in items:
        if it["id"] in seen:
            continue
        seen.add(it["id"])
        uniq.append(it)
    items = cap_runs(uniq)
    with open(a.out, "w", encoding="utf-8") as f:
        for it in items:
            f.write(json.dumps(it, ensure_ascii=False) + "\n")
    c = collections.Counter((it["source"], it["model"]) for it in items)
    for k, v in sorted(c.items()):
        print(f"{k[0]:35s} {k[1]:40s} {v}")
    print("total", len(items), file=sys.stderr)


if __name__ == "__main__":
    main()
