"""UI-TARS prompt templates and the chat-message layout the policies send and the server reads.

Templates adapted from the UI-TARS 1.5 `prompt.py` (COMPUTER_USE, MOBILE_USE, GROUNDING), with the
`<|box_start|>(x1,y1)<|box_end|>` point form. Message layout (as UI-TARS-desktop sends it):

    user:      <template with the instruction>
    [user:     <screenshot of step i>]        only for the last K-1 history steps
    assistant: Thought: ...\\nAction: ...      every history step
    user:      <current screenshot> [+ "Elements:\\n[i] tag \\"text\\" (x,y)..." when include_elements]

The embedded model reads one flat text (`build_embedded_prompt`): the instruction, the element list
with CENTRE coordinates in screen pixels, and the recent actions. `EmbeddedPolicy` builds it from an
Observation; the policy server rebuilds the same text from the chat messages above
(`embedded_prompt_from_messages`), so in-process and over-HTTP inputs are identical.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from workers.envs.base import Element

COMPUTER_USE = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
left_double(start_box='<|box_start|>(x1,y1)<|box_end|>')
right_single(start_box='<|box_start|>(x1,y1)<|box_end|>')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
hotkey(key='ctrl c') # Split keys with a space and use lowercase. Also, do not use more than 3 keys in one hotkey action.
type(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we can parse the content in normal python string format. If you want to submit your input, use \\n at the end of content.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left') # Show more information on the `direction` side.
wait() #Sleep for 5s and take a screenshot to check for any changes.
finished(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we can parse the content in normal python string format.
call_user() # Submit the task and call the user when the task is unsolvable, or when you need the user's help.

## Note
- Use {language} in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.

## User Instruction
{instruction}
"""

MOBILE_USE = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format
```
Thought: ...
Action: ...
```

## Action Space

click(start_box='<|box_start|>(x1,y1)<|box_end|>')
long_press(start_box='<|box_start|>(x1,y1)<|box_end|>')
type(content='') #If you want to submit your input, use "\\n" at the end of `content`.
scroll(start_box='<|box_start|>(x1,y1)<|box_end|>', direction='down or up or right or left')
open_app(app_name='')
drag(start_box='<|box_start|>(x1,y1)<|box_end|>', end_box='<|box_start|>(x3,y3)<|box_end|>')
press_home()
press_back()
finished(content='xxx') # Use escape characters \\', \\", and \\n in content part to ensure we can parse the content in normal python string format.

## Note
- Use {language} in `Thought` part.
- Write a small plan and finally summarize your next action (with its target element) in one sentence in `Thought` part.

## User Instruction
{instruction}
"""

GROUNDING = """You are a GUI agent. You are given a task and your action history, with screenshots. You need to perform the next action to complete the task.

## Output Format

Action: ...


## Action Space
click(start_box='<|box_start|>(x1,y1)<|box_end|>')

## User Instruction
{instruction}
"""

TEMPLATES: dict[str, str] = {"computer": COMPUTER_USE, "mobile": MOBILE_USE, "grounding": GROUNDING}
INSTRUCTION_MARKER = "## User Instruction\n"
ELEMENTS_HEADER = "Elements:\n"
SUMMARY_HEADER = "## Episodic Summary\n"
EMBEDDED_HISTORY_STEPS = 4


def render_template(kind: str, instruction: str, language: str = "English") -> str:
    """The system text for `kind` in {"computer", "mobile", "grounding"}."""
    if kind not in TEMPLATES:
        raise ValueError(f"unknown prompt kind {kind!r}; expected one of {sorted(TEMPLATES)}")
    return TEMPLATES[kind].replace("{language}", language).replace("{instruction}", instruction)


def format_elements(elements: tuple[Element, ...] | list[Element]) -> str:
    """`[i] tag "text" (cx,cy)` per line: centre coordinates rounded to screen pixels (SPEC §7:
    centres, not corners, doubled what a small model learned)."""
    lines = []
    for el in elements:
        cx, cy = el.center
        text = " ".join(el.text.split())[:40].replace('"', "'")
        lines.append(f'[{el.index}] {el.tag} "{text}" ({round(cx)},{round(cy)})')
    return "\n".join(lines)


def build_embedded_prompt(
    instruction: str, elements_text: str, actions: list[str], summary: str | None = None
) -> str:
    """The embedded model's flat prompt; only the last EMBEDDED_HISTORY_STEPS actions are kept."""
    parts = [f"Instruction: {instruction.strip()}", f"Elements:\n{elements_text.strip()}"]
    if summary:
        parts.append(f"Summary: {summary.strip()}")
    recent = actions[-EMBEDDED_HISTORY_STEPS:]
    parts.append("History:\n" + "\n".join(a.strip() for a in recent) if recent else "History: none")
    return "\n".join(parts)


