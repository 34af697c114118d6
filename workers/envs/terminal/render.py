"""Render terminal text as an image, so terminal observations carry a screenshot like every other kind."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

_MONO = Path("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
FONT_SIZE = 15
LINE_HEIGHT = 19
MARGIN = 8


@lru_cache(maxsize=1)
def _font() -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    if _MONO.exists():
        return ImageFont.truetype(str(_MONO), FONT_SIZE)
    return ImageFont.load_default(size=FONT_SIZE)


def visible_lines(text: str, width: int, height: int) -> list[str]:
    """The last lines of `text` that fit on a `width`×`height` screen, long lines wrapped."""
    columns = max(1, (width - 2 * MARGIN) // max(1, round(_font().getlength("M"))))
    rows = max(1, (height - 2 * MARGIN) // LINE_HEIGHT)
    wrapped: list[str] = []
    for line in text.expandtabs(4).split("\n"):
        wrapped.extend(line[i : i + columns] for i in range(0, max(len(line), 1), columns))
    return wrapped[-rows:]


def render_terminal(text: str, width: int, height: int) -> Image.Image:
    image = Image.new("RGB", (width, height), (16, 16, 16))
    draw = ImageDraw.Draw(image)
    font = _font()
    for row, line in enumerate(visible_lines(text, width, height)):
        draw.text((MARGIN, MARGIN + row * LINE_HEIGHT), line, fill=(220, 220, 220), font=font)
    return image
