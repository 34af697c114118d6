import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoffMs, SessionSocket, socketUrl, type WebSocketLike } from "./socket";

class FakeSocket implements WebSocketLike {
  readyState = 0;
  onopen: ((ev: Event) => void) | null = null;
  onclose: ((ev: CloseEvent) => void) | null = null;
  onmessage: ((ev: MessageEvent) => void) | null = null;
  onerror: ((ev: Event) => void) | null = null;
  sent: unknown[] = [];
  closed: number | null = null;
  open(): void {
    this.readyState = 1;
    this.onopen?.(new Event("open"));
  }
  receive(data: unknown): void {
    this.onmessage?.(new MessageEvent("message", { data: JSON.stringify(data) }));
  }
  drop(code = 1006): void {
    this.readyState = 3;
    this.onclose?.({ code } as CloseEvent);
  }
  send(data: string): void {
    this.sent.push(JSON.parse(data));
  }
  close(code?: number): void {
    this.closed = code ?? 1000;
    this.drop(code);
  }
}

describe("SessionSocket", () => {
  let sockets: FakeSocket[];
  let messages: unknown[];
  let statuses: string[];
  let socket: SessionSocket;

  beforeEach(() => {
    vi.useFakeTimers();
    sockets = [];
    messages = [];
    statuses = [];
    socket = new SessionSocket("ws://x/ws/", (m) => messages.push(m), (s) => statuses.push(s), {
      create: () => {
        const s = new FakeSocket();
        sockets.push(s);
        return s;
      },
    });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("passes JSON messages on and sends a heartbeat every 10 s", () => {
    socket.start();
    sockets[0]?.open();
    sockets[0]?.receive({ type: "annotation.state", state: {} });
    expect(messages).toEqual([{ type: "annotation.state", state: {} }]);
    vi.advanceTimersByTime(10_000);
    expect(sockets[0]?.sent).toEqual([{ type: "heartbeat" }]);
    expect(statuses).toEqual(["connecting", "open"]);
  });

  it("reconnects with backoff after a drop", () => {
    socket.start();
    sockets[0]?.open();
    sockets[0]?.drop();
    expect(statuses.at(-1)).toBe("reconnecting");
    vi.advanceTimersByTime(499);
    expect(sockets).toHaveLength(1);
    vi.advanceTimersByTime(1);
    expect(sockets).toHaveLength(2);
    sockets[1]?.drop();
    vi.advanceTimersByTime(999);
    expect(sockets).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(sockets).toHaveLength(3);
  });

  it("closes a connection that stopped answering, then reconnects", () => {
    socket.start();
    sockets[0]?.open();
    vi.advanceTimersByTime(40_000);
    expect(sockets[0]?.closed).toBe(4000);
    vi.advanceTimersByTime(600);
    expect(sockets).toHaveLength(2);
  });

  it("does not reconnect when signed out or stopped", () => {
    socket.start();
    sockets[0]?.drop(4401);
    vi.advanceTimersByTime(20_000);
    expect(sockets).toHaveLength(1);
    expect(statuses.at(-1)).toBe("closed");

    const other = new SessionSocket("ws://x/", () => undefined, () => undefined, { create: () => { const s = new FakeSocket(); sockets.push(s); return s; } });
    other.start();
    other.stop();
    vi.advanceTimersByTime(20_000);
    expect(sockets).toHaveLength(2);
  });

  it("send() says whether the socket was open", () => {
    socket.start();
    expect(socket.send({ type: "state" })).toBe(false);
    sockets[0]?.open();
    expect(socket.send({ type: "state" })).toBe(true);
  });
});

describe("helpers", () => {
  it("backs off 0.5 s, 1 s, 2 s … up to the cap", () => {
    expect([0, 1, 2, 3, 10].map((a) => backoffMs(a, 5000))).toEqual([500, 1000, 2000, 4000, 5000]);
  });
  it("builds ws / wss URLs from the page's location", () => {
    expect(socketUrl("/ws/a/", { protocol: "https:", host: "h:1" })).toBe("wss://h:1/ws/a/");
    expect(socketUrl("/ws/a/", { protocol: "http:", host: "h" })).toBe("ws://h/ws/a/");
  });
});
