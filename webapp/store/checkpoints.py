"""Checkpoint registry services: every checkpoint is a Hugging Face model directory under
MEDIA_ROOT/checkpoints/<version>/ with a `Checkpoint` row (version, parent, run, metrics, notes)."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path
from typing import Any

import httpx
from django.conf import settings
from django.db import transaction

from webapp.remote_calls import before_remote_call
from webapp.store.models import Checkpoint
from workers.policy.openai_client import server_root


class CheckpointError(RuntimeError):
    """A checkpoint is missing, broken, or cannot be promoted."""


def policy_weights_secret() -> str:
    """The weights secret of the annotation model's policy server (`serve_policy`): POLICY_WEIGHTS_SECRET,
    else derived from SECRET_KEY, so every process of one install agrees without another setting.
    Not under docker compose (CREDENTIALS_FROM_FILES): there web's SECRET_KEY is its own, and a container
    that does not mount the key (`policy_key`) is not one of the model's callers."""
    if settings.POLICY_WEIGHTS_SECRET:
        return str(settings.POLICY_WEIGHTS_SECRET)
    if settings.CREDENTIALS_FROM_FILES:
        raise CheckpointError(
            "this container holds no key of the annotation model's server (POLICY_WEIGHTS_SECRET_FILE; "
            "docker-compose.yml mounts `policy_key` into its callers only)"
        )
    return hmac.new(settings.SECRET_KEY.encode(), b"flywheel-policy-weights", hashlib.sha256).hexdigest()


def policy_server_key(base_url: str) -> str | None:
    """The key a client sends to the policy server at `base_url`: the annotation model's server
    (POLICY_BASE_URL) answers completions and its model card only with its secret, as its hot-swap;
    any other server gets none of it (the secret never leaves that server's callers)."""
    if base_url and server_root(base_url) == server_root(settings.POLICY_BASE_URL):
        return policy_weights_secret()
    return None


def checkpoint_dir(checkpoint: Checkpoint) -> Path:
    path = Path(checkpoint.path)
    return path if path.is_absolute() else Path(settings.MEDIA_ROOT) / path


def checkpoint_create_initial(*, version: str = "init", seed: int = 0) -> Checkpoint:
    """An untrained embedded policy built from its config (no downloaded weights); idempotent."""
    existing = Checkpoint.objects.filter(version=version).first()
    if existing is not None:
        return existing
    from workers.policy.embedded.configuration import FlywheelPolicyConfig
    from workers.policy.embedded.policy import new_model
    from workers.policy.embedded.tokenizer import FlywheelTokenizer

    relative = Path("checkpoints") / version
    target = Path(settings.MEDIA_ROOT) / relative
    model = new_model(FlywheelPolicyConfig(flywheel_version=version), seed=seed)
    model.save_pretrained(target)
    FlywheelTokenizer().save_pretrained(target)
    return Checkpoint.objects.create(version=version, path=str(relative), notes="untrained embedded policy")


TINY_VLM_VERSION = "tiny-qwen2.5-vl"


def checkpoint_create_tiny_vlm(*, version: str = TINY_VLM_VERSION, seed: int = 0) -> Checkpoint:
    """A tiny Qwen2.5-VL (random weights, tokenizer and image processor built here; ~1 MB): the HF
    vision-language policy a researcher can start a run from on a CPU install; idempotent."""
    existing = Checkpoint.objects.filter(version=version).first()
    if existing is not None:
        return existing
    from workers.policy.hf_vlm.tiny import build_tiny_checkpoint

    relative = Path("checkpoints") / version
    build_tiny_checkpoint(Path(settings.MEDIA_ROOT) / relative, seed=seed, version="0")
    return Checkpoint.objects.create(
        version=version, path=str(relative), profile="hf-vlm",
        notes="tiny Qwen2.5-VL (UI-TARS-1.5's architecture, random weights): an HF vision-language policy for CPU runs",
    )  # fmt: skip


def _profile_of(directory: Path) -> str:
    from workers.policy.base import PolicyError
    from workers.policy.hf_vlm import checkpoint_kind

    try:
        return "hf-vlm" if checkpoint_kind(directory) == "hf_vlm" else "embedded"
    except PolicyError:
        return "embedded"


def checkpoint_register(*, version: str, path: str, parent: Checkpoint | None = None, run_id: int | None = None,
                        metrics: dict[str, Any] | None = None, notes: str = "") -> Checkpoint:  # fmt: skip
    """Record a checkpoint directory written by SFT / RL / merge."""
    if (
        not (Path(path) / "config.json").is_file()
        and not (Path(settings.MEDIA_ROOT) / path / "config.json").is_file()
    ):
        raise CheckpointError(f"{path} is not a checkpoint directory (config.json missing)")
    directory = Path(path) if Path(path).is_absolute() else Path(settings.MEDIA_ROOT) / path
    return Checkpoint.objects.create(
        version=version, path=path, parent=parent, run_id=run_id, metrics=metrics or {}, notes=notes,
        profile=_profile_of(directory),
    )  # fmt: skip


