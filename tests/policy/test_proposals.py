"""Proposals an annotator can accept (issue 34 item 2), with the real embedded model (random weights
from a small config) on live MiniWoB++ pages in Chromium: a hostile answer (unparseable, off the
screen, a garbage key) is never among the candidates, and every candidate shown is one the page
executes; the first candidate is the greedy decode (in process and over HTTP); candidates are
distinct and ordered by log-probability."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from workers.actions.osworld import KEY_ALIASES, KEYBOARD_KEYS
from workers.envs.base import EnvError, Observation, TaskSpec
from workers.envs.browser.miniwob import MiniWoBEnv
from workers.policy.base import Candidate
from workers.policy.embedded.configuration import FlywheelPolicyConfig
from workers.policy.embedded.policy import EmbeddedPolicy, new_model
from workers.policy.openai_client import EMBEDDED, OpenAIPolicy
from workers.policy.proposals import OFF_SCREEN, UNKNOWN_KEY, UNPARSEABLE, propose_executable, screen_key
from workers.policy.server import start_server

TASK = TaskSpec(task_id="click-button", instruction="", kind="browser", source="miniwob")
SEED = 11


def _policy(seed: int, max_new_tokens: int | None = None) -> EmbeddedPolicy:
    """A random small model: on the 160×210 page most of its points are off the screen, its hotkeys
    name random bytes, and capped at a few tokens its answers do not parse."""
    config = FlywheelPolicyConfig(max_thought=2, max_text=6)
    return EmbeddedPolicy(new_model(config, seed=seed), seed=seed, max_new_tokens=max_new_tokens)


class _Sampler(EmbeddedPolicy):
    """The same real model behind a policy that can only sample (as a vLLM server for a model
    without beam search): proposals fall back to the greedy call and rounds of samples."""

    ranks = False


def _shown_is_sound(candidate: Candidate, obs: Observation) -> None:
    """What the page may show, checked from first principles (not with the code under test)."""
    assert candidate.parsed.ok, candidate.raw_text
    for action in candidate.parsed.actions:
        for point in (action.point, action.end_point):
            if point is not None:
                assert 0 <= point.x < obs.width and 0 <= point.y < obs.height, candidate.raw_text
        for key in action.keys or ():
            name = KEY_ALIASES.get(key.lower(), key.lower())
            assert name in KEYBOARD_KEYS or name == "space", candidate.raw_text


@pytest.mark.parametrize(
    ("seed", "max_new_tokens", "hostile"),
    [(1, None, {OFF_SCREEN, UNKNOWN_KEY}), (1, 10, {UNPARSEABLE, OFF_SCREEN})],
)
def test_hostile_answers_are_never_shown_and_the_page_executes_every_candidate(
    miniwob: MiniWoBEnv, seed: int, max_new_tokens: int | None, hostile: set[str]
) -> None:
    # samples (the path of a server without beam search) are where a random model's hostile text is
    policy = _Sampler(_policy(seed).model, seed=seed, max_new_tokens=max_new_tokens)
    obs = miniwob.reset(TASK, seed=SEED)
    proposal = propose_executable(policy, obs, [], k=4, draw=16, max_rounds=3, budget_s=60.0)
    # the model did answer with hostile text, which the old path showed as candidates
    assert hostile <= set(proposal.rejected), proposal.rejected
    assert proposal.candidates
    for candidate in proposal.candidates:
        _shown_is_sound(candidate, obs)
        miniwob.reset(TASK, seed=SEED)
        for action in candidate.parsed.actions:
            try:
                miniwob.step(action)
            except EnvError as exc:
                pytest.fail(f"the page refused candidate {candidate.action_text!r}: {exc}")


def test_the_first_candidate_is_the_greedy_decode_and_the_rest_distinct_and_sorted(
    miniwob: MiniWoBEnv,
) -> None:
    policy = _policy(seed=1)
    obs = miniwob.reset(TASK, seed=SEED)
    greedy = policy.propose(obs, [], n=1, temperature=0.0)[0]
    proposal = propose_executable(policy, obs, [], k=4, draw=16, max_rounds=3, budget_s=60.0)
    assert proposal.greedy_first
    first, others = proposal.candidates[0], proposal.candidates[1:]
    assert first.raw_text == greedy.raw_text and first.token_ids == greedy.token_ids
    assert len(proposal.candidates) == 4
    keys = [screen_key(c, obs.width, obs.height) for c in proposal.candidates]
    assert len(set(keys)) == len(keys)
    scores = [c.logprob_sum for c in others]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


@pytest.fixture
def served() -> Iterator[tuple[EmbeddedPolicy, OpenAIPolicy]]:
    local = _policy(seed=1)
    server, _ = start_server(_policy(seed=1), checkpoint="")
    client = OpenAIPolicy(server.url, "flywheel-embedded", profile=EMBEDDED)
    yield local, client
    client.client.close()
    server.shutdown()
    server.server_close()


def test_over_http_the_first_candidate_is_the_greedy_decode(
    miniwob: MiniWoBEnv, served: tuple[EmbeddedPolicy, OpenAIPolicy]
) -> None:
    local, client = served
    obs = miniwob.reset(TASK, seed=SEED)
    greedy = local.propose(obs, [], n=1, temperature=0.0)[0]
    proposal = propose_executable(client, obs, [], k=3, draw=12, max_rounds=3, budget_s=60.0)
    assert proposal.greedy_first and proposal.candidates[0].raw_text == greedy.raw_text
    assert proposal.candidates[0].logprob_sum == pytest.approx(greedy.logprob_sum, abs=1e-3)
    for candidate in proposal.candidates:
        _shown_is_sound(candidate, obs)


def test_the_time_budget_ends_the_draw(miniwob: MiniWoBEnv) -> None:
    """A clock past the budget after the first call: no round of samples is drawn."""
    policy = _policy(seed=1)
    obs = miniwob.reset(TASK, seed=SEED)
    ticks = iter([0.0, 10.0, 10.0, 10.0])
    proposal = propose_executable(policy, obs, [], k=4, budget_s=1.0, clock=lambda: next(ticks))
    assert proposal.rounds == 0 and 1 <= proposal.drawn <= 1 + 8  # the greedy answer and up to 2k beams
    assert len(proposal.candidates) <= 4


def test_a_policy_that_only_samples_gets_rounds_of_samples(miniwob: MiniWoBEnv) -> None:
    policy = _Sampler(new_model(FlywheelPolicyConfig(max_thought=2, max_text=6), seed=1), seed=1)
    obs = miniwob.reset(TASK, seed=SEED)
    greedy = policy.propose(obs, [], n=1, temperature=0.0)[0]
    proposal = propose_executable(policy, obs, [], k=4, draw=16, max_rounds=3, budget_s=60.0)
    assert proposal.rounds >= 1 and proposal.drawn >= 1 + 16
    assert proposal.greedy_first and proposal.candidates[0].raw_text == greedy.raw_text
    for candidate in proposal.candidates:
        _shown_is_sound(candidate, obs)
