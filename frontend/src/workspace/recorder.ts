// The workspace's think-aloud recorder: microphone capture with MediaRecorder (record / pause /
// resume, a live level meter), a complete audio file per chunk (the recorder restarts every 10 s
// and at every decision, so the words for a step are uploaded as soon as it is done), uploads with
// progress, and the words the server aligned to each step shown on the timeline, editable.
// Nothing recorded and uploaded is lost on reload: the server keeps the chunks, the page resumes
// recording (the browser remembers the microphone permission) and continues the chunk numbering.

import { api, ApiError, csrfToken, errorMessage, errorText } from "../lib/api";
import { h, render } from "../lib/dom";
import {
  clockSync,
  isFatal,
  noiseText,
  pickMimeType,
  shownThought,
  toSessionClock,
  UploadQueue,
  type ClockSample,
  type ClockSync,
  type PendingChunk,
  type QueueProgress,
  type StepSpeech,
  type ThinkAloudState,
  type UploadOutcome,
} from "./thinkaloud";

const CHUNK_MS = 10_000;

function micError(error: unknown): string {
  const name = error instanceof DOMException ? error.name : "";
  if (name === "NotAllowedError" || name === "SecurityError") return "Microphone blocked: allow it in the address bar, then press Record again.";
  if (name === "NotFoundError") return "No microphone found: plug one in and press Record again.";
  if (name === "NotReadableError") return "The microphone is in use by another program.";
  return `Could not start the microphone: ${errorText(error)}`;
}

function xhrUpload(base: string, rttMs: number, chunk: PendingChunk, onProgress: (sent: number, total: number) => void): Promise<UploadOutcome> {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    xhr.open("PUT", `${base}${chunk.index}/?start_clock=${chunk.startClock}&rtt_ms=${Math.round(rttMs)}`);
    xhr.setRequestHeader("X-CSRFToken", csrfToken());
    xhr.setRequestHeader("Content-Type", chunk.blob.type || "audio/webm");
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.onprogress = (e) => {
      onProgress(e.loaded, e.total);
    };
    xhr.onload = () => {
      let body: unknown;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        body = null; // not JSON (a proxy's error page): the status text is used
      }
      const ok = xhr.status >= 200 && xhr.status < 300;
      resolve({ ok, fatal: !ok && isFatal(xhr.status), status: xhr.status, detail: ok ? "" : errorMessage(xhr.status, body) });
    };
    xhr.onerror = () => {
      resolve({ ok: false, fatal: false, status: 0, detail: "network error" });
    };
    xhr.send(chunk.blob);
  });
}

export class ThinkAloudRecorder {
  private state: ThinkAloudState | null = null;
  private stream: MediaStream | null = null;
  private recorder: MediaRecorder | null = null;
  private sync: ClockSync | null = null;
  private nextIndex = 0;
  private recording = false;
  private paused = false;
  private cutTimer: ReturnType<typeof setTimeout> | null = null;
  private audioCtx: AudioContext | null = null;
  private meterFrame = 0;
  private editing: number | null = null;
  private readonly queue: UploadQueue;
  private readonly storageKey: string;

