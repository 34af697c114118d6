"""factory_boy factories for the store (real rows in the real PostgreSQL)."""

from __future__ import annotations

import factory

from webapp.store.models import Step, Task, TaskPool, Trajectory


class TaskPoolFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = TaskPool

    name = factory.Sequence(lambda n: f"pool-{n}")


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Task

    pool = factory.SubFactory(TaskPoolFactory)
    external_id = factory.Sequence(lambda n: f"task-{n}")
    instruction = factory.Sequence(lambda n: f"Click the button number {n}")
    env_kind = "browser"
    source = "miniwob"


class TrajectoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Trajectory

    task = factory.SubFactory(TaskFactory)
    env_kind = factory.LazyAttribute(lambda o: o.task.env_kind)
    source = "rl"


class StepFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Step

    trajectory = factory.SubFactory(TrajectoryFactory)
    index = factory.Sequence(lambda n: n)
    thought = "I should click the submit button."
    action_text = "click(start_box='(80,120)')"
    action = factory.LazyFunction(lambda: [{"kind": "click", "point": [80, 120]}])
