"""A scripted MiniWoB++ expert that writes UI-TARS responses, and demonstration collection.

The expert reads the task's utterance (from `MiniWoBEnv.expert_state()`) and the observation's
element list, and plans the whole episode at reset as (thought, action) steps. Every click target is
the centre of an element in the observation, rounded exactly as `prompts.format_elements` prints it,
so a policy can learn to copy the coordinate from its prompt.

Supported: click-test, click-test-2, click-button, click-link, focus-text, enter-text,
enter-password, click-dialog, click-tab, click-checkboxes, click-option, click-widget,
click-button-sequence.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from workers.actions.types import Action, Convention, Point
from workers.envs.base import Element, Observation, TaskSpec
from workers.policy.base import Candidate, HistoryItem, parse_text
from workers.policy.sft import SFTExample, example_from_step

Plan = list[tuple[str, str]]  # (thought, action text)


class ExpertError(RuntimeError):
    """The expert cannot solve this episode (unknown task or an element it needs is missing)."""


def _point(el: Element) -> str:
    cx, cy = el.center
    return f"({round(cx)},{round(cy)})"


def click(el: Element, thought: str) -> tuple[str, str]:
    return thought, f"click(start_box='{_point(el)}')"


def _find(obs: Observation, pred: Callable[[Element], bool], what: str) -> Element:
    for el in obs.elements:
        if pred(el):
            return el
    raise ExpertError(f"no element for {what}")


def _quoted(utterance: str) -> str:
    match = re.search(r'"([^"]*)"', utterance)
    if match is None:
        raise ExpertError(f"no quoted target in {utterance!r}")
    return match.group(1)


def _text_is(text: str) -> Callable[[Element], bool]:
    return lambda el: el.text.strip() == text


def _input_after_label(obs: Observation, label: str, kind: str) -> Element:
    """Checkbox / radio inputs follow their label in document order."""
    els = list(obs.elements)
    for i, el in enumerate(els):
        if el.tag == "label" and el.text.strip() == label:
            for nxt in els[i + 1 : i + 3]:
                if nxt.tag == f"input:{kind}":
                    return nxt
    raise ExpertError(f"no {kind} for label {label!r}")


def _submit(obs: Observation) -> Element:
    return _find(obs, lambda el: el.tag == "button" and el.text.strip().lower() == "submit", "Submit")


def plan_episode(task: str, utterance: str, obs: Observation) -> Plan:
    """All (thought, action) steps that solve this episode, decided from the first observation."""
    if task == "click-test":
        return [click(_find(obs, lambda el: el.tag == "button", "button"), "Click the button.")]
    if task in ("click-test-2", "click-button"):
        target = _quoted(utterance) if task == "click-button" else utterance.split()[-1].rstrip(".")
        el = _find(obs, lambda el: el.tag == "button" and el.text.strip() == target, target)
        return [click(el, f'Click the "{target}" button.')]
    if task == "click-link":
        target = _quoted(utterance)
        return [click(_find(obs, _text_is(target), target), f'Click the link "{target}".')]
    if task == "focus-text":
        el = _find(obs, lambda el: el.tag.startswith("input:text"), "textbox")
        return [click(el, "Click the textbox to focus it.")]
    if task == "enter-text":
        target = _quoted(utterance)
        field = _find(obs, lambda el: el.tag == "input:text", "text field")
        return [
            click(field, "Click the text field."),
            (f'Type "{target}".', f"type(content='{target}')"),
            click(_submit(obs), "Press Submit."),
        ]
    if task == "enter-password":
        target = _quoted(utterance)
        fields = [el for el in obs.elements if el.tag == "input:password"]
        if len(fields) != 2:
            raise ExpertError("expected two password fields")
        return [
            click(fields[0], "Click the password field."),
            (f'Type "{target}".', f"type(content='{target}')"),
            click(fields[1], "Click the verify field."),
            (f'Type "{target}" again.', f"type(content='{target}')"),
            click(_submit(obs), "Press Submit."),
        ]
    if task == "click-dialog":
        close = _find(obs, lambda el: el.tag == "button" and el.text.strip() == "Close", "close button")
        return [click(close, 'Click the "x" to close the dialog.')]
    if task == "click-tab":
        number = re.search(r"#(\d+)", utterance)
        if number is None:
            raise ExpertError(f"no tab number in {utterance!r}")
        name = f"Tab #{number.group(1)}"
        return [
            click(_find(obs, lambda el: el.tag == "a" and el.text.strip() == name, name), f"Click {name}.")
        ]
    if task == "click-checkboxes":
        match = re.fullmatch(r"Select (.*) and click Submit\.", utterance)
        if match is None:
            raise ExpertError(f"unexpected utterance {utterance!r}")
        words = [] if match.group(1) == "nothing" else re.split(r",\s*", match.group(1))
        steps = [click(_input_after_label(obs, w, "checkbox"), f"Tick {w}.") for w in words]
        return [*steps, click(_submit(obs), "Press Submit.")]
    if task == "click-option":
        target = utterance.split()[1]
        return [
            click(_input_after_label(obs, target, "radio"), f"Select {target}."),
            click(_submit(obs), "Press Submit."),
        ]
    if task == "click-widget":
        target = _quoted(utterance)
        tags = {target, f"input:{target}"}
        return [click(_find(obs, lambda el: el.tag in tags, target), f"Click the {target} widget.")]
    if task == "click-button-sequence":
        one = _find(obs, lambda el: el.tag == "button" and el.text.strip() == "ONE", "ONE")
        two = _find(obs, lambda el: el.tag == "button" and el.text.strip() == "TWO", "TWO")
        return [click(one, "Click button ONE."), click(two, "Then click button TWO.")]
    raise ExpertError(f"no scripted expert for {task!r}")


SUPPORTED_TASKS: tuple[str, ...] = (
    "click-test",
    "click-test-2",
    "click-button",
    "click-link",
    "focus-text",
    "enter-text",
    "enter-password",
    "click-dialog",
    "click-tab",
    "click-checkboxes",
    "click-option",
    "click-widget",
    "click-button-sequence",
)


def without_thoughts(plan: Plan) -> Plan:
    """The same steps with empty thoughts (action-only demonstrations)."""
    return [("", action_text) for _, action_text in plan]


def to_action(action_text: str) -> Action:
    """The expert's own calls as `Action`s (its output is a fixed, known subset of the grammar)."""
    match = re.fullmatch(r"click\(start_box='\((\d+),(\d+)\)'\)", action_text)
    if match:
        return Action("click", point=Point(float(match.group(1)), float(match.group(2))))
    match = re.fullmatch(r"type\(content='(.*)'\)", action_text)
    if match:
        return Action("type", text=match.group(1))
    raise ExpertError(f"not an expert action: {action_text!r}")


