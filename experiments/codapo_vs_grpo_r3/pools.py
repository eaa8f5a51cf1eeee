"""Round 3's training pools (issue 63; `../../shared` design note, section 3.2): one fixed pool of `train`
arithmetic questions per seed, reused over epochs, written as a committed JSONL file that a recipe names as its
`dataset_name`.

    python experiments/codapo_vs_grpo_r3/pools.py                      # the 64-question pools of every seed
    python experiments/codapo_vs_grpo_r3/pools.py --size 128 --seeds 0 1   # the pilot rule's fallback pools
    python experiments/codapo_vs_grpo_r3/pools.py --check               # the committed files are what it writes

Seed k's pool is `make_arithmetic_dataset(POOL_LEVELS[size], seed=1000 + k, split="train")`: `size` questions,
levels 4, 5 and 7 in the counts of `POOL_LEVELS`, levels interleaved in the builder's seeded order. Every row gets a
`unique_id` (`L<level>:<a>+<b>`), so the question logs name a pool question the same way in every arm and seed. The
held-out set (`test` split) is disjoint from every pool by the builder's hash split. The files land in
`pools/<size>/seed<k>.jsonl`; the same seed and size always give the same bytes.

A pool is a multiple of |B| = 16 questions, so epoch boundaries fall between CoDaPO's B/S pairs.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from codapo_trl.data import make_arithmetic_dataset


HERE = Path(__file__).resolve().parent
POOLS_DIR = HERE / "pools"
logger = logging.getLogger("pools")

BATCH_QUESTIONS = 16  # |B|: questions per generation batch (round 2's recipe)
POOL_LEVELS: dict[int, dict[int, int]] = {
    64: {4: 22, 5: 21, 7: 21},  # the registered pool: 4 batches per epoch
    128: {4: 43, 5: 43, 7: 42},  # the pilot rule's fallback (gate 1): 8 batches per epoch
}
SEED_OFFSET = 1000  # the data seed of training seed k is 1000 + k: pools never share the training seed's streams
CAMPAIGN_SEEDS = tuple(range(14))
PILOT_SEEDS = (200, 201, 202, 203, 204)
COLUMNS = ("unique_id", "question", "answer", "level", "a", "b", "answer_type")


def pool_seed(seed: int) -> int:
    """The data seed of training seed `seed`.

    Example:
        >>> pool_seed(0), pool_seed(201)
        (1000, 1201)
    """
    return SEED_OFFSET + seed


def pool_rows(seed: int, levels: Mapping[int, int]) -> list[dict]:
    """The pool of training seed `seed` with `levels` questions per level, as JSON rows in the builder's order."""
    total = sum(levels.values())
    if total % BATCH_QUESTIONS:
        raise ValueError(
            f"A pool of {total} questions is not a multiple of |B| = {BATCH_QUESTIONS}: an epoch boundary would fall "
            "inside a B/S pair. Change the counts per level."
        )
    raw = make_arithmetic_dataset(dict(levels), seed=pool_seed(seed), split="train")
    return [{"unique_id": f"L{r['level']}:{r['a']}+{r['b']}", **{k: r[k] for k in COLUMNS[1:]}} for r in raw]


def pool_path(seed: int, size: int, folder: Path = POOLS_DIR) -> Path:
    """Where seed `seed`'s pool of `size` questions is kept (the recipe's `dataset_name`)."""
    return folder / str(size) / f"seed{seed}.jsonl"


def pool_text(seed: int, size: int) -> str:
    """The pool file's exact text (one JSON object a line, keys in `COLUMNS` order)."""
    if size not in POOL_LEVELS:
        raise ValueError(f"Registered pool sizes are {sorted(POOL_LEVELS)}, got {size}.")
    return "".join(json.dumps(row) + "\n" for row in pool_rows(seed, POOL_LEVELS[size]))


def write_pools(seeds: Iterable[int], size: int, folder: Path = POOLS_DIR) -> list[Path]:
    """Write the pools of `seeds` (each file replaced by the same bytes when it exists)."""
    paths = []
    for seed in seeds:
        path = pool_path(seed, size, folder)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(pool_text(seed, size))
        paths.append(path)
    return paths


def stale_pools(seeds: Iterable[int], size: int, folder: Path = POOLS_DIR) -> list[str]:
    """The pool files of `seeds` that are missing or differ from what `pool_text` writes (empty: all as written)."""
    problems = []
    for seed in seeds:
        path = pool_path(seed, size, folder)
        if not path.exists():
            problems.append(f"{path}: missing")
        elif path.read_text() != pool_text(seed, size):
            problems.append(f"{path}: differs from what pools.py writes")
    return problems


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=64, choices=sorted(POOL_LEVELS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[*CAMPAIGN_SEEDS, *PILOT_SEEDS])
    parser.add_argument("--output-dir", type=Path, default=POOLS_DIR)
    parser.add_argument("--check", action="store_true", help="check the files instead of writing them")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if options.check:
        problems = stale_pools(options.seeds, options.size, options.output_dir)
        for problem in problems:
            logger.error(problem)
        if problems:
            sys.exit(1)
        logger.info("%d pools of %d questions as written.", len(options.seeds), options.size)
        return []
    paths = write_pools(options.seeds, options.size, options.output_dir)
    logger.info("Wrote %d pools of %d questions under %s.", len(paths), options.size, options.output_dir)
    return [str(p) for p in paths]


if __name__ == "__main__":
    main()
