// Think-aloud, the parts without a browser API: shapes of the API (annotation/thinkaloud/selectors.py),
// the page-to-session clock offset, the upload queue (ordered, retried, idempotent by chunk index),
// and word helpers for highlighting what plays.

export interface SpokenWord {
  w: string;
  start: number;
  end: number;
  p: number;
}

export interface StepSpeech {
  index: number;
  clock_start: number | null;
  clock_end: number | null;
  words: SpokenWord[];
  verbatim: string;
  refined: string;
  refined_by: string;
  edited: boolean;
  moved: boolean;
}

export type ThinkAloudStatus = "none" | "recording" | "queued" | "running" | "done" | "failed";

export interface ThinkAloudState {
  session_id: number;
  status: ThinkAloudStatus;
  finished: boolean;
  error: string;
  server_clock: number;
  chunks: { index: number; start_clock: number; duration_s: number; size: number; transcribed: boolean; error: string }[];
  next_index: number;
  audio_url: string;
  audio_start_clock: number;
  audio_s: number;
  model: string;
  processing_s: number | null;
  retried_spans: number;
  lost_spans: number;
  snapped: { said: string; term: string }[];
  uncertain_words: SpokenWord[];
  /** The speech's level over the room's noise in dB (null: not measured) and whether that is low
   *  enough for Whisper to mishear more (the server's THINKALOUD_NOISY_SNR_DB). */
  snr_db: number | null;
  noisy: boolean;
  final: { verbatim: string; words: SpokenWord[] } | null;
  steps: StepSpeech[];
}

export interface ThinkAloudEvent {
  type: "annotation.thinkaloud";
  session_id: number;
  state: ThinkAloudState;
}

// ---------- clock ----------

export interface ClockSample {
  /** performance.now() (ms) when the request left and when the answer arrived. */
  sentMs: number;
  receivedMs: number;
  /** The session clock (s) the server reported. */
  serverClock: number;
}

export interface ClockSync {
  /** session clock (s) = offsetS + performance.now() / 1000 */
  offsetS: number;
  rttMs: number;
}

/** The offset from the sample with the shortest round trip (its midpoint is the best estimate of
 *  when the server read its clock). */
export function clockSync(samples: readonly ClockSample[]): ClockSync {
  let best: ClockSample | undefined;
  for (const s of samples) if (best === undefined || s.receivedMs - s.sentMs < best.receivedMs - best.sentMs) best = s;
  if (best === undefined) throw new Error("no clock samples");
  const midMs = (best.sentMs + best.receivedMs) / 2;
  return { offsetS: best.serverClock - midMs / 1000, rttMs: best.receivedMs - best.sentMs };
}

export function toSessionClock(sync: ClockSync, perfMs: number): number {
  // Never before the session's zero: a clock estimate a little off must not make an upload the server refuses.
  return Math.max(0, Math.round((sync.offsetS + perfMs / 1000) * 1000) / 1000);
}

// ---------- uploads ----------

export interface PendingChunk {
  index: number;
  startClock: number;
  blob: Blob;
}

export interface UploadOutcome {
  ok: boolean;
  /** Retrying cannot help (4xx other than 408/429): drop the chunk and show why. */
  fatal: boolean;
  status: number;
  detail: string;
}

export type Uploader = (chunk: PendingChunk, onProgress: (sent: number, total: number) => void) => Promise<UploadOutcome>;

export interface QueueProgress {
  uploaded: number;
  pending: number;
  failed: number;
  bytesSent: number;
  /** Fraction of the chunk in flight sent, 0..1 (0 when idle). */
  current: number;
  lastError: string;
}

/** Delay before retry `attempt` (0-based): 1 s, 2 s, 4 s … up to 30 s. */
export function retryDelayMs(attempt: number): number {
  return Math.min(1000 * 2 ** attempt, 30_000);
}

export function isFatal(status: number): boolean {
  return status >= 400 && status < 500 && status !== 408 && status !== 429;
}

/** Sends chunks one at a time in index order; a transient failure is retried with backoff (the
 *  server accepts the same bytes at the same index again, so a retry after a lost answer is safe). */
export class UploadQueue {
  private readonly queue: PendingChunk[] = [];
  private running = false;
  private attempt = 0;
  private idleWaiters: (() => void)[] = [];
  readonly progress: QueueProgress = { uploaded: 0, pending: 0, failed: 0, bytesSent: 0, current: 0, lastError: "" };

