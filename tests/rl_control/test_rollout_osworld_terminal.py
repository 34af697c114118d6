"""A rollout's terminal action reaches the environment and scores as OSWorld scores it (desktop_env's
DesktopEnv.evaluate: an infeasible task is 1 only when the last action is FAIL, any other task 0 after
FAIL; OSWorld's UI-TARS agent sends call_user as FAIL and finished as DONE). Real parts: `run_episode`
on a leased terminal of a live env host, OSWorld-format tasks with their evaluators, the policy a
real local HTTP server speaking OpenAI chat completions that answers a fixed script per episode."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from rl_control import services
from rl_control.engine.data import rollout_claim
from rl_control.engine.rollout import run_episode
from rl_control.models import EngineState, Run
from tests.chat_server import chat_server
from tests.env_host import env_host, wait_idle
from tests.factories import TaskFactory, TaskPoolFactory
from webapp.fleet import services as fleet
from workers.envs import osworld
from workers.envs.sandbox import sandbox_available
from workers.policy.openai_client import OpenAIPolicy
from workers.policy.profiles import EMBEDDED

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.timeout(600),
    pytest.mark.skipif(not sandbox_available(), reason="needs bwrap with user namespaces, as root"),
]

WRITE_FILE = next(t for t in osworld.load_examples() if t["id"] == "fw-os-002-write-file")
INFEASIBLE = {"id": "fw-inf-font", "instruction": "Set this terminal's font to Comic Sans in GNOME Settings.",
              "config": [], "evaluator": {"func": "infeasible"}}  # fmt: skip
WRITE = "type(content='echo Hello, Flywheel! > ~/hello.txt\\n')"


@pytest.fixture
def policy() -> Iterator[SimpleNamespace]:
    """`script` is the episode's replies in order (its actions; each reply's thought is fixed)."""
    state = SimpleNamespace(script=[])

    def answer(body: dict[str, Any]) -> str:
        return f"Thought: Next.\nAction: {state.script.pop(0)}"

    with chat_server(answer) as server:
        yield SimpleNamespace(url=server.url, state=state)


def _episode(users: Any, policy: SimpleNamespace, task_json: dict[str, Any], script: list[str]) -> Any:
    """One rollout of `task_json` by a model that answers `script`; the closed trajectory."""
    pool = TaskPoolFactory(name=f"osworld-{uuid.uuid4().hex[:8]}")
    TaskFactory(pool=pool, external_id=task_json["id"], env_kind="terminal", source="osworld",
                instruction=task_json["instruction"], setup={"osworld": task_json["config"]},
                verifier={"osworld": task_json["evaluator"]})  # fmt: skip
    run = services.run_create(user=users["researcher"], name="give-up", preset="grpo-dart", pool=pool,
                              config={"env": {"kind": "terminal"}, "curation": {"step_cap": 4}})  # fmt: skip
    Run.objects.filter(pk=run.pk).update(status="running")
    run.refresh_from_db()
    EngineState.objects.create(run=run)
    claim = rollout_claim(run=run, env_slot=0, generation=1)
    assert claim is not None
    policy.state.script = list(script)
    wait_idle("terminal", timeout=120)
    lease = fleet.lease_acquire(kind="terminal", owner=f"rl:{run.pk}:0:1")
    try:
        model = OpenAIPolicy(policy.url, f"run{run.pk}-v0", profile=EMBEDDED)
        run_episode(run=run, claim=claim, lease=lease, policy=model, beat=lambda: True, current_version=0)
    finally:
        fleet.lease_release(lease_id=lease.lease_id)
    assert policy.state.script == []  # the episode ended at the script's terminal action
    claim.trajectory.refresh_from_db()
    return claim.trajectory


def test_a_model_that_gives_up_scores_as_osworld_scores_it(users, policy, engine_names) -> None:
    with env_host("terminal=1"):
        gave_up = _episode(users, policy, INFEASIBLE, ["call_user()"])
        assert (gave_up.status, gave_up.final_reward) == ("completed", 1.0)
        (step,) = gave_up.steps.all()
        assert [a["kind"] for a in step.action] == ["call_user"] and step.done
        assert _episode(users, policy, INFEASIBLE, ["finished(content='done')"]).final_reward == 0.0
        # the same written file: DONE scores it 1, FAIL (giving up on a feasible task) 0
        assert _episode(users, policy, WRITE_FILE, [WRITE, "finished(content='done')"]).final_reward == 1.0
        assert _episode(users, policy, WRITE_FILE, [WRITE, "call_user()"]).final_reward == 0.0