  readonly root = h("div", { class: "ws-rec", "data-testid": "recorder", "data-state": "off" });
  private readonly toggleButton = h("button", { type: "button", class: "btn btn-small ws-rec-toggle", "data-testid": "record-toggle", "aria-pressed": "false" }, "● Record thoughts");
  private readonly pauseButton = h("button", { type: "button", class: "btn btn-secondary btn-small", "data-testid": "record-pause", hidden: true }, "Pause");
  private readonly meterFill = h("span", { class: "ws-meter-fill" });
  private readonly meter = h("span", { class: "ws-meter", role: "meter", "aria-label": "Microphone level", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": "0", "data-testid": "level-meter", "data-level": "0" }, this.meterFill);
  private readonly status = h("span", { class: "ws-rec-status muted", "data-testid": "record-status", "aria-live": "polite" }, "Not recording");
  private readonly uploadBar = h("progress", { class: "ws-rec-progress", max: "1", value: "0", hidden: true, "data-testid": "upload-progress" });
  private readonly error = h("span", { class: "ws-rec-error", role: "alert", "data-testid": "record-error", hidden: true });
  private readonly noise = h("span", { class: "ws-rec-noise", role: "status", "data-testid": "record-noise", hidden: true });

  constructor(
    private readonly sessionId: number,
    private readonly onSpeech: () => void,
  ) {
    this.storageKey = `flywheel.thinkaloud.${sessionId}`;
    this.queue = new UploadQueue(
      (chunk, onProgress) => xhrUpload(`/api/annotation/sessions/${sessionId}/thinkaloud/chunks/`, this.sync?.rttMs ?? 0, chunk, onProgress),
      (p) => {
        this.showProgress(p);
      },
    );
    this.toggleButton.addEventListener("click", () => {
      void (this.recording ? this.stop() : this.startRecording());
    });
    this.pauseButton.addEventListener("click", () => {
      if (this.paused) this.resume();
      else this.pause();
    });
    render(this.root, this.toggleButton, this.pauseButton, this.meter, this.status, this.uploadBar, this.error, this.noise);
    // Leaving the tab flushes the chunk being recorded; leaving the page with uploads still queued
    // asks first (what is already on the server is safe either way).
    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "hidden") this.cut();
    });
    window.addEventListener("beforeunload", (ev) => {
      if (!this.queue.idle) ev.preventDefault();
    });
  }

  get speech(): ThinkAloudState | null {
    return this.state;
  }

  /** Load the think-aloud state; resume recording when it was on before a reload. */
  async start(active: boolean): Promise<void> {
    try {
      this.setState(await api<ThinkAloudState>(`/api/annotation/sessions/${this.sessionId}/thinkaloud/`));
    } catch (error) {
      this.showError(`Think-aloud unavailable: ${errorText(error)}`);
    }
    if (!active) {
      this.toggleButton.disabled = true;
      this.status.textContent = this.state !== null && this.state.chunks.length > 0 ? this.statusText() : "Not recorded";
      if (this.state?.finished === true) void this.follow();
      return;
    }
    if (sessionStorage.getItem(this.storageKey) === "on") await this.startRecording();
  }

  onEvent(state: ThinkAloudState): void {
    if (state.session_id !== this.sessionId) return;
    this.setState(state);
  }

  private setState(state: ThinkAloudState): void {
    this.state = state;
    this.nextIndex = Math.max(this.nextIndex, state.next_index);
    if (!this.recording) this.status.textContent = this.statusText();
    this.root.dataset.transcription = state.status;
    this.noise.hidden = !state.noisy;
    this.noise.textContent = state.noisy && state.snr_db !== null ? noiseText(state.snr_db) : "";
    this.onSpeech();
  }

  private statusText(): string {
    const s = this.state;
    if (s === null || s.chunks.length === 0) return "Not recording";
    const seconds = Math.round(s.chunks.reduce((a, c) => a + c.duration_s, 0));
    const what: Record<string, string> = { recording: "transcribing as you go", queued: "final transcript queued", running: "final transcript running…", done: "transcribed", failed: `transcription failed: ${s.error}` };
    return `${seconds} s recorded · ${what[s.status] ?? s.status}`;
  }

  // ---------- recording ----------

  private async syncClock(): Promise<void> {
    const samples: ClockSample[] = [];
    for (let i = 0; i < 3; i++) {
      const sentMs = performance.now();
      const state = await api<ThinkAloudState>(`/api/annotation/sessions/${this.sessionId}/thinkaloud/`);
      samples.push({ sentMs, receivedMs: performance.now(), serverClock: state.server_clock });
      this.setState(state);
    }
    this.sync = clockSync(samples);
  }

  private async startRecording(): Promise<void> {
    this.showError("");
    if (typeof MediaRecorder === "undefined" || !("mediaDevices" in navigator)) {
      this.showError("This browser cannot record audio (no MediaRecorder).");
      return;
    }
    this.toggleButton.disabled = true;
    this.status.textContent = "Asking for the microphone…";
    try {
      // The browser's own noise suppression (and echo cancellation, its partner in Chromium) stays off:
      // on noisy speech through Chromium's capture path it left Whisper's errors as they were (196 vs
      // 195 of 828 words) while hiding the room's noise from the measurement behind the noise notice
      // (28–38 dB measured where the room was at 11–20 dB): benchmarks/HISTORY.md, asr.
      this.stream = await navigator.mediaDevices.getUserMedia({ audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false } });
      await this.syncClock();
    } catch (error) {
      this.toggleButton.disabled = false;
      this.stream?.getTracks().forEach((t) => {
        t.stop();
      });
      this.stream = null;
      sessionStorage.removeItem(this.storageKey);
      this.status.textContent = "Not recording";
      this.showError(error instanceof ApiError ? `Think-aloud unavailable: ${error.message}` : micError(error));
      return;
    }
    this.recording = true;
    this.paused = false;
    sessionStorage.setItem(this.storageKey, "on");
    this.startMeter(this.stream);
    this.segment();
    this.drawControls();
  }

  /** Record one self-contained file; when it stops (cut, pause, stop) it is queued for upload. */
  private segment(): void {
    const stream = this.stream;
    if (stream === null) return;
    const mimeType = pickMimeType((t) => MediaRecorder.isTypeSupported(t));
    const recorder = new MediaRecorder(stream, { ...(mimeType ? { mimeType } : {}), audioBitsPerSecond: 48_000 });
    const parts: Blob[] = [];
    let startedAt = performance.now();
    recorder.onstart = () => {
      startedAt = performance.now();
    };
    recorder.ondataavailable = (e) => {
      if (e.data.size > 0) parts.push(e.data);
    };
    recorder.onstop = () => {
      const blob = new Blob(parts, { type: recorder.mimeType || mimeType || "audio/webm" });
      if (blob.size > 0 && this.sync !== null) this.queue.push({ index: this.nextIndex++, startClock: toSessionClock(this.sync, startedAt), blob });
      if (this.recording && !this.paused && this.recorder === recorder) this.segment();
    };
    this.recorder = recorder;
    recorder.start();
    if (this.cutTimer !== null) clearTimeout(this.cutTimer);
    this.cutTimer = setTimeout(() => {
      this.cut();
    }, CHUNK_MS);
  }

  /** End the current chunk now (called after each decision, so that step's words go up at once). */
  cut(): void {
    if (this.recorder !== null && this.recorder.state === "recording") this.recorder.stop();
  }

  pause(): void {
    if (!this.recording || this.paused) return;
    this.paused = true;
    this.cut();
    this.drawControls();
  }

  resume(): void {
    if (!this.recording || !this.paused) return;
    this.paused = false;
    this.segment();
    this.drawControls();
  }

  /** Stop recording and wait until every chunk is uploaded. */
  async stop(): Promise<void> {
    if (!this.recording) return;
    this.recording = false;
    sessionStorage.removeItem(this.storageKey);
    const recorder = this.recorder;
    if (recorder !== null && recorder.state !== "inactive") {
      await new Promise<void>((resolve) => {
        recorder.addEventListener("stop", () => {
          resolve();
        }, { once: true });
        recorder.stop();
      });
    }
    this.recorder = null;
    if (this.cutTimer !== null) clearTimeout(this.cutTimer);
    this.stream?.getTracks().forEach((t) => {
      t.stop();
    });
    this.stream = null;
    this.stopMeter();
    this.drawControls();
    await this.queue.drained();
  }

  /** The session ended: stop, upload what is left, and ask for the full transcription pass. */
  async finish(): Promise<void> {
    await this.stop();
    if (this.nextIndex === 0 && (this.state?.chunks.length ?? 0) === 0) return;
    try {
      this.setState(await api<ThinkAloudState>(`/api/annotation/sessions/${this.sessionId}/thinkaloud/finish/`, { method: "POST" }));
    } catch (error) {
      this.showError(`Could not start the transcription: ${errorText(error)}`);
      return;
    } finally {
      this.toggleButton.disabled = true;
    }
    await this.follow();
  }

  /** After the session ended its websocket is closed: poll until the full pass is done. */
  private async follow(): Promise<void> {
    for (let i = 0; i < 300; i++) {
      if (this.state === null || this.state.status === "done" || this.state.status === "failed") return;
      await new Promise((resolve) => setTimeout(resolve, 2000));
      try {
        this.setState(await api<ThinkAloudState>(`/api/annotation/sessions/${this.sessionId}/thinkaloud/`));
      } catch {
        // Try again on the next round; the transcript is on the server either way.
      }
    }
  }

  private drawControls(): void {
    const on = this.recording;
    this.root.dataset.state = !on ? "off" : this.paused ? "paused" : "on";
    this.toggleButton.disabled = false;
    this.toggleButton.textContent = on ? "■ Stop recording" : "● Record thoughts";
    this.toggleButton.setAttribute("aria-pressed", String(on));
    this.pauseButton.hidden = !on;
    this.pauseButton.textContent = this.paused ? "Resume" : "Pause";
    this.status.textContent = on ? (this.paused ? "Paused" : "Recording — think aloud") : this.statusText();
  }

  private showProgress(p: QueueProgress): void {
    const busy = p.pending > 0;
    this.uploadBar.hidden = !busy;
    this.uploadBar.value = p.current;
    this.root.dataset.uploaded = String(p.uploaded);
    this.uploadBar.title = `${p.uploaded} chunk${p.uploaded === 1 ? "" : "s"} uploaded (${Math.round(p.bytesSent / 1024)} KB), ${p.pending} waiting`;
    this.showError(p.lastError);
  }

  private showError(text: string): void {
    this.error.textContent = text;
    this.error.hidden = text === "";
  }

  // ---------- level meter ----------

  private startMeter(stream: MediaStream): void {
    try {
      const ctx = new AudioContext();
      const analyser = ctx.createAnalyser();
      analyser.fftSize = 1024;
      ctx.createMediaStreamSource(stream).connect(analyser);
      const buf = new Float32Array(analyser.fftSize);
      this.audioCtx = ctx;
      // Resumed after a reload the context may start suspended (no user gesture yet): wake it on
      // the next click so the meter moves.
      if (ctx.state === "suspended") {
        document.addEventListener("click", () => void ctx.resume(), { once: true });
      }
      const draw = (): void => {
        analyser.getFloatTimeDomainData(buf);
        let sum = 0;
        for (const v of buf) sum += v * v;
        const db = 20 * Math.log10(Math.sqrt(sum / buf.length) + 1e-9);
        const level = this.paused ? 0 : Math.max(0, Math.min(100, Math.round(((db + 60) / 60) * 100)));
        this.meterFill.style.width = `${level}%`;
        this.meter.setAttribute("aria-valuenow", String(level));
        this.meter.dataset.level = String(level);
        this.meterFrame = requestAnimationFrame(draw);
      };
      draw();
    } catch {
      // No Web Audio: recording still works, only the meter stays flat.
    }
  }

  private stopMeter(): void {
    cancelAnimationFrame(this.meterFrame);
    void this.audioCtx?.close();
    this.audioCtx = null;
    this.meterFill.style.width = "0%";
    this.meter.dataset.level = "0";
  }

  // ---------- the words on the timeline ----------

  /** Put each step's spoken thought under its card in the timeline (called after every redraw). */
  decorate(timelineBox: HTMLElement): void {
    const state = this.state;
    if (state === null) return;
    for (const step of state.steps) {
      const card = timelineBox.querySelector<HTMLElement>(`[data-testid="step-${step.index}"]`);
      if (card === null) continue;
      // Keep what the annotator is typing: events that arrive meanwhile must not reset the editor.
      if (this.editing === step.index && card.querySelector(".ws-said textarea") !== null) continue;
      card.querySelector(".ws-said")?.remove();
      card.append(this.said(step));
    }
  }

  private said(step: StepSpeech): HTMLElement {
    const box = h("div", { class: "ws-said", "data-testid": `said-${step.index}` });
    if (this.editing === step.index) {
      const area = h("textarea", { rows: 3, "aria-label": `Thought for step ${step.index + 1}`, "data-testid": `said-edit-${step.index}` });
      area.value = shownThought(step).text;
      const save = h("button", { type: "button", class: "btn btn-small" }, "Save");
      const cancel = h("button", { type: "button", class: "btn btn-secondary btn-small" }, "Cancel");
      save.addEventListener("click", () => void this.saveThought(step.index, area.value));
      cancel.addEventListener("click", () => {
        this.editing = null;
        this.onSpeech();
      });
      render(box, area, h("div", { class: "ws-said-buttons" }, save, cancel));
      setTimeout(() => {
        area.focus();
      }, 0);
      return box;
    }
    const shown = shownThought(step);
    const label = { edited: "Your words", refined: "Refined", verbatim: "Said", none: "Said" }[shown.kind];
    const edit = h("button", { type: "button", class: "ws-said-edit", title: "Edit this thought", "aria-label": `Edit the thought of step ${step.index + 1}` }, "✎");
    edit.addEventListener("click", () => {
      this.editing = step.index;
      this.onSpeech();
    });
    let body: HTMLElement;
    if (shown.kind === "verbatim") {
      body = h("p", { class: "ws-said-text", "data-testid": `said-text-${step.index}` }, ...step.words.flatMap((w, i) => [i > 0 ? " " : "", h("span", { class: w.p < 0.5 ? "ws-word ws-word-low" : "ws-word", title: `${w.start.toFixed(1)}–${w.end.toFixed(1)} s · confidence ${Math.round(w.p * 100)} %` }, w.w)]));
    } else if (shown.kind === "none") {
      const waiting = this.state !== null && this.state.chunks.length > 0 && this.state.status !== "done";
      body = h("p", { class: "ws-said-text muted", "data-testid": `said-text-${step.index}` }, waiting ? "…" : "(nothing said)");
    } else {
      body = h("p", { class: "ws-said-text", "data-testid": `said-text-${step.index}`, title: step.verbatim ? `Said: ${step.verbatim}` : "" }, shown.text);
    }
    render(box, h("div", { class: "ws-said-head" }, h("span", { class: "ws-said-label" }, label), edit), body);
    return box;
  }

  private async saveThought(index: number, text: string): Promise<void> {
    try {
      const state = await api<ThinkAloudState>(`/api/annotation/sessions/${this.sessionId}/thinkaloud/steps/${index}/`, { method: "PATCH", body: { thought: text } });
      this.editing = null;
      this.setState(state);
    } catch (error) {
      this.showError(`Could not save the thought: ${errorText(error)}`);
    }
  }
}
