// The annotator's think-aloud in review: play a step's audio (the recording re-encoded after the
// full transcription pass, seeked to the step's words), see each word light up as it plays, edit
// the thought, and move a boundary word to the previous or next step.

import { api, ApiError, errorText } from "../lib/api";
import { h } from "../lib/dom";
import { playSpan, reviewNoiseText, shownThought, wordAt, type StepSpeech, type ThinkAloudState } from "../workspace/thinkaloud";

export class SpeechPanel {
  private state: ThinkAloudState | null = null;
  // preload "none": the recording is fetched when a step is played, not while the page loads (a
  // long think-aloud kept the review page busy for ~15 s).
  private readonly audio = h("audio", { preload: "none", "data-testid": "speech-audio" });
  private frame = 0;
  private stopAt = 0;
  private words: HTMLElement[] = [];
  private current: StepSpeech | null = null;
  private editing = false;
  private error = "";

  constructor(
    private readonly trajectoryId: number,
    private readonly onChange: () => void,
  ) {
    this.audio.addEventListener("pause", () => {
      cancelAnimationFrame(this.frame);
      this.highlight(-1);
    });
  }

  private get base(): string {
    return `/api/annotation/thinkaloud/trajectories/${this.trajectoryId}/`;
  }

  /** Load the think-aloud; a trajectory without one (not annotated, or no audio) shows nothing. */
  async load(): Promise<void> {
    try {
      this.setState(await api<ThinkAloudState>(this.base));
    } catch (error) {
      if (!(error instanceof ApiError && error.status === 404)) this.error = `Think-aloud: ${errorText(error)}`;
    }
  }

  private setState(state: ThinkAloudState): void {
    this.state = state;
    if (state.audio_url !== "" && this.audio.getAttribute("src") !== state.audio_url) this.audio.src = state.audio_url;
  }

  /** The panel for one step, or null when the trajectory has no think-aloud at all. */
  panel(stepIndex: number): HTMLElement | null {
    const state = this.state;
    if (state === null) return this.error !== "" ? h("p", { class: "notice notice-error" }, this.error) : null;
    if (state.chunks.length === 0) return null;
    const pos = state.steps.findIndex((s) => s.index === stepIndex);
    const step = state.steps[pos];
    if (step === undefined) return null;
    this.current = step;
    const previous = state.steps[pos - 1];
    const span = playSpan(step, previous?.clock_end ?? null);
    const canPlay = state.audio_url !== "" && span !== null;
    const play = h("button", { type: "button", class: "btn btn-small", disabled: !canPlay, "data-testid": "speech-play" }, "▶ Play");
    play.addEventListener("click", () => {
      if (span !== null) this.play(span);
    });
    this.words = step.words.map((w, i) => h("span", { class: w.p < 0.5 ? "rv-word rv-word-low" : "rv-word", "data-i": i, title: `${w.start.toFixed(2)}–${w.end.toFixed(2)} s · confidence ${Math.round(w.p * 100)} %` }, w.w));
    const wordLine = h("p", { class: "rv-words", "data-testid": "speech-words" }, ...this.words.flatMap((el, i) => [i > 0 ? " " : "", el]));
    const shown = shownThought(step);
    const toPrev = h("button", { type: "button", class: "btn btn-secondary btn-small", disabled: pos === 0 || step.words.length === 0, title: "Move the first word to the previous step", "data-testid": "speech-move-prev" }, "⇤ first word");
    const toNext = h("button", { type: "button", class: "btn btn-secondary btn-small", disabled: pos === state.steps.length - 1 || step.words.length === 0, title: "Move the last word to the next step", "data-testid": "speech-move-next" }, "last word ⇥");
    toPrev.addEventListener("click", () => void this.move(step.index, "previous"));
    toNext.addEventListener("click", () => void this.move(step.index, "next"));
    const edit = h("button", { type: "button", class: "btn btn-secondary btn-small", "data-testid": "speech-edit" }, "Edit thought");
    edit.addEventListener("click", () => {
      this.editing = true;
      this.onChange();
    });
    let thought: HTMLElement;
    if (this.editing) {
      const area = h("textarea", { rows: 3, "data-testid": "speech-thought-input" });
      area.value = shown.text;
      const save = h("button", { type: "button", class: "btn btn-small" }, "Save");
      const cancel = h("button", { type: "button", class: "btn btn-secondary btn-small" }, "Cancel");
      save.addEventListener("click", () => void this.save(step.index, area.value));
      cancel.addEventListener("click", () => {
        this.editing = false;
        this.onChange();
      });
      thought = h("div", {}, area, h("div", { class: "rv-speech-buttons" }, save, cancel));
    } else {
      const label = { edited: "edited by the annotator", refined: `refined (${step.refined_by.replace(/^llm:/, "")})`, verbatim: "verbatim", none: "" }[shown.kind];
      // Verbatim text is the word line above; only a refined or edited thought is shown again.
      const text = shown.kind === "verbatim" && step.words.length > 0 ? "" : shown.text || "(nothing said for this step)";
      thought = h("p", { class: "rv-speech-thought", "data-testid": "speech-thought" }, text, label ? h("span", { class: "muted" }, text ? ` — ${label}` : label) : null);
    }
    const status = state.status !== "done" ? h("p", { class: "muted" }, state.status === "failed" ? `Transcription failed: ${state.error}` : `Transcription ${state.status}; words may still change.`) : null;
    // The other voice's words in this step's window (after the previous action, up to this one).
    const from = pos > 0 ? (state.steps[pos - 1]?.clock_end ?? -Infinity) : -Infinity;
    const to = step.clock_end ?? Infinity;
    const others = state.uncertain_words.filter((w) => w.start > from && w.start <= to);
    // The room's noise was loud beside the speech: Whisper mishears more there.
    const noisy = state.noisy && state.snr_db !== null ? h("p", { class: "notice notice-warn", "data-testid": "speech-noisy" }, reviewNoiseText(state.snr_db)) : null;
    // Speech the recogniser heard but could not put into words even on a second decode: listen.
    const lost = state.lost_spans > 0 ? h("p", { class: "notice", "data-testid": "speech-lost" }, `${state.lost_spans} stretch${state.lost_spans === 1 ? "" : "es"} of speech gave no words even on a second decode: listen to the recording.`) : null;
    return h(
      "div",
      { class: "rv-speech", "data-testid": "speech" },
      h("div", { class: "rv-speech-head" }, h("strong", {}, "Think-aloud"), play, span !== null ? h("span", { class: "muted" }, `${span[0].toFixed(1)}–${span[1].toFixed(1)} s`) : null),
      status,
      noisy,
      lost,
      step.words.length > 0 ? wordLine : null,
      others.length > 0 ? h("p", { class: "muted rv-words-other", "data-testid": "speech-other-voice", title: "Much quieter than the annotator: another voice in the room, not a thought" }, `Another voice near this step (not counted): ${others.map((w) => w.w).join(" ")}`) : null,
      thought,
      this.error ? h("p", { class: "notice notice-error", role: "alert" }, this.error) : null,
      h("div", { class: "rv-speech-buttons" }, toPrev, toNext, this.editing ? null : edit),
      this.audio,
    );
  }

