"""Screens before each take-over action: a background recorder of the desktop's frames.

While an annotator drives the desktop by hand (take-over, SPEC §1), their input is recorded by the
VNC proxy with `time.monotonic()` stamps. To give every resulting step the screen it acted on,
this recorder grabs the display every `interval_s` on its own thread (its own mss handle: mss is
per thread), keeps only frames that differ from the previous one, and answers "the last frame
captured before time t" for each action. Bounded: at most `max_frames` distinct frames are kept
(oldest dropped) and it stops itself after `max_s`.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque

from workers.envs.desktop.capture import ScreenGrabber


class FrameRecorder:
    def __init__(
        self,
        display: str,
        jpeg_quality: int = 80,
        interval_s: float = 0.1,
        max_frames: int = 600,
        max_s: float = 1800.0,
    ) -> None:
        self.display = display
        self.jpeg_quality = jpeg_quality
        self.interval_s = interval_s
        self.max_s = max_s
        self._frames: deque[tuple[float, bytes]] = deque(maxlen=max_frames)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"frames-{display}", daemon=True)
        self.error: str | None = None

    def start(self) -> FrameRecorder:
        self._thread.start()
        self._ready.wait(timeout=5)  # the first frame: the screen the take-over starts from
        return self

    def _run(self) -> None:
        try:
            grabber = ScreenGrabber(self.display, self.jpeg_quality)
        except Exception as exc:  # a dead display: nothing to record, say why
            self.error = f"cannot grab {self.display}: {exc}"
            self._ready.set()
            return
        started = time.monotonic()
        last: bytes | None = None
        try:
            while not self._stop.is_set() and time.monotonic() - started < self.max_s:
                t = time.monotonic()
                try:
                    data, _ = grabber.capture("jpeg")
                except Exception as exc:
                    self.error = f"grab failed: {exc}"
                    break
                if data != last:
                    with self._lock:
                        self._frames.append((t, data))
                    last = data
                self._ready.set()
                self._stop.wait(max(0.0, self.interval_s - (time.monotonic() - t)))
        finally:
            self._ready.set()
            grabber.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def count(self) -> int:
        with self._lock:
            return len(self._frames)

    def before(self, times: list[float]) -> list[bytes | None]:
        """For each monotonic time, the last frame captured at or before it (None if none was)."""
        with self._lock:
            stamps = [t for t, _ in self._frames]
            frames = [f for _, f in self._frames]
        out: list[bytes | None] = []
        for t in times:
            i = bisect.bisect_right(stamps, t) - 1
            out.append(frames[i] if i >= 0 else None)
        return out
