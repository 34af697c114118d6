"""Agreement between reviewers and between trajectories, in GUI terms. Pure: no Django, no I/O.

Two kinds of agreement:

- between two reviewers' per-step verdicts (approve / fix / reject) on the same trajectory;
- between two actions taken at the same step (two annotators, or two trajectories of one task):
  same action type; pointer targets within `radius_px` screen pixels of each other, or inside the
  same element when element boxes are known; typed text by normalised edit distance; hotkeys by
  their key set; scroll direction.

Actions are `Action.to_json()` dicts with points already in **screen pixels**.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("approve", "fix", "reject")

ActionJson = Mapping[str, Any]
Box = Mapping[str, float]  # {"x", "y", "width", "height"} in screen pixels


# ---------------------------------------------------------------- reviewers' verdicts


@dataclass(frozen=True)
class VerdictAgreement:
    """Steps on which every reviewer gave the same verdict, those on which they did not, the steps
    anyone did not approve, and the share of steps agreed on (1.0 for a trajectory without steps)."""

    agreeing: list[int]
    disagreeing: list[int]
    flagged: list[int]
    rate: float


def verdicts_by_step(step_verdicts: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    return {int(v["index"]): str(v["verdict"]) for v in step_verdicts}


def step_verdict_agreement(reviews: Sequence[Sequence[Mapping[str, Any]]]) -> VerdictAgreement:
    """Per-step agreement of several reviewers' `[{index, verdict, comment}]` lists. A step one
    reviewer did not judge counts as a disagreement."""
    maps = [verdicts_by_step(r) for r in reviews]
    indices = sorted(set().union(*maps)) if maps else []
    agreeing, disagreeing, flagged = [], [], []
    for index in indices:
        given = [m.get(index) for m in maps]
        if None not in given and len(set(given)) == 1:
            agreeing.append(index)
        else:
            disagreeing.append(index)
        if any(v != "approve" for v in given):
            flagged.append(index)
    rate = len(agreeing) / len(indices) if indices else 1.0
    return VerdictAgreement(agreeing, disagreeing, flagged, round(rate, 4))


def review_outcome(verdicts: Sequence[str]) -> str:
    """The trajectory's review state from the reviewers' overall verdicts: every reviewer approves →
    "approved"; every reviewer rejects → "rejected"; anything else (a fix, or disagreement) →
    "needs_fix"."""
    if not verdicts:
        raise ValueError("no verdicts to combine")
    unknown = set(verdicts) - set(VERDICTS)
    if unknown:
        raise ValueError(f"unknown verdicts {sorted(unknown)}; expected {VERDICTS}")
    if all(v == "approve" for v in verdicts):
        return "approved"
    if all(v == "reject" for v in verdicts):
        return "rejected"
    return "needs_fix"


# ---------------------------------------------------------------- actions


def normalise_text(text: str) -> str:
    """Case-folded, trimmed, inner whitespace collapsed; a trailing newline (Enter) is kept as a
    marker so "abc" and "abc\\n" differ by one edit."""
    enter = text.endswith("\n")
    core = re.sub(r"\s+", " ", text.strip()).casefold()
    return core + ("\n" if enter else "")


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance (insert, delete, substitute each cost 1)."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def text_similarity(a: str, b: str) -> float:
    """1 − normalised edit distance of the normalised texts: 1.0 identical, 0.0 nothing shared."""
    na, nb = normalise_text(a), normalise_text(b)
    longest = max(len(na), len(nb))
    if longest == 0:
        return 1.0
    return round(1.0 - edit_distance(na, nb) / longest, 4)


def _inside(point: Sequence[float], box: Box) -> bool:
    x, y = float(point[0]), float(point[1])
    return box["x"] <= x <= box["x"] + box["width"] and box["y"] <= y <= box["y"] + box["height"]


def element_at(point: Sequence[float], elements: Sequence[Box]) -> int | None:
    """Index (in `elements`) of the smallest box containing `point`, or None."""
    best: tuple[float, int] | None = None
    for i, box in enumerate(elements):
        if _inside(point, box):
            area = float(box["width"]) * float(box["height"])
            if best is None or area < best[0]:
                best = (area, i)
    return best[1] if best else None


def distance(p: Sequence[float], q: Sequence[float]) -> float:
    return float(((float(p[0]) - float(q[0])) ** 2 + (float(p[1]) - float(q[1])) ** 2) ** 0.5)


def same_target(
    p: Sequence[float] | None,
    q: Sequence[float] | None,
    *,
    radius_px: float,
    elements: Sequence[Box] = (),
) -> bool:
    """Two pointer targets agree when they are within `radius_px` of each other, or both fall in the
    same element (the smallest box containing each). Two missing points agree; one missing does not."""
    if p is None or q is None:
        return p is None and q is None
    if distance(p, q) <= radius_px:
        return True
    if elements:
        ep, eq = element_at(p, elements), element_at(q, elements)
        return ep is not None and ep == eq
    return False


@dataclass(frozen=True)
class ActionMatch:
    """How far two actions agree. `checks` names each criterion that applied and its score in
    [0, 1]; `score` is their mean (0.0 when the kinds differ); `agree` says every check passed
    (text at or above the similarity threshold)."""

    same_kind: bool
    checks: dict[str, float] = field(default_factory=dict)
    score: float = 0.0
    agree: bool = False


def action_agreement(
    a: ActionJson,
    b: ActionJson,
    *,
    radius_px: float = 14.0,
    elements: Sequence[Box] = (),
    text_threshold: float = 0.8,
) -> ActionMatch:
    """Agreement of two actions taken on the same screen (points in screen pixels)."""
    if a.get("kind") != b.get("kind"):
        return ActionMatch(same_kind=False)
    checks: dict[str, float] = {"kind": 1.0}
    passed = True
    if a.get("point") is not None or b.get("point") is not None:
        ok = same_target(a.get("point"), b.get("point"), radius_px=radius_px, elements=elements)
        checks["target"] = 1.0 if ok else 0.0
        passed &= ok
    if a.get("end_point") is not None or b.get("end_point") is not None:
        ok = same_target(a.get("end_point"), b.get("end_point"), radius_px=radius_px, elements=elements)
        checks["end_target"] = 1.0 if ok else 0.0
        passed &= ok
    if a.get("text") is not None or b.get("text") is not None:
        sim = text_similarity(str(a.get("text") or ""), str(b.get("text") or ""))
        checks["text"] = sim
        passed &= sim >= text_threshold
    if a.get("keys") is not None or b.get("keys") is not None:
        ok = {k.lower() for k in a.get("keys") or ()} == {k.lower() for k in b.get("keys") or ()}
        checks["keys"] = 1.0 if ok else 0.0
        passed &= ok
    if a.get("direction") is not None or b.get("direction") is not None:
        ok = a.get("direction") == b.get("direction")
        checks["direction"] = 1.0 if ok else 0.0
        passed &= ok
    if a.get("name") is not None or b.get("name") is not None:
        ok = a.get("name") == b.get("name") and a.get("arguments") == b.get("arguments")
        checks["call"] = 1.0 if ok else 0.0
        passed &= ok
    score = round(sum(checks.values()) / len(checks), 4)
    return ActionMatch(same_kind=True, checks=checks, score=score, agree=passed)


def step_agreement(
    a: Sequence[ActionJson],
    b: Sequence[ActionJson],
    *,
    radius_px: float = 14.0,
    elements: Sequence[Box] = (),
    text_threshold: float = 0.8,
) -> float:
    """Score in [0, 1] of two steps' action lists, position by position; an action with no
    counterpart scores 0. Two empty steps agree fully."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    total = sum(
        action_agreement(x, y, radius_px=radius_px, elements=elements, text_threshold=text_threshold).score
        for x, y in zip(a, b, strict=False)
    )
    return round(total / longest, 4)


