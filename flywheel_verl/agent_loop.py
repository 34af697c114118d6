"""`FlywheelGUIAgentLoop`: verl 0.9's `AgentLoopBase` for multi-turn GUI episodes on Flywheel.

Register it with verl through an agent-loop config file (submit.py writes it):

    - name: flywheel_gui
      _target_: flywheel_verl.agent_loop.FlywheelGUIAgentLoop

and give each dataset row what workers.rl.verl_rows.rl_row writes (`agent_name: flywheel_gui`,
`extra_info.flywheel_task` = the task on Flywheel's wire, `extra_info.seed`); the export's verl rows
and `verl_submit`'s are built by it, and `task_from_extra` reads them here. Config (`flywheel`
section of verl's config): `envs`
("fleet" or "local"), `env_kind`, `max_turns`.

One episode is one verl sample: the UI-TARS prompt (workers.policy.prompts.COMPUTER_USE) with the
first screenshot is the prompt; every turn appends the model's tokens (response mask 1, with their
rollout log-probs) and then the next screenshot as a user turn (mask 0), through verl's Continuous
Token builder so the tokens are exactly what the actor will score. The episode ends at a terminal
action (finished / call_user), when the environment says done, or after `max_turns`; the
verifier's reward is the sample's `reward_score`. Screenshots are resized with Qwen2.5-VL's
smart_resize to the processor's pixel cap, so the model's coordinates (Convention.ABSOLUTE_RESIZED)
map back to the screen exactly as in Flywheel's own rollouts.
"""

from __future__ import annotations

import asyncio
import io
import logging
from typing import Any
from uuid import uuid4

from PIL import Image
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register

from flywheel_verl.envs import Envs, FleetEnvs, LocalEnvs
from workers.actions.coords import action_to_screen, smart_resize
from workers.actions.parse import parse_response
from workers.actions.types import TERMINAL_KINDS, Convention
from workers.policy.prompts import render_template
from workers.rl.verl_rows import task_from_extra

log = logging.getLogger(__name__)


def screenshot_image(data: bytes, max_pixels: int) -> Image.Image:
    img = Image.open(io.BytesIO(data)).convert("RGB")
    h, w = smart_resize(img.height, img.width, max_pixels=max_pixels)
    return img if (w, h) == img.size else img.resize((w, h), Image.Resampling.BICUBIC)


@register("flywheel_gui")
class FlywheelGUIAgentLoop(AgentLoopBase):
    def __init__(self, *args: Any, envs: Envs | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = self.config.get("flywheel", {}) or {}
        self.max_turns = int(settings.get("max_turns", 8))
        self.env_kind = str(settings.get("env_kind", "browser"))
        self.envs_mode = str(settings.get("envs", "fleet"))
        self._envs = envs
        processor = getattr(self.processor, "image_processor", None)
        size = getattr(processor, "size", None) or {}
        self.max_pixels = int(
            getattr(processor, "max_pixels", None) or size.get("longest_edge") or 16384 * 28 * 28
        )
        self.response_length = int(self.rollout_config.response_length)

    def _open_envs(self) -> Envs:
        if self._envs is not None:
            return self._envs
        if self.envs_mode == "local":
            return LocalEnvs(self.env_kind)
        return FleetEnvs(self.env_kind, owner=f"verl:{uuid4().hex[:8]}")

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        task, seed = task_from_extra(kwargs.get("extra_info"))
        envs = await asyncio.to_thread(self._open_envs)
        metrics: dict[str, float] = {"generate_sequences": 0.0, "tool_calls": 0.0}
        try:
            obs = await asyncio.to_thread(envs.open, task, seed)
            instruction = obs.instruction or str(task.get("instruction", ""))
            images = [screenshot_image(obs.screenshot, self.max_pixels)]
            messages: list[dict[str, Any]] = [
                {"role": "user", "content": [{"type": "text", "text": render_template("computer", instruction)},
                                             {"type": "image", "image": images[0]}]},
            ]  # fmt: skip
            prompt_ids = await self.ct_build_initial_tokens(messages, images=images)
            runtime = list(prompt_ids)
            mask: list[int] = []
            logprobs: list[float] | None = []
            turns, done = 0, False
            for turn in range(self.max_turns):
                started = asyncio.get_running_loop().time()
                out = await self.server_manager.generate(
                    request_id=uuid4().hex,
                    prompt_ids=runtime,
                    sampling_params=sampling_params,
                    image_data=images,
                )
                metrics["generate_sequences"] += asyncio.get_running_loop().time() - started
                merged, mask, logprobs = await self.ct_merge_assistant_token(
                    runtime, out.token_ids, mask, logprobs, assistant_logprobs=out.log_probs or None
                )
                runtime = merged.token_ids
                turns += 1
                text = self.tokenizer.decode(out.token_ids, skip_special_tokens=True)
                messages.append({"role": "assistant", "content": text})
                parsed = parse_response(text, convention=Convention.ABSOLUTE_RESIZED)
                terminal = False
                started = asyncio.get_running_loop().time()
                for action in parsed.actions if parsed.error is None else []:
                    # a terminal action is sent too: an OSWorld task is scored from the last action
                    terminal = action.kind in TERMINAL_KINDS
                    screen = action_to_screen(
                        action, Convention.ABSOLUTE_RESIZED, obs.width, obs.height, *images[-1].size
                    ).action
                    obs, done = await asyncio.to_thread(envs.step, screen.to_json())
                    if done or terminal:
                        break
                metrics["tool_calls"] += asyncio.get_running_loop().time() - started
                last = turn == self.max_turns - 1
                if terminal or done or last or len(runtime) - len(prompt_ids) >= self.response_length:
                    break
                images.append(screenshot_image(obs.screenshot, self.max_pixels))
                previous = list(messages)
                # the image rides in the message: the builder renders its placeholder span from it
                messages.append({"role": "user", "content": [{"type": "image", "image": images[-1]}]})
                merged, mask, logprobs = await self.ct_merge_context_msg(
                    previous, messages, runtime, mask, logprobs
                )
                runtime = merged.token_ids
            reward = await asyncio.to_thread(envs.evaluate)
        finally:
            await asyncio.to_thread(envs.close)
        response = runtime[len(prompt_ids) :][: self.response_length]
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response,
            response_mask=mask[: len(response)],
            response_logprobs=logprobs[: len(response)] if logprobs else None,
            multi_modal_data={"images": images},
            reward_score=float(reward),
            num_turns=2 * turns,
            metrics=AgentLoopMetrics(**metrics),
            extra_fields={"flywheel_task": task.get("task_id"), "turns": turns, "done": done},
        )