  constructor(
    private readonly upload: Uploader,
    private readonly onChange: (p: QueueProgress) => void,
    private readonly sleep: (ms: number) => Promise<void> = (ms) => new Promise((r) => setTimeout(r, ms)),
  ) {}

  push(chunk: PendingChunk): void {
    this.queue.push(chunk);
    this.progress.pending = this.queue.length;
    this.onChange(this.progress);
    void this.run();
  }

  get idle(): boolean {
    return !this.running && this.queue.length === 0;
  }

  /** Resolves when every queued chunk is sent or dropped. */
  drained(): Promise<void> {
    if (this.idle) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private async run(): Promise<void> {
    if (this.running) return;
    this.running = true;
    for (;;) {
      const chunk = this.queue[0];
      if (chunk === undefined) break;
      let outcome: UploadOutcome;
      try {
        outcome = await this.upload(chunk, (sent, total) => {
          this.progress.current = total > 0 ? sent / total : 0;
          this.onChange(this.progress);
        });
      } catch (e) {
        outcome = { ok: false, fatal: false, status: 0, detail: e instanceof Error ? e.message : String(e) };
      }
      this.progress.current = 0;
      if (outcome.ok) {
        this.queue.shift();
        this.attempt = 0;
        this.progress.uploaded += 1;
        this.progress.bytesSent += chunk.blob.size;
        this.progress.lastError = "";
      } else if (outcome.fatal) {
        this.queue.shift();
        this.attempt = 0;
        this.progress.failed += 1;
        this.progress.lastError = `Chunk ${chunk.index + 1} was refused: ${outcome.detail}`;
      } else {
        this.progress.lastError = `Upload failed (${outcome.detail || `HTTP ${outcome.status}`}); retrying`;
        this.onChange(this.progress);
        await this.sleep(retryDelayMs(this.attempt));
        this.attempt += 1;
        continue;
      }
      this.progress.pending = this.queue.length;
      this.onChange(this.progress);
    }
    this.running = false;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const w of waiters) w();
  }
}

// ---------- words ----------

/** Index of the word being spoken at session-clock `t` (the last word started at or before t), or -1. */
export function wordAt(words: readonly SpokenWord[], t: number): number {
  let found = -1;
  for (const [i, w] of words.entries()) {
    if (w.start <= t + 1e-6) found = i;
    else break;
  }
  const word = words[found];
  return word !== undefined && t <= word.end + 0.25 ? found : -1;
}

/** The session-clock span to play for a step: its words with a little air, else the time between
 *  the previous action and this one. Null when there is nothing to play. */
export function playSpan(step: StepSpeech, previousEnd: number | null): [number, number] | null {
  const first = step.words[0];
  const last = step.words.at(-1);
  if (first !== undefined && last !== undefined) return [Math.max(0, first.start - 0.3), last.end + 0.3];
  const end = step.clock_end;
  if (end === null) return null;
  return [Math.max(0, previousEnd ?? end - 5), end];
}

/** The thought to show for a step: the annotator's or refined text when there is one, else verbatim. */
export function shownThought(step: StepSpeech): { text: string; kind: "edited" | "refined" | "verbatim" | "none" } {
  if (step.refined !== "") return { text: step.refined, kind: step.refined_by === "annotator" ? "edited" : "refined" };
  if (step.verbatim !== "") return { text: step.verbatim, kind: "verbatim" };
  return { text: "", kind: "none" };
}

/** The MediaRecorder type to ask for: webm/opus (Chrome, Firefox), else ogg/opus, else the default. */
export function pickMimeType(isSupported: (t: string) => boolean): string {
  for (const t of ["audio/webm;codecs=opus", "audio/ogg;codecs=opus", "audio/webm"]) if (isSupported(t)) return t;
  return "";
}

/** What the annotator is told while the room is noisy (the recorder's notice). */
export function noiseText(snrDb: number): string {
  return `Background noise: your voice is only about ${Math.round(snrDb)} dB above it, so words may be misheard. A headset or a quieter room helps.`;
}

/** What the reviewer is told about a noisy recording (the speech panel's notice). */
export function reviewNoiseText(snrDb: number): string {
  return `Noisy recording: the speech is only about ${Math.round(snrDb)} dB above the room's noise, where words are often misheard. Listen before trusting a thought.`;
}