def checkpoint_register_endpoint(
    *, version: str, endpoint_url: str, profile: str, notes: str = ""
) -> Checkpoint:
    """Register an external model server (e.g. vLLM serving UI-TARS) so admins can promote it."""
    if not endpoint_url.startswith(("http://", "https://")):
        raise CheckpointError(f"endpoint_url must be an http(s) URL, got {endpoint_url!r}")
    from workers.policy.profiles import PROFILES

    if profile not in PROFILES:
        raise CheckpointError(f"unknown profile {profile!r}; known: {sorted(PROFILES)}")
    return Checkpoint.objects.create(version=version, endpoint_url=endpoint_url, profile=profile, notes=notes)


def checkpoint_promote_annotation(*, checkpoint: Checkpoint, push_to: str | None = None) -> Checkpoint:
    """Make `checkpoint` the model that proposes to annotators (new sessions use it). With `push_to`
    (an embedded policy server's base URL) the running server loads the weights without a restart:
    first, outside any transaction (a refused push changes nothing), then the rows in a short one.

    Weights (and with them the annotation server's secret) go only to the annotation model's server,
    POLICY_BASE_URL: a `push_to` elsewhere is refused before anything changes."""
    if push_to:
        push_target_check(push_to)
    if push_to and not checkpoint.endpoint_url:
        checkpoint_push_weights(checkpoint=checkpoint, push_to=push_to)
    with transaction.atomic():
        Checkpoint.objects.filter(is_annotation_model=True).exclude(pk=checkpoint.pk).update(
            is_annotation_model=False
        )
        checkpoint.is_annotation_model = True
        checkpoint.save(update_fields=["is_annotation_model"])
    return checkpoint


def push_target_check(push_to: str) -> None:
    """Weights go only to the annotation model's server (POLICY_BASE_URL): its secret never leaves it."""
    if server_root(push_to) != server_root(settings.POLICY_BASE_URL):
        raise CheckpointError(
            f"weights are pushed only to the annotation model's server ({settings.POLICY_BASE_URL}), "
            f"not {push_to[:200]}: its secret never leaves it"
        )


def checkpoint_push_weights(*, checkpoint: Checkpoint, push_to: str) -> None:
    """The embedded policy server at `push_to` loads `checkpoint`'s weights (CheckpointError if not,
    or if `push_to` is not the annotation model's server)."""
    push_target_check(push_to)
    root = server_root(push_to)
    before_remote_call("the policy server's weight load")
    try:
        response = httpx.post(
            f"{root}/v1/load_weights",
            json={"path": str(checkpoint_dir(checkpoint))},
            headers={"Authorization": f"Bearer {policy_weights_secret()}"},
            timeout=120,
        )
    except httpx.HTTPError as exc:
        raise CheckpointError(f"the policy server at {root} did not answer: {exc}") from exc
    if response.status_code != 200:
        raise CheckpointError(f"the policy server refused the weights: {response.text[:500]}")


def checkpoint_install_starter(*, source: Path, figures: dict[str, Any], pool: str) -> Checkpoint:
    """Register the starter model trained in `source` (workers.policy.starter, a cache outside the
    media root) as checkpoint `source.name`, copied into media storage, with its measured success
    on `pool` in its metrics; idempotent."""
    import shutil

    existing = Checkpoint.objects.filter(version=source.name).first()
    if existing is not None:
        return existing
    relative = Path("checkpoints") / source.name
    target = Path(settings.MEDIA_ROOT) / relative
    if not (target / "model.safetensors").is_file():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        # the weights report the version they are registered under (the server labels candidates so)
        config = json.loads((target / "config.json").read_text())
        config["flywheel_version"] = source.name
        (target / "config.json").write_text(json.dumps(config, indent=2))
    recipe = figures.get("recipe", {})
    success = float(figures.get("success_mean", 0.0))
    metrics = {
        "success": success,
        "success_pool": pool,
        "success_episodes": figures.get("eval_episodes"),
        "success_per_task": figures.get("success_per_task", {}),
        "success_seeds": recipe.get("eval_seeds"),
    }
    notes = (
        f"starter model: SFT ({recipe.get('sft_steps')} steps) of a fresh embedded policy on "
        f"{figures.get('examples')} scripted-expert demonstration steps of the {pool} tasks; greedy "
        f"success {100 * success:.0f} % on {figures.get('eval_episodes')} held-out episodes of {pool}"
    )
    return Checkpoint.objects.create(version=source.name, path=str(relative), metrics=metrics, notes=notes)


def checkpoint_success_note(checkpoint: Checkpoint | None) -> str:
    """ "38 % success on demo-miniwob (40 episodes)" from a checkpoint's measured success, "" if none."""
    metrics = checkpoint.metrics if checkpoint is not None else {}
    if not isinstance(metrics.get("success"), int | float) or not metrics.get("success_pool"):
        return ""
    episodes = f" ({metrics['success_episodes']} episodes)" if metrics.get("success_episodes") else ""
    return f"{100 * metrics['success']:.0f} % success on {metrics['success_pool']}{episodes}"