def data_url(image: bytes, image_format: str = "jpeg") -> str:
    return f"data:image/{image_format};base64,{base64.b64encode(image).decode('ascii')}"


def decode_data_url(url: str) -> bytes:
    """Bytes of a `data:image/...;base64,` URL; ValueError for anything else (no remote fetches)."""
    head, sep, payload = url.partition(",")
    if not sep or not head.startswith("data:image/") or not head.endswith(";base64"):
        raise ValueError("image_url must be a base64 data URL (data:image/...;base64,...)")
    try:
        return base64.b64decode(payload, validate=True)
    except ValueError as exc:
        raise ValueError(f"image_url is not valid base64: {exc}") from exc


@dataclass(frozen=True)
class EmbeddedInputs:
    """What the embedded model reads: the flat prompt text and the current screenshot (or None)."""

    text: str
    image: bytes | None


@dataclass(frozen=True)
class ChatInputs:
    """What an HF vision-language policy reads: the chat messages as sent to the server (UI-TARS
    layout, images as data URLs); workers.policy.hf_vlm.model.encode_prompt tokenises them."""

    messages: list[dict[str, Any]]


def _text_parts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        raise ValueError("message content must be a string or a list of parts")
    texts = []
    for part in content:
        if not isinstance(part, dict) or "type" not in part:
            raise ValueError("each content part must be an object with a 'type'")
        if part["type"] == "text":
            texts.append(str(part.get("text", "")))
    return texts


def _images(content: Any) -> list[str]:
    if not isinstance(content, list):
        return []
    urls = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "image_url":
            image_url = part.get("image_url")
            url = image_url.get("url") if isinstance(image_url, dict) else image_url
            if not isinstance(url, str):
                raise ValueError("image_url part without a url")
            urls.append(url)
    return urls


def embedded_prompt_from_messages(messages: Any) -> EmbeddedInputs:
    """Rebuild the embedded prompt from chat messages laid out as in the module docstring.

    Instruction: text after "## User Instruction\\n" in the first user/system text (else that whole
    text). Elements: the text part starting with "Elements:\\n" in the last user message. Summary:
    text after "## Episodic Summary\\n". History: the Action part of every assistant message.
    Screenshot: the last image of the last user message. Raises ValueError on malformed messages.
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError("messages must be a non-empty list")
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("system", "user", "assistant"):
            raise ValueError("each message needs a role of system, user or assistant")
    first_text = next(
        (t for m in messages if m["role"] != "assistant" for t in _text_parts(m.get("content"))), ""
    )
    instruction = (
        first_text.split(INSTRUCTION_MARKER, 1)[1] if INSTRUCTION_MARKER in first_text else first_text
    )
    summary = None
    if SUMMARY_HEADER in instruction:
        instruction, summary = instruction.split(SUMMARY_HEADER, 1)
    users = [m for m in messages if m["role"] == "user"]
    last_user = users[-1] if users else messages[-1]
    elements = next(
        (
            t[len(ELEMENTS_HEADER) :]
            for t in _text_parts(last_user.get("content"))
            if t.startswith(ELEMENTS_HEADER)
        ),
        "",
    )
    actions = []
    for message in messages:
        if message["role"] == "assistant":
            text = " ".join(_text_parts(message.get("content")))
            actions.append(text.split("Action:", 1)[1] if "Action:" in text else text)
    images = _images(last_user.get("content"))
    image = decode_data_url(images[-1]) if images else None
    return EmbeddedInputs(build_embedded_prompt(instruction, elements, actions, summary), image)