def sequence_agreement(
    a: Sequence[Sequence[ActionJson]],
    b: Sequence[Sequence[ActionJson]],
    *,
    radius_px: float = 14.0,
    text_threshold: float = 0.8,
) -> float:
    """Score in [0, 1] of two trajectories' steps (each a list of actions), step by step; extra
    steps in the longer one score 0, so a prefix of a trajectory is not its duplicate."""
    longest = max(len(a), len(b))
    if longest == 0:
        return 1.0
    total = sum(
        step_agreement(x, y, radius_px=radius_px, text_threshold=text_threshold)
        for x, y in zip(a, b, strict=False)
    )
    return round(total / longest, 4)


@dataclass(frozen=True)
class FixAgreement:
    """Agreement of the corrected actions reviewers proposed for one step they marked "fix"."""

    index: int
    score: float
    agree: bool
    reviewers: int


def corrected_action_agreement(
    reviews: Sequence[Sequence[Mapping[str, Any]]],
    *,
    radius_px: float = 14.0,
    text_threshold: float = 0.8,
) -> list[FixAgreement]:
    """For every step on which at least two reviewers gave a corrected action (`action`: a list of
    screen-pixel action dicts in their step verdict), how far those corrections agree in GUI terms:
    the lowest pairwise step score, and whether every pair's actions agree action by action."""
    by_step: dict[int, list[Sequence[ActionJson]]] = {}
    for review in reviews:
        for item in review:
            if item.get("action"):
                by_step.setdefault(int(item["index"]), []).append(item["action"])
    out = []
    for index in sorted(by_step):
        fixes = by_step[index]
        if len(fixes) < 2:
            continue
        scores, agree = [], True
        for i in range(len(fixes)):
            for j in range(i + 1, len(fixes)):
                a, b = fixes[i], fixes[j]
                scores.append(step_agreement(a, b, radius_px=radius_px, text_threshold=text_threshold))
                agree &= len(a) == len(b) and all(
                    action_agreement(x, y, radius_px=radius_px, text_threshold=text_threshold).agree
                    for x, y in zip(a, b, strict=True)
                )
        out.append(FixAgreement(index=index, score=min(scores), agree=agree, reviewers=len(fixes)))
    return out
