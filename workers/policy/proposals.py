"""Candidates an annotator can accept (issue 34 item 2): the greedy action first, then distinct,
executable answers ordered by log-probability.

`propose_executable` asks any `Policy` (the embedded model in-process, or `OpenAIPolicy` over a
policy server or vLLM) for its greedy answer (temperature 0) and, from a policy that `ranks` (the
embedded model: one batched beam search over one encoding of the screenshot and prompt), its most
probable distinct answers in the same call; then, while fewer than `k` distinct executable actions
are found, for rounds of samples at temperature 1, up to `max_rounds` and within `budget_s`.

A candidate is executable when its text parses, every point lies on the screen and every key is a
key name (`executable_error`); nothing else is ever returned. Beams and samples at temperature 1
keep every log-probability under the model's own distribution (the greedy's is reported under T = 1
too), so they rank the candidates and label each with its probability.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from workers.actions.coords import action_to_screen, off_screen_error
from workers.actions.osworld import Unsupported, pyautogui_key
from workers.actions.types import Action
from workers.envs.base import Observation, TaskSpec
from workers.policy.base import Candidate, HistoryItem

SAMPLE_TEMPERATURE = 1.0
DEFAULT_BUDGET_S = 1.0  # no round of samples is started that would end after this (wall time)
DEFAULT_MAX_ROUNDS = 3  # rounds of samples at most (the greedy call is not counted)

# Why a drawn answer is not shown (the keys of `Proposal.rejected`).
UNPARSEABLE, OFF_SCREEN, UNKNOWN_KEY, EMPTY_TEXT, DUPLICATE = (
    "unparseable", "off_screen", "unknown_key", "empty_text", "duplicate",
)  # fmt: skip


@dataclass(frozen=True)
class Proposal:
    """What `propose_executable` returns: the candidates to show (greedy first when executable, the
    rest by log-probability), whether the first is the greedy answer, and what was drawn."""

    candidates: list[Candidate]
    greedy_first: bool
    drawn: int
    rounds: int
    rejected: dict[str, int] = field(default_factory=dict)
    elapsed_ms: float = 0.0


def action_problem(action: Action, candidate: Candidate, screen_w: int, screen_h: int) -> tuple[str, str]:
    """(reason key, message) why `action` cannot run on a screen_w × screen_h screen; ("", "") if it can."""
    model_w, model_h = candidate.image_size or (None, None)
    if action_to_screen(action, candidate.convention, screen_w, screen_h, model_w, model_h).clamped:
        return OFF_SCREEN, off_screen_error(action, candidate.convention, screen_w, screen_h)
    if action.kind == "hotkey":
        for key in action.keys or ():
            try:
                pyautogui_key(key)
            except Unsupported:
                return UNKNOWN_KEY, f"unknown key {key[:40]!r}"
    if action.kind == "type" and not action.text:
        return EMPTY_TEXT, "type needs text"
    return "", ""


def executable_error(candidate: Candidate, screen_w: int, screen_h: int) -> tuple[str, str]:
    """(reason key, message) why the candidate cannot be executed as it is; ("", "") if it can."""
    parsed = candidate.parsed
    if not parsed.ok:
        return UNPARSEABLE, parsed.error.message if parsed.error else "no action"
    for action in parsed.actions:
        reason = action_problem(action, candidate, screen_w, screen_h)
        if reason[0]:
            return reason
    return "", ""


def screen_key(candidate: Candidate, screen_w: int, screen_h: int) -> str:
    """Identifies what the candidate does on the screen (two texts doing the same are one action)."""
    model_w, model_h = candidate.image_size or (None, None)
    actions = [
        action_to_screen(a, candidate.convention, screen_w, screen_h, model_w, model_h).action.to_json()
        for a in candidate.parsed.actions
    ]
    return json.dumps(actions, sort_keys=True)


def probability(candidate: Candidate) -> float | None:
    """The model's probability of the candidate's whole answer (thought and action), or None."""
    return math.exp(candidate.logprob_sum) if candidate.logprob_sum is not None else None


class _Pool:
    """Distinct executable candidates by screen action; the higher log-prob text of one action wins."""

    def __init__(self, screen_w: int, screen_h: int) -> None:
        self.size = (screen_w, screen_h)
        self.by_key: dict[str, Candidate] = {}
        self.rejected: Counter[str] = Counter()

    def add(self, candidate: Candidate) -> str:
        """The candidate's screen key when it is executable (kept or merged), else ""."""
        reason, _ = executable_error(candidate, *self.size)
        if reason:
            self.rejected[reason] += 1
            return ""
        key = screen_key(candidate, *self.size)
        held = self.by_key.get(key)
        if held is None:
            self.by_key[key] = candidate
        else:
            self.rejected[DUPLICATE] += 1
            if _score(candidate) > _score(held):
                self.by_key[key] = candidate
        return key


