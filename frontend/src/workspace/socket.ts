// The session's websocket: JSON messages in, heartbeats every 10 s out, and automatic reconnects
// with backoff. A connection that stops answering is closed and reopened.

export type SocketStatus = "connecting" | "open" | "reconnecting" | "closed";

export interface WebSocketLike {
  readyState: number;
  onopen: ((ev: Event) => void) | null;
  onclose: ((ev: CloseEvent) => void) | null;
  onmessage: ((ev: MessageEvent) => void) | null;
  onerror: ((ev: Event) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export interface SocketOptions {
  heartbeatMs?: number;
  maxBackoffMs?: number;
  create?: (url: string) => WebSocketLike;
}

const OPEN = 1;
/** Close codes after which reconnecting cannot help (signed out, not your session). */
const FINAL_CODES = new Set([4401, 4403]);

/** The delay before reconnect attempt `attempt` (0-based): 0.5 s, 1 s, 2 s, … up to `max`. */
export function backoffMs(attempt: number, max = 10_000): number {
  return Math.min(500 * 2 ** attempt, max);
}

export function socketUrl(path: string, location: { protocol: string; host: string } = window.location): string {
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${path}`;
}

export class SessionSocket {
  private ws: WebSocketLike | null = null;
  private attempt = 0;
  private heartbeat: ReturnType<typeof setInterval> | null = null;
  private retry: ReturnType<typeof setTimeout> | null = null;
  private lastMessageAt = 0;
  private stopped = false;
  private readonly heartbeatMs: number;
  private readonly maxBackoffMs: number;
  private readonly create: (url: string) => WebSocketLike;

  constructor(
    private readonly url: string,
    private readonly onMessage: (message: unknown) => void,
    private readonly onStatus: (status: SocketStatus, detail: string) => void,
    options: SocketOptions = {},
  ) {
    this.heartbeatMs = options.heartbeatMs ?? 10_000;
    this.maxBackoffMs = options.maxBackoffMs ?? 10_000;
    this.create = options.create ?? ((u) => new WebSocket(u));
  }

  get isOpen(): boolean {
    return this.ws !== null && this.ws.readyState === OPEN;
  }

  start(): void {
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    this.clearTimers();
    const ws = this.ws;
    this.ws = null;
    if (ws !== null) {
      ws.onclose = null;
      ws.close(1000, "page closed");
    }
    this.onStatus("closed", "");
  }

  /** Send a JSON message; false when the socket is not open (the caller falls back to REST). */
  send(message: object): boolean {
    if (this.ws === null || !this.isOpen) return false;
    this.ws.send(JSON.stringify(message));
    return true;
  }

  private connect(): void {
    this.onStatus(this.attempt === 0 ? "connecting" : "reconnecting", "");
    const ws = this.create(this.url);
    this.ws = ws;
    ws.onopen = () => {
      this.attempt = 0;
      this.lastMessageAt = Date.now();
      this.onStatus("open", "");
      this.heartbeat = setInterval(() => {
        this.beat();
      }, this.heartbeatMs);
    };
    ws.onmessage = (ev: MessageEvent) => {
      this.lastMessageAt = Date.now();
      let message: unknown;
      try {
        message = JSON.parse(String(ev.data));
      } catch {
        return;
      }
      this.onMessage(message);
    };
    ws.onclose = (ev: CloseEvent) => {
      this.clearTimers();
      this.ws = null;
      if (this.stopped) return;
      if (FINAL_CODES.has(ev.code)) {
        this.onStatus("closed", ev.code === 4401 ? "You are signed out; sign in again." : "This session is not yours.");
        return;
      }
      const delay = backoffMs(this.attempt++, this.maxBackoffMs);
      this.onStatus("reconnecting", `retrying in ${Math.round(delay / 100) / 10} s`);
      this.retry = setTimeout(() => {
        this.connect();
      }, delay);
    };
    ws.onerror = () => {
      // onclose follows and schedules the reconnect.
    };
  }

  private beat(): void {
    if (this.ws === null) return;
    if (Date.now() - this.lastMessageAt > 3 * this.heartbeatMs) {
      // Three heartbeats without an answer: the connection is dead even if the browser thinks not.
      this.ws.close(4000, "no answer");
      return;
    }
    this.send({ type: "heartbeat" });
  }

  private clearTimers(): void {
    if (this.heartbeat !== null) clearInterval(this.heartbeat);
    if (this.retry !== null) clearTimeout(this.retry);
    this.heartbeat = null;
    this.retry = null;
  }
}
