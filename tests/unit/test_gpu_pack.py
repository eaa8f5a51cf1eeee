"""benchmarks/gpu_pack.py: what it packs for a GPU machine, that its wheels install offline, and the size check."""

import hashlib
import importlib.metadata
import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers_scripts import load_script


PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_pack.py"


gpu_pack = load_script(PATH, "gpu_pack")
KIB = 1024


def fake_wheel(name, dest, python):
    """Stands in for `wheel_for` (no download): a file of 10 KiB per wheel."""
    dest.mkdir(parents=True, exist_ok=True)
    path = dest / f"{name.replace('-', '_')}-1.0-py3-none-any.whl"
    path.write_bytes(b"w" * 10 * KIB)
    return path


def test_pure_distributions_are_repacked_and_version_specific_ones_downloaded():
    """What the device lacks: the pure-Python wheels come from this environment, multiprocess (one code base per
    Python version) and pydantic-core (compiled) must be downloaded for the device's Python."""
    pure = {name: gpu_pack.is_pure(importlib.metadata.distribution(name)) for name in (*gpu_pack.CORE, *gpu_pack.GGUF)}
    assert pure == {name: name != "multiprocess" for name in pure}
    assert not gpu_pack.is_pure(importlib.metadata.distribution("pydantic-core"))
    assert "trl" in gpu_pack.CORE and "datasets" in gpu_pack.CORE and "math-verify" in gpu_pack.CORE
    with pytest.raises(ValueError, match="multiprocess is not a pure-Python wheel"):
        gpu_pack.repack("multiprocess", Path("unused"))


def test_repacked_wheel_is_complete_and_installs_offline(tmp_path):
    version = importlib.metadata.version("math-verify")
    wheel = gpu_pack.repack("math-verify", tmp_path / "wheels")
    assert wheel.name == f"math_verify-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        record = archive.read(f"math_verify-{version}.dist-info/RECORD").decode().splitlines()
        assert "math_verify/__init__.py" in names and f"math_verify-{version}.dist-info/METADATA" in names
        assert not any("__pycache__" in n or n.endswith(("INSTALLER", "direct_url.json")) for n in names)
        for line in record[:-1]:  # every file's hash, checked against the archive
            name, digest, size = line.rsplit(",", 2)
            assert digest == gpu_pack._record_hash(archive.read(name)) and int(size) == len(archive.read(name))
    target = tmp_path / "site"
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--target", str(target)]
    subprocess.run([*command, str(wheel)], check=True, capture_output=True)
    assert (target / "math_verify" / "grader.py").read_bytes() == (
        Path(importlib.util.find_spec("math_verify").origin).parent / "grader.py"
    ).read_bytes()


def test_pack_lists_the_wheels_and_gguf_parts_within_the_limit(tmp_path):
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(bytes(range(256)) * 400)  # 100 KiB
    out = tmp_path / "pack"
    names = [*gpu_pack.CORE, "gguf"]
    limit, tree = 80 * KIB, 20 * KIB  # 60 KiB beside the tree: the GGUF goes in two parts of 50 KiB
    transfers, digest = gpu_pack.pack(out, names, limit, tree, "3.12", gguf=gguf, make_wheel=fake_wheel)
    listed = sorted(item.name for transfer in transfers for item in transfer)
    wheels = sorted(f"{n.replace('-', '_')}-1.0-py3-none-any.whl" for n in names)
    assert listed == sorted([*wheels, "model.gguf.part-00", "model.gguf.part-01"])
    assert all(sum(item.size for item in transfer) <= limit - tree for transfer in transfers)
    on_disk = sorted(p.name for p in out.glob("*/*"))
    assert on_disk == listed and not (out / "staging").exists()
    joined = b"".join(p.read_bytes() for p in sorted(out.glob("*/model.gguf.part-*")))
    assert joined == gguf.read_bytes() and digest == hashlib.sha256(joined).hexdigest()
    text = gpu_pack.commands(out, transfers, digest, deepspeed=False)
    for number in range(1, len(transfers) + 1):
        assert f"{out}/{number}/" in text
    assert "--no-index --no-deps" in text and "make test-gpu GPU_PYTHON=python3" in text
    assert "gpu_step.py --device cuda --model paper" in text and f"{digest}  " in text


def test_size_check_fails_on_an_oversized_set(tmp_path):
    big = tmp_path / "big.whl"
    big.write_bytes(b"x" * 70 * KIB)
    with pytest.raises(ValueError, match=r"big.whl is 0.1 MiB, more than the 0.1 MiB a transfer has"):
        gpu_pack.plan_transfers([gpu_pack.Item(big, big.name)], 64 * KIB)
    with pytest.raises(ValueError, match="the working tree alone is"):
        gpu_pack.pack(tmp_path / "out", ["trl"], 64 * KIB, 64 * KIB, "3.12", make_wheel=fake_wheel)
