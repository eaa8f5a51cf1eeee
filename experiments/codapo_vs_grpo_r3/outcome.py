"""How round 3's rule and analysis scripts hand over their result: the JSON a later script or the registration reads,
the markdown a reader reads, and the same text on standard output for the sitting's log."""

from __future__ import annotations

import json
from pathlib import Path


def publish(result: dict, json_path: Path | None, markdown: str | None = None) -> dict:
    """Write `result` to `json_path` (indented JSON) and, with `markdown`, that text beside it (`<stem>.md`); print
    the markdown, or the JSON where there is none. Returns `result`.

    Example:
        >>> import tempfile
        >>> out = Path(tempfile.mkdtemp()) / "rule.json"
        >>> publish({"start": True}, out)["start"]
        {
         "start": true
        }
        True
        >>> json.loads(out.read_text()), out.with_suffix(".md").exists()
        ({'start': True}, False)
    """
    text = json.dumps(result, indent=1) + "\n"
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(text)
        if markdown is not None:
            json_path.with_suffix(".md").write_text(markdown)
    print(markdown if markdown is not None else text.rstrip("\n"))
    return result
