"""Dataset iterations: V(s)=1 → SFT, the rest → CT (nothing discarded), versioned, filtered by source /
pool / date, with cards; exported through the store's export jobs in every format; SFT examples."""

from __future__ import annotations

import json
import zipfile

import pytest

from tests.flywheel.conftest import make_trajectory
from webapp.flywheel.models import DatasetMembership
from webapp.flywheel.services.datasets import DatasetError, dataset_build, dataset_export
from webapp.flywheel.services.training import dataset_sft_examples
from webapp.flywheel.services.validation import pool_validation_set, validate_pending
from webapp.store.models import ExportFormat, ExportJob
from webapp.store.tasks import export_job_execute

pytestmark = pytest.mark.django_db


@pytest.fixture
def validated(tasks):
    trajs = [
        make_trajectory(tasks[0], reward=1.0, steps=2),
        make_trajectory(tasks[0], reward=0.0, steps=3),
        make_trajectory(tasks[1], reward=1.0, steps=1, source="annotation"),
        make_trajectory(tasks[2], reward=0.0, steps=1, source="rl"),
    ]
    validate_pending()
    return trajs


def test_build_splits_versions_and_card(validated, tasks) -> None:
    with pytest.raises(DatasetError):
        dataset_build(filters={"sources": ["import"]})
    first = dataset_build()
    assert (first.version, first.sft_count, first.ct_count) == (1, 2, 2)
    card = first.card
    assert card["v1_rate"] == 0.5
    assert card["per_task"]["click-test"] == {"sft": 1, "ct": 1}
    assert card["per_source"]["annotation"] == {"sft": 1}
    assert card["length"]["ct"]["histogram"] == {"1": 1, "3": 1}
    assert card["steps"] == {"sft": 3, "ct": 4}
    only_rs = dataset_build(filters={"sources": ["rejection_sampling"], "pool": tasks[0].pool_id})
    assert (only_rs.version, only_rs.sft_count + only_rs.ct_count) == (2, 2)
    with pytest.raises(DatasetError):
        dataset_build(filters={"created_after": "2999-01-01"})
    with pytest.raises(DatasetError):
        dataset_build(filters={"created_after": "yesterday"})


@pytest.mark.parametrize("fmt", ExportFormat.values)
def test_export_every_format_filters_by_membership(validated, admin_user, fmt) -> None:
    dataset = dataset_build()
    make_trajectory(validated[0].task, reward=1.0)  # validated later: not a member of this dataset
    validate_pending()
    job = dataset_export(dataset=dataset, format=fmt, user=admin_user, split="sft")
    export_job_execute(job.pk)
    job = ExportJob.objects.get(pk=job.pk)
    assert job.status == "succeeded", job.error
    assert job.total_trajectories == 2
    names = zipfile.ZipFile(job.archive.open("rb")).namelist()
    assert names
    if fmt == "jsonl":
        body = zipfile.ZipFile(job.archive.open("rb")).read(next(n for n in names if n.endswith(".jsonl")))
        ids = {json.loads(line)["id"] for line in body.splitlines() if line.strip()}
        assert ids == {validated[0].pk, validated[2].pk}


def test_sft_examples_include_judge_marked_prefixes(tasks, judge_url) -> None:
    pool_validation_set(pool_id=tasks[0].pool_id, mode="judge", judge_url=judge_url)
    make_trajectory(tasks[0], reward=1.0, steps=2)
    failed = make_trajectory(tasks[0], reward=0.0, steps=3)  # the judge keeps its first 2 steps
    validate_pending()
    dataset = dataset_build()
    assert dataset.prefix_count == 1
    assert DatasetMembership.objects.get(dataset=dataset, trajectory=failed).sft_prefix_steps == 2
    examples = dataset_sft_examples(dataset=dataset)
    assert len(examples) == 4
    assert examples[0].target == "Thought: Click OK (0).\nAction: click(start_box='(60,70)')"
    assert (
        "Instruction: Click OK." in examples[0].inputs.text
        and '[0] button "OK" (60,70)' in examples[0].inputs.text
    )
    assert len(dataset_sft_examples(dataset=dataset, include_prefixes=False)) == 2
