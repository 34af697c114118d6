"""Screenshots of one X display with `mss` (1–5 ms at 1280×800), encoded JPEG (default) or PNG."""

from __future__ import annotations

import io
import time

import mss
from PIL import Image

from workers.envs.base import EnvError, ImageFormat


class ScreenGrabber:
    """Grabs the whole screen of `display` (e.g. ':101').

    mss 10 takes the X display as a constructor argument (`display=`), so several sessions can
    grab from one process without touching $DISPLAY. One grabber per session and thread.
    """

    def __init__(self, display: str, jpeg_quality: int = 80) -> None:
        if not 1 <= jpeg_quality <= 95:
            raise EnvError(f"jpeg_quality must be in 1..95, got {jpeg_quality}")
        self._sct = mss.MSS(display=display)
        self._monitor = self._sct.monitors[0]
        self.width = int(self._monitor["width"])
        self.height = int(self._monitor["height"])
        self._quality = jpeg_quality

    def grab(self) -> Image.Image:
        shot = self._sct.grab(self._monitor)
        # `raw` avoids the copy `bgra` makes; BGRX→RGB decodes into a new buffer, so nothing is shared.
        return Image.frombuffer("RGB", shot.size, shot.raw, "raw", "BGRX", 0, 1)

    def capture(self, image_format: ImageFormat = "jpeg") -> tuple[bytes, dict[str, float]]:
        """Encoded screenshot bytes and timings {"grab": ms, "encode": ms}."""
        t0 = time.perf_counter()
        image = self.grab()
        t1 = time.perf_counter()
        data = encode(image, image_format, self._quality)
        t2 = time.perf_counter()
        return data, {"grab": (t1 - t0) * 1000, "encode": (t2 - t1) * 1000}

    def close(self) -> None:
        self._sct.close()


def encode(image: Image.Image, image_format: ImageFormat, quality: int = 80) -> bytes:
    buf = io.BytesIO()
    if image_format == "jpeg":
        image.save(buf, format="JPEG", quality=quality)
    elif image_format == "png":
        # compress_level 1: PNG is for lossless review, not size; level 6 costs ~4x the time.
        image.save(buf, format="PNG", compress_level=1)
    else:
        raise EnvError(f"image_format must be 'jpeg' or 'png', got {image_format!r}")
    return buf.getvalue()