  private play(span: [number, number]): void {
    const state = this.state;
    if (state === null) return;
    if (this.audio.readyState < HTMLMediaElement.HAVE_METADATA) {
      // Nothing loaded yet (preload none): seek once the metadata is in.
      this.audio.addEventListener("loadedmetadata", () => {
        this.play(span);
      }, { once: true });
      this.audio.preload = "auto"; // the reviewer asked for it now
      this.audio.load();
      return;
    }
    this.audio.currentTime = Math.max(0, span[0] - state.audio_start_clock);
    this.stopAt = span[1] - state.audio_start_clock;
    void this.audio.play().catch((error: unknown) => {
      this.error = `Cannot play the audio: ${errorText(error)}`;
      this.onChange();
    });
    const tick = (): void => {
      if (this.audio.currentTime >= this.stopAt) {
        this.audio.pause();
        return;
      }
      const words = this.current?.words ?? [];
      this.highlight(wordAt(words, state.audio_start_clock + this.audio.currentTime));
      this.frame = requestAnimationFrame(tick);
    };
    cancelAnimationFrame(this.frame);
    this.frame = requestAnimationFrame(tick);
  }

  private highlight(index: number): void {
    for (const [i, el] of this.words.entries()) el.classList.toggle("rv-word-on", i === index);
  }

  private async save(index: number, text: string): Promise<void> {
    try {
      this.setState(await api<ThinkAloudState>(`${this.base}steps/${index}/`, { method: "PATCH", body: { thought: text } }));
      this.editing = false;
      this.error = "";
    } catch (error) {
      this.error = `Could not save: ${errorText(error)}`;
    }
    this.onChange();
  }

  private async move(index: number, direction: "previous" | "next"): Promise<void> {
    try {
      this.setState(await api<ThinkAloudState>(`${this.base}steps/${index}/move/`, { method: "POST", body: { direction, count: 1 } }));
      this.error = "";
    } catch (error) {
      this.error = `Could not move the word: ${errorText(error)}`;
    }
    this.onChange();
  }

  /** A new step is shown: leave edit mode and stop playback. */
  reset(): void {
    this.editing = false;
    this.audio.pause();
  }
}
