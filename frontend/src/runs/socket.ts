// The run's websocket (ws/rl/runs/<id>/): status snapshot on connect, then status, metrics and
// alert events as the trainer writes them. Reconnects with backoff; `onOpen` runs on every
// (re)connect so the page can refetch what it missed while disconnected.

import type { RunEvent } from "./types";

export type LinkState = "connecting" | "live" | "reconnecting" | "closed";

export class RunSocket {
  private ws: WebSocket | null = null;
  private retry = 0;
  private stopped = false;

  constructor(
    private readonly runId: number,
    private readonly onEvent: (event: RunEvent) => void,
    private readonly onState: (state: LinkState, detail: string) => void,
    private readonly onOpen: () => void = () => undefined,
  ) {}

  start(): void {
    this.stopped = false;
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${window.location.host}/ws/rl/runs/${this.runId}/`);
    this.ws = ws;
    this.onState(this.retry === 0 ? "connecting" : "reconnecting", "");
    ws.addEventListener("open", () => {
      this.retry = 0;
      this.onState("live", "");
      this.onOpen();
    });
    ws.addEventListener("message", (msg: MessageEvent<string>) => {
      this.onEvent(JSON.parse(msg.data) as RunEvent);
    });
    ws.addEventListener("close", (ev) => {
      if (this.stopped) return;
      if (ev.code === 4401 || ev.code === 4403) {
        this.onState("closed", ev.code === 4401 ? "signed out" : "no access to this run");
        return;
      }
      this.retry += 1;
      const delay = Math.min(10_000, 500 * 2 ** Math.min(this.retry, 5));
      this.onState("reconnecting", `retrying in ${Math.round(delay / 1000)} s`);
      window.setTimeout(() => {
        if (!this.stopped) this.start();
      }, delay);
    });
  }

  stop(): void {
    this.stopped = true;
    this.ws?.close();
  }
}
