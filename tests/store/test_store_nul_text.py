"""Model output with NUL characters is stored (PostgreSQL text/JSONB refuse NUL), never lost."""

from __future__ import annotations

import pytest

from tests.factories import TrajectoryFactory
from webapp.store.models import Step
from webapp.store.services import pg_safe, step_append


def test_pg_safe_replaces_nul_everywhere() -> None:
    value = {"a\x00": ["x\x00y", ("z\x00",), 3, None], "n": 1.5}
    assert pg_safe(value) == {"a\ufffd": ["x\ufffdy", ["z\ufffd"], 3, None], "n": 1.5}
    assert pg_safe("clean") == "clean"


@pytest.mark.django_db
def test_step_with_nul_in_model_text_is_stored() -> None:
    trajectory = TrajectoryFactory()
    raw = "Thought: \x00click\nAction: click(start_box='(1,\x002)')"
    step = step_append(
        trajectory=trajectory,
        fields={
            "raw_text": raw,
            "thought": "\x00click",
            "candidates": [{"raw_text": raw, "parse_error": "bad \x00 byte"}],
        },
    )
    stored = Step.objects.get(pk=step.pk)
    assert stored.raw_text == raw.replace("\x00", "\ufffd")
    assert stored.candidates[0]["parse_error"] == "bad \ufffd byte"
