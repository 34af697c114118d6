"""The scripted MiniWoB++ expert solves its tasks in real Chromium, and `evaluate` scores policies."""

from __future__ import annotations

import pytest

from workers.envs.browser.miniwob import MiniWoBEnv
from workers.policy.embedded.grammar import Grammar
from workers.policy.embedded.tokenizer import FlywheelTokenizer
from workers.policy.evaluate import evaluate
from workers.policy.expert import ExpertPolicy, collect_demonstrations, run_expert_episode

TASKS = [
    "click-test",
    "click-button",
    "click-link",
    "focus-text",
    "enter-text",
    "click-dialog",
    "click-tab",
    "click-checkboxes",
]


@pytest.mark.parametrize("task", TASKS)
def test_expert_solves_the_task_for_several_seeds(miniwob: MiniWoBEnv, task: str) -> None:
    for seed in (0, 17, 123):
        episode = run_expert_episode(miniwob, task, seed)
        assert episode.success, (task, seed, episode.error)
        assert episode.examples
        grammar = Grammar(FlywheelTokenizer())
        for example in episode.examples:
            assert example.target.startswith("Thought: ") and "\nAction: " in example.target
            grammar.encode_response(example.target)  # inside the embedded model's grammar
            assert example.inputs.image  # the screenshot the policy would see
            # the clicked point is printed in the prompt's element list (a copyable coordinate)
            action = example.target.split("Action: ", 1)[1]
            if action.startswith("click"):
                point = action.split("'", 2)[1]
                assert f"{point}\n" in example.inputs.text + "\n"


def test_click_dialog_is_on_screen(miniwob: MiniWoBEnv) -> None:
    from workers.envs.base import TaskSpec

    obs = miniwob.reset(TaskSpec("click-dialog", "", "browser", "miniwob"), seed=5)
    close = next(el for el in obs.elements if el.tag == "button" and el.text == "Close")
    assert 0 <= close.x and close.x + close.width <= 160


def test_evaluate_scores_the_expert_at_one_and_a_do_nothing_policy_at_zero(miniwob: MiniWoBEnv) -> None:
    report = evaluate(ExpertPolicy(miniwob), ["click-tab", "enter-text"], [1, 2], env=miniwob)
    assert report.per_task == {"click-tab": 1.0, "enter-text": 1.0} and report.mean == 1.0

    class Quitter:
        def propose(self, observation, history, task=None, n=4, temperature=1.0):
            [candidate] = ExpertPolicy(miniwob).propose(observation, [object()] * 99, task, n=1)
            return [candidate]

    report = evaluate(Quitter(), ["click-tab"], [1, 2], env=miniwob)
    assert report.per_task == {"click-tab": 0.0}
    assert all(ep.steps == 1 and ep.actions == ["finished(content='')"] for ep in report.episodes)


def test_collect_demonstrations_keeps_successful_episodes_only(miniwob: MiniWoBEnv) -> None:
    examples = collect_demonstrations(["enter-text", "click-color"], [3], env=miniwob)
    assert [e.target.split("Action: ")[1].split("(")[0] for e in examples] == ["click", "type", "click"]


def test_action_only_demonstrations_have_empty_thoughts_and_the_same_actions(miniwob: MiniWoBEnv) -> None:
    full = collect_demonstrations(["enter-text"], [3], env=miniwob)
    bare = collect_demonstrations(["enter-text"], [3], env=miniwob, thoughts=False)
    assert [e.target.split("\nAction: ")[1] for e in bare] == [e.target.split("\nAction: ")[1] for e in full]
    assert all(e.target.startswith("Thought: \nAction: ") for e in bare)
    assert all(not e.target.startswith("Thought: \n") for e in full)
    # the history the later steps read keeps the actions either way
    assert [e.inputs.text for e in bare] == [e.inputs.text for e in full]
