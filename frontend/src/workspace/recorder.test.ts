import { describe, expect, it } from "vitest";
import { ThinkAloudRecorder } from "./recorder";
import type { ThinkAloudState } from "./thinkaloud";

function speechState(verbatim: string): ThinkAloudState {
  return {
    session_id: 7,
    status: "recording",
    finished: false,
    error: "",
    server_clock: 30,
    chunks: [{ index: 0, start_clock: 1, duration_s: 10, size: 1000, transcribed: true, error: "" }],
    next_index: 1,
    audio_url: "",
    audio_start_clock: 0,
    audio_s: 0,
    model: "",
    processing_s: null,
    retried_spans: 0,
    lost_spans: 0,
    snapped: [],
    uncertain_words: [],
    snr_db: null,
    noisy: false,
    final: null,
    steps: [
      {
        index: 0, clock_start: 1, clock_end: 9, verbatim, refined: "", refined_by: "", edited: false, moved: false,
        words: verbatim.split(" ").map((w, i) => ({ w, start: 2 + i * 0.4, end: 2.3 + i * 0.4, p: i === 1 ? 0.3 : 0.9 })),
      },
      { index: 1, clock_start: 9, clock_end: 15, verbatim: "", refined: "", refined_by: "", edited: false, moved: false, words: [] },
    ],
  };
}

function timeline(): HTMLElement {
  const box = document.createElement("section");
  for (const i of [0, 1]) {
    const li = document.createElement("li");
    li.dataset.testid = `step-${i}`;
    box.append(li);
  }
  return box;
}

describe("ThinkAloudRecorder", () => {
  it("puts each step's words under its card, marking unsure words, and keeps an edit in progress", () => {
    const box = timeline();
    const recorder = new ThinkAloudRecorder(7, () => {
      recorder.decorate(box);
    });
    recorder.onEvent(speechState("open the menu"));
    const said = box.querySelector<HTMLElement>('[data-testid="said-text-0"]');
    expect(said?.textContent).toBe("open the menu");
    expect(said?.querySelectorAll(".ws-word-low")).toHaveLength(1);
    // Step 2 has no words yet while transcription runs.
    expect(box.querySelector('[data-testid="said-text-1"]')?.textContent).toBe("…");
    // Another session's event is ignored.
    recorder.onEvent({ ...speechState("something else"), session_id: 8 });
    expect(box.querySelector('[data-testid="said-text-0"]')?.textContent).toBe("open the menu");

    box.querySelector<HTMLButtonElement>('[data-testid="said-0"] .ws-said-edit')?.click();
    const area = box.querySelector<HTMLTextAreaElement>('[data-testid="said-edit-0"]');
    expect(area?.value).toBe("open the menu");
    if (area !== null) area.value = "I open the menu.";
    recorder.onEvent(speechState("open the menu now")); // a live update arrives while typing
    expect(box.querySelector<HTMLTextAreaElement>('[data-testid="said-edit-0"]')?.value).toBe("I open the menu.");
    expect(box.querySelectorAll(".ws-said")).toHaveLength(2);
  });

  it("shows a refined or edited thought with its label", () => {
    const box = timeline();
    const recorder = new ThinkAloudRecorder(7, () => {
      recorder.decorate(box);
    });
    const state = speechState("uh open the menu");
    const first = state.steps[0];
    if (first === undefined) throw new Error("fixture has a step 0");
    state.steps[0] = { ...first, refined: "I open the menu.", refined_by: "annotator", edited: true };
    recorder.onEvent(state);
    const card = box.querySelector('[data-testid="said-0"]');
    expect(card?.textContent).toContain("Your words");
    expect(card?.textContent).toContain("I open the menu.");
    expect(box.querySelector('[data-testid="said-text-0"]')?.getAttribute("title")).toBe("Said: uh open the menu");
  });

  it("tells the annotator when the room is noisy, and stops once it is not", () => {
    const recorder = new ThinkAloudRecorder(7, () => undefined);
    const notice = recorder.root.querySelector<HTMLElement>('[data-testid="record-noise"]');
    recorder.onEvent(speechState("open the menu"));
    expect(notice?.hidden).toBe(true);
    recorder.onEvent({ ...speechState("open the menu"), snr_db: 13.6, noisy: true });
    expect(notice?.hidden).toBe(false);
    expect(notice?.textContent).toContain("about 14 dB above it");
    recorder.onEvent({ ...speechState("open the menu"), snr_db: 31.0, noisy: false });
    expect(notice?.hidden).toBe(true);
  });

  it("says clearly when the browser cannot record", async () => {
    const recorder = new ThinkAloudRecorder(7, () => undefined);
    document.body.append(recorder.root);
    const withoutRecorder = globalThis as { MediaRecorder?: unknown };
    const saved = withoutRecorder.MediaRecorder;
    delete withoutRecorder.MediaRecorder;
    try {
      recorder.root.querySelector<HTMLButtonElement>('[data-testid="record-toggle"]')?.click();
      await Promise.resolve();
      const error = recorder.root.querySelector<HTMLElement>('[data-testid="record-error"]');
      expect(error?.hidden).toBe(false);
      expect(error?.textContent).toContain("cannot record audio");
      expect(recorder.root.dataset.state).toBe("off");
    } finally {
      if (saved !== undefined) withoutRecorder.MediaRecorder = saved;
      recorder.root.remove();
    }
  });
});
