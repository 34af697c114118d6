import { describe, expect, it } from "vitest";
import { clockSync, isFatal, pickMimeType, playSpan, retryDelayMs, shownThought, toSessionClock, UploadQueue, wordAt, type PendingChunk, type StepSpeech, type UploadOutcome } from "./thinkaloud";

function step(partial: Partial<StepSpeech>): StepSpeech {
  return { index: 0, clock_start: null, clock_end: null, words: [], verbatim: "", refined: "", refined_by: "", edited: false, moved: false, ...partial };
}

describe("clockSync", () => {
  it("uses the sample with the shortest round trip, at its midpoint", () => {
    const sync = clockSync([
      { sentMs: 1000, receivedMs: 1400, serverClock: 50.0 },
      { sentMs: 2000, receivedMs: 2040, serverClock: 51.3 },
      { sentMs: 3000, receivedMs: 3300, serverClock: 52.0 },
    ]);
    expect(sync.rttMs).toBe(40);
    // The server read 51.3 at page time 2.020 s.
    expect(sync.offsetS).toBeCloseTo(51.3 - 2.02, 6);
    expect(toSessionClock(sync, 2020)).toBeCloseTo(51.3, 3);
    expect(toSessionClock(sync, 12_020)).toBeCloseTo(61.3, 3);
    // A page time just before the session's zero (a clock estimate a little off) is 0, never negative.
    expect(toSessionClock({ ...sync, offsetS: -2.5 }, 1000)).toBe(0);
  });
  it("refuses no samples", () => {
    expect(() => clockSync([])).toThrow();
  });
});

function chunk(index: number, size = 10): PendingChunk {
  return { index, startClock: index * 10, blob: new Blob([new Uint8Array(size)], { type: "audio/webm" }) };
}

describe("UploadQueue", () => {
  it("sends in order, retries transient failures with backoff and drops refused chunks", async () => {
    const sent: number[] = [];
    const sleeps: number[] = [];
    const answers: UploadOutcome[] = [
      { ok: false, fatal: false, status: 503, detail: "busy" },
      { ok: true, fatal: false, status: 201, detail: "" },
      { ok: false, fatal: true, status: 415, detail: "unsupported audio type" },
      { ok: true, fatal: false, status: 200, detail: "" },
    ];
    const queue = new UploadQueue(
      (c, progress) => {
        sent.push(c.index);
        progress(c.blob.size, c.blob.size);
        const answer = answers.shift();
        return answer === undefined ? Promise.reject(new Error("unexpected upload")) : Promise.resolve(answer);
      },
      () => undefined,
      (ms) => {
        sleeps.push(ms);
        return Promise.resolve();
      },
    );
    queue.push(chunk(0));
    queue.push(chunk(1));
    queue.push(chunk(2, 30));
    await queue.drained();
    expect(sent).toEqual([0, 0, 1, 2]);
    expect(sleeps).toEqual([1000]);
    expect(queue.progress.uploaded).toBe(2);
    expect(queue.progress.failed).toBe(1);
    expect(queue.progress.bytesSent).toBe(40);
    expect(queue.progress.pending).toBe(0);
    expect(queue.progress.lastError).toBe("");
    expect(queue.idle).toBe(true);
  });
  it("keeps the refusal reason when the last chunk is refused", async () => {
    const queue = new UploadQueue(
      () => Promise.resolve({ ok: false, fatal: true, status: 413, detail: "too large" }),
      () => undefined,
    );
    queue.push(chunk(4));
    await queue.drained();
    expect(queue.progress.lastError).toContain("Chunk 5 was refused: too large");
  });
  it("treats a thrown upload as transient", async () => {
    let calls = 0;
    const queue = new UploadQueue(
      () => {
        calls += 1;
        return calls === 1 ? Promise.reject(new Error("offline")) : Promise.resolve({ ok: true, fatal: false, status: 201, detail: "" });
      },
      () => undefined,
      () => Promise.resolve(),
    );
    queue.push(chunk(0));
    await queue.drained();
    expect(calls).toBe(2);
    expect(queue.progress.uploaded).toBe(1);
  });
});

describe("helpers", () => {
  it("classifies statuses and backs off up to 30 s", () => {
    expect(isFatal(400)).toBe(true);
    expect(isFatal(409)).toBe(true);
    expect(isFatal(429)).toBe(false);
    expect(isFatal(408)).toBe(false);
    expect(isFatal(502)).toBe(false);
    expect(retryDelayMs(0)).toBe(1000);
    expect(retryDelayMs(3)).toBe(8000);
    expect(retryDelayMs(10)).toBe(30_000);
  });
  it("finds the word being spoken", () => {
    const words = [
      { w: "open", start: 1.0, end: 1.3, p: 0.9 },
      { w: "menu", start: 1.4, end: 1.8, p: 0.9 },
      { w: "now", start: 4.0, end: 4.2, p: 0.9 },
    ];
    expect(wordAt(words, 0.5)).toBe(-1);
    expect(wordAt(words, 1.0)).toBe(0);
    expect(wordAt(words, 1.5)).toBe(1);
    expect(wordAt(words, 3.0)).toBe(-1); // a pause: nothing highlighted
    expect(wordAt(words, 4.1)).toBe(2);
  });
  it("plays a step's words, else the time before its action", () => {
    expect(playSpan(step({ words: [{ w: "a", start: 5, end: 5.2, p: 1 }, { w: "b", start: 6, end: 6.5, p: 1 }] }), null)).toEqual([4.7, 6.8]);
    expect(playSpan(step({ clock_end: 20 }), 12)).toEqual([12, 20]);
    expect(playSpan(step({ clock_end: 3 }), null)).toEqual([0, 3]);
    expect(playSpan(step({}), null)).toBeNull();
  });
  it("shows the annotator's or refined thought over the verbatim one", () => {
    expect(shownThought(step({ verbatim: "uh open it" }))).toEqual({ text: "uh open it", kind: "verbatim" });
    expect(shownThought(step({ verbatim: "uh open it", refined: "Open it.", refined_by: "llm:m" }))).toEqual({ text: "Open it.", kind: "refined" });
    expect(shownThought(step({ refined: "Mine.", refined_by: "annotator" })).kind).toBe("edited");
    expect(shownThought(step({})).kind).toBe("none");
  });
  it("prefers webm/opus", () => {
    expect(pickMimeType(() => true)).toBe("audio/webm;codecs=opus");
    expect(pickMimeType((t) => t.startsWith("audio/ogg"))).toBe("audio/ogg;codecs=opus");
    expect(pickMimeType(() => false)).toBe("");
  });
});
