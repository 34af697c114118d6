"""What the tests of kept benchmark results share: a result JSON of benchmarks/results/ and the row of
docs/benchmarks.md (or benchmarks/HISTORY.md) that reports it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def load(path: Path) -> dict[str, Any]:
    return dict(json.loads(path.read_text()))


def docs_row(label: str, document: str = "docs/benchmarks.md") -> str:
    """The one table row of `document` labelled `label`, without its bold marks."""
    rows = [line for line in (ROOT / document).read_text().splitlines()
            if line.startswith(f"| {label} |")]  # fmt: skip
    assert len(rows) == 1, f"{document} has {len(rows)} rows labelled {label!r}"
    return rows[0].replace("**", "")