@dataclass(frozen=True)
class ExpertStep:
    """One planned step as played: the observation the expert acted on and its response."""

    observation: Observation
    thought: str
    action_text: str
    action: Action


@dataclass
class ExpertPlay:
    """An expert episode as played: its steps, the final observation and the env's reward.
    `error` says why the expert could not plan it (then `steps` is empty)."""

    steps: list[ExpertStep]
    final: Observation
    reward: float
    error: str | None = None

    @property
    def success(self) -> bool:
        return self.reward > 0


def play_expert_episode(env: object, spec: TaskSpec, seed: int, thoughts: bool = True) -> ExpertPlay:
    """The one expert player: reset `env` (a `MiniWoBEnv`) on `spec` (`task_id` the MiniWoB++ task
    name) with `seed`, plan the episode from the hidden utterance and play it to the plan's end or
    the env's done. `thoughts=False` plays empty thoughts (action-only demonstrations). Every
    demonstration collector (SFT examples, the store's `import` demos, the flywheel's annotation
    stand-ins) records from its result."""
    obs = env.reset(spec, seed=seed)  # type: ignore[attr-defined]
    state = env.expert_state()  # type: ignore[attr-defined]
    try:
        plan = plan_episode(spec.task_id, state["utterance"], obs)
    except ExpertError as exc:
        return ExpertPlay([], obs, 0.0, str(exc))
    steps: list[ExpertStep] = []
    for thought, action_text in plan if thoughts else without_thoughts(plan):
        action = to_action(action_text)
        steps.append(ExpertStep(obs, thought, action_text, action))
        result = env.step(action)  # type: ignore[attr-defined]
        obs = result.observation
        if result.done:
            break
    return ExpertPlay(steps, obs, float(env.evaluate()))  # type: ignore[attr-defined]


@dataclass
class Episode:
    task: str
    seed: int
    success: bool
    examples: list[SFTExample]
    error: str | None = None


def run_expert_episode(env: object, task: str, seed: int, thoughts: bool = True) -> Episode:
    """Play one episode with the expert in a `MiniWoBEnv`, recording one SFT example per step;
    `thoughts=False` records an empty thought (action-only demonstrations)."""
    spec = TaskSpec(task_id=task, instruction="", kind="browser", source="miniwob")
    play = play_expert_episode(env, spec, seed, thoughts)
    history: list[HistoryItem] = []
    examples: list[SFTExample] = []
    for step in play.steps:
        target = f"Thought: {step.thought}\nAction: {step.action_text}"
        examples.append(example_from_step(step.observation, history, target))
        history.append(HistoryItem(step.thought, step.action_text))
    return Episode(task, seed, play.success, examples, play.error)


def collect_demonstrations(
    task_names: list[str] | tuple[str, ...],
    seeds: list[int] | range,
    env: object | None = None,
    thoughts: bool = True,
) -> list[SFTExample]:
    """SFT examples from the expert's successful episodes (failed ones are dropped); `thoughts=False`
    gives action-only examples (empty thoughts)."""
    own = env is None
    if env is None:
        from workers.envs.browser.miniwob import MiniWoBEnv

        env = MiniWoBEnv(wait_s=0.0)
    examples: list[SFTExample] = []
    try:
        for task in task_names:
            for seed in seeds:
                episode = run_expert_episode(env, task, seed, thoughts)
                if episode.success:
                    examples += episode.examples
    finally:
        if own:
            env.close()  # type: ignore[attr-defined]
    return examples


class ExpertPolicy:
    """The expert as a `Policy` (an upper bound for `evaluate`): it plans from `env.expert_state()`
    at the first step of an episode and then proposes the next planned step. It reads the task's
    hidden state, so it is a measuring stick, never a proposer for annotators."""

    def __init__(self, env: object, version: str = "expert") -> None:
        self.env = env
        self.version = version
        self.plan: Plan = []

    def propose(
        self,
        observation: Observation,
        history: list[HistoryItem],
        task: TaskSpec | None = None,
        n: int = 4,
        temperature: float = 1.0,
    ) -> list[Candidate]:
        if not history:
            state = self.env.expert_state()  # type: ignore[attr-defined]
            self.plan = plan_episode(state["task"], state["utterance"], observation)
        if len(history) >= len(self.plan):
            thought, action = "The task is done.", "finished(content='')"
        else:
            thought, action = self.plan[len(history)]
        text = f"Thought: {thought}\nAction: {action}"
        candidate = Candidate(
            thought=thought,
            action_text=action,
            parsed=parse_text(text, Convention.SCREEN),
            logprob_sum=0.0,
            token_logprobs=None,
            model_version=self.version,
            raw_text=text,
            image_size=(observation.width, observation.height),
        )
        return [candidate] * n
