// Keeping the workspace's session state in step with the server: the websocket's messages (state on
// every (re)connect, new screens, candidates, status, think-aloud), the REST state fetched whenever
// the socket may have missed something, the REST heartbeat while the socket is down, and the
// connection badge in the header that says which of these is happening.

import { api, errorText } from "../lib/api";
import { h } from "../lib/dom";
import { SessionSocket, socketUrl, type SocketStatus } from "./socket";
import { applyCandidates, applyObservation, applyStatus } from "./state";
import type { ThinkAloudState } from "./thinkaloud";
import type { ServerMessage, SessionState } from "./types";

/** What the sync needs from the session page. */
export interface SyncHost {
  /** The state the page shows now (null before the first load). */
  current(): SessionState | null;
  /** A whole state from the server, merged into the page's. */
  apply(state: SessionState): void;
  /** A state derived from `before` by one event. */
  setState(next: SessionState, before: SessionState): void;
  showBanner(text: string, kind?: "error" | "info"): void;
  thinkAloud(state: ThinkAloudState): void;
}

/** The connection badge's words for a socket status; a closed socket of a finished session is "ended". */
export function connectionLabel(status: SocketStatus, sessionActive: boolean | null): { text: string; status: string } {
  const ended = status === "closed" && sessionActive === false;
  const text: Record<SocketStatus, string> = {
    connecting: "Connecting…",
    open: "Live",
    reconnecting: "Reconnecting…",
    closed: ended ? "Session closed" : "Offline",
  };
  return { text: text[status], status: ended ? "ended" : status };
}

export class SessionSync {
  readonly connection = h("span", { class: "ws-conn", "data-testid": "connection", "data-status": "connecting" }, "Connecting…");
  private readonly socket: SessionSocket;
  private fetching = false;
  private refetch = false;

  constructor(
    private readonly sessionId: number,
    private readonly host: SyncHost,
  ) {
    this.socket = new SessionSocket(
      socketUrl(`/ws/annotation/sessions/${sessionId}/`),
      (msg) => {
        this.onMessage(msg);
      },
      (status, detail) => {
        this.onSocketStatus(status, detail);
      },
    );
  }

  /** Go live for an active session; a closed one has nothing to connect to: say so, not "Connecting…". */
  start(active: boolean): void {
    if (active) this.socket.start();
    else this.onSocketStatus("closed", "");
  }

  stop(): void {
    this.socket.stop();
  }

  /** Fetch the state over REST (authoritative even when the socket is half dead); calls made while
   *  one is in flight are folded into one more fetch after it. */
  requestState(): void {
    if (this.fetching) {
      this.refetch = true;
      return;
    }
    this.fetching = true;
    api<SessionState>(`/api/annotation/sessions/${this.sessionId}/`)
      .then((s) => {
        this.host.apply(s);
      })
      .catch((error: unknown) => {
        this.host.showBanner(`Could not refresh the session: ${errorText(error)}`);
      })
      .finally(() => {
        this.fetching = false;
        if (this.refetch) {
          this.refetch = false;
          this.requestState();
        }
      });
  }

  /** The REST heartbeat, while the socket (which carries its own) is down. */
  restHeartbeat(): void {
    if (this.host.current()?.status !== "active" || this.socket.isOpen) return;
    api<{ lease: string }>(`/api/annotation/sessions/${this.sessionId}/heartbeat/`, { method: "POST" })
      .then((answer) => {
        if (answer.lease !== "active") this.requestState();
      })
      .catch(() => {
        // The banner would only repeat the connection indicator.
      });
  }

  private onMessage(raw: unknown): void {
    if (raw === null || typeof raw !== "object" || !("type" in raw)) return;
    const msg = raw as ServerMessage;
    const state = this.host.current();
    switch (msg.type) {
      case "annotation.state":
        // Sent on every (re)connect, so a reconnect catches up on what it missed.
        if ((msg.state as SessionState | null) !== null) this.host.apply(msg.state);
        return;
      case "heartbeat":
        if (msg.lease !== "active" && state?.status === "active") this.requestState();
        return;
      case "error":
        this.host.showBanner(`Server: ${msg.detail}`);
        return;
      case "annotation.observation": {
        if (state === null) return;
        const update = applyObservation(state, msg);
        if (update.changed) this.host.setState(update.state, state);
        if (update.refetch) this.requestState();
        return;
      }
      case "annotation.candidates":
        if (state !== null) this.host.setState(applyCandidates(state, msg), state);
        return;
      case "annotation.thinkaloud":
        this.host.thinkAloud(msg.state);
        return;
      case "annotation.status":
        if (state === null) return;
        this.host.setState(applyStatus(state, msg), state);
        this.requestState();
        return;
    }
  }

  private onSocketStatus(status: SocketStatus, detail: string): void {
    const state = this.host.current();
    const label = connectionLabel(status, state === null ? null : state.status === "active");
    this.connection.dataset.status = label.status;
    this.connection.textContent = label.text;
    this.connection.title = detail || (status === "open" ? "Updates arrive live; the environment is kept for you." : "");
    if (status === "closed" && detail !== "") this.host.showBanner(detail);
  }

  get isOpen(): boolean {
    return this.socket.isOpen;
  }
}