def _score(candidate: Candidate) -> float:
    return candidate.logprob_sum if candidate.logprob_sum is not None else -math.inf


def _ranked(
    policy: Any,
    observation: Observation,
    history: list[HistoryItem],
    task: TaskSpec | None,
    width: int,
) -> tuple[Candidate, list[Candidate]] | None:
    """The greedy candidate and the `width` most probable ones from one call, when `policy` can
    give them (the embedded model in-process, or a client whose server `ranks`); else None."""
    ranks = getattr(policy, "ranks", None)  # a client says whether its server ranks (OpenAIPolicy)
    if ranks is not None:
        if not ranks:
            return None
        answer: tuple[Candidate, list[Candidate]] = policy.propose_ranked(
            observation, history, task, width=width
        )
        return answer
    # An in-process embedded model: its module is loaded when one exists (no torch import otherwise).
    embedded = sys.modules.get("workers.policy.embedded.policy")
    if embedded is not None and isinstance(policy, embedded.EmbeddedPolicy):
        from workers.policy.ranking import propose_ranked

        return propose_ranked(policy, observation, history, task, width=width)
    return None


def propose_executable(
    policy: Any,
    observation: Observation,
    history: list[HistoryItem],
    task: TaskSpec | None = None,
    *,
    k: int,
    draw: int | None = None,
    budget_s: float = DEFAULT_BUDGET_S,
    max_rounds: int = DEFAULT_MAX_ROUNDS,
    clock: Callable[[], float] = time.perf_counter,
) -> Proposal:
    """Up to `k` distinct executable candidates for `observation` (precondition: k >= 1): the greedy
    answer first when it is executable (its own text, even if another text of the same action scored
    higher), then the others by log-probability, highest first. `draw`: answers per call (default
    2k). Raises what the policy raises (PolicyError).

    A policy that `ranks` (the embedded model, in-process or over its policy server) gives the greedy
    answer and the `draw` most probable distinct answers from one call; any other, the greedy answer
    and then rounds of `draw` samples. Either way, rounds of samples follow while fewer than `k` are
    found, `max_rounds` is not reached and the next round is expected to end within `budget_s` (it
    takes as long as the last call did; after a ranked call, one round always runs)."""
    started = clock()
    width = draw or 2 * k
    pool = _Pool(observation.width, observation.height)
    answer = _ranked(policy, observation, history, task, width)
    if answer is not None:
        greedy_list, ranked = [answer[0]], answer[1]
        drawn = 1 + len(ranked)
    else:
        greedy_list, ranked = policy.propose(observation, history, task, n=1, temperature=0.0), []
        drawn = len(greedy_list)
    greedy_key = pool.add(greedy_list[0]) if greedy_list else ""
    if greedy_key:
        pool.by_key[greedy_key] = greedy_list[0]  # the greedy text stays, whatever merges into its action

    def add_all(candidates: list[Candidate]) -> None:
        for candidate in candidates:
            key = pool.add(candidate)
            if key and key == greedy_key:
                pool.by_key[greedy_key] = greedy_list[0]

    add_all(ranked)
    rounds, last_call_s = 0, clock() - started
    # A ranked call (beams) costs more than a round of samples, so it does not forecast one: the first
    # round runs whenever the beams left fewer than k (an untrained model's most probable answers are
    # mostly off-screen or unparseable); later rounds only when they would end within the budget.
    while (
        len(pool.by_key) < k
        and rounds < max_rounds
        and ((rounds == 0 and answer is not None) or clock() - started + last_call_s <= budget_s)
    ):
        call_started = clock()
        samples = policy.propose(observation, history, task, n=width, temperature=SAMPLE_TEMPERATURE)
        rounds, drawn, last_call_s = rounds + 1, drawn + len(samples), clock() - call_started
        add_all(samples)
    others = sorted((c for key, c in pool.by_key.items() if key != greedy_key), key=_score, reverse=True)
    first = [pool.by_key[greedy_key]] if greedy_key else []
    return Proposal(
        candidates=(first + others)[:k],
        greedy_first=bool(greedy_key),
        drawn=drawn,
        rounds=rounds,
        rejected=dict(pool.rejected),
        elapsed_ms=round((clock() - started) * 1000, 1),
    )
