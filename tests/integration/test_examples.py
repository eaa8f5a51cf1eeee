"""The README's offline drop-in example runs as a reader would run it (here on the tiny model, two updates)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dropin_offline.py"


def test_the_offline_dropin_example_trains_b_then_s_and_prints_progress_lines(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("dropin_offline", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    trainer = module.main(["--model", "tiny", "--steps", "2", "--questions", "16", "--output-dir", str(tmp_path)])
    assert trainer.state.global_step == 2
    assert [h["codapo/phase"] for h in trainer.state.log_history if "codapo/phase" in h] == [0.0, 1.0]
    out = capsys.readouterr().out
    assert "step 1/2 | phase B | reward " in out and "step 2/2 | phase S | reward " in out
