import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";

type Status = (s: "connecting" | "connected" | "disconnected", detail: string) => void;
const connects: { url: string; onStatus: Status; disconnect: ReturnType<typeof vi.fn> }[] = [];

vi.mock("../workspace/vnc", () => ({
  connectVnc: vi.fn((_target: HTMLElement, url: string, _viewOnly: boolean, onStatus: Status) => {
    const disconnect = vi.fn();
    connects.push({ url, onStatus, disconnect });
    onStatus("connecting", "");
    return Promise.resolve({ setViewOnly: vi.fn(), canvas: () => null, disconnect });
  }),
}));

import { MAX_RECONNECTS, RECONNECT_DELAY_MS, openWatch } from "./watch";

function conn(i: number): (typeof connects)[number] {
  const c = connects.at(i);
  if (!c) throw new Error(`no connection ${i}`);
  return c;
}

const flush = async (): Promise<void> => {
  for (let i = 0; i < 5; i++) await Promise.resolve();
};

describe("openWatch", () => {
  let target: HTMLElement;
  let grants: number;
  const grant = (): Promise<{ url: string }> => Promise.resolve({ url: `/websockify?token=t${++grants}` });

  beforeEach(() => {
    vi.useFakeTimers();
    connects.length = 0;
    grants = 0;
    target = document.createElement("div");
  });
  afterEach(() => vi.useRealTimers());

  it("follows the environment: a dropped session gets a new grant and connects again", async () => {
    await openWatch(target, "env-1", grant);
    expect(connects.map((c) => c.url)).toEqual(["/websockify?token=t1"]);
    conn(0).onStatus("connected", "");
    expect(target.querySelector("[data-testid='watch-state']")?.textContent).toBe("connected");
    conn(0).onStatus("disconnected", "the connection to the desktop dropped");
    expect(target.textContent).toContain("following the environment");
    await vi.advanceTimersByTimeAsync(RECONNECT_DELAY_MS);
    await flush();
    expect(connects.map((c) => c.url)).toEqual(["/websockify?token=t1", "/websockify?token=t2"]);
    conn(1).onStatus("connected", "");
    expect(target.querySelector("[data-testid='watch-state']")?.textContent).toBe("connected");
  });

  it("stops after Close and does not reconnect", async () => {
    await openWatch(target, "env-1", grant);
    (target.querySelector("button") as HTMLButtonElement).click();
    expect(conn(0).disconnect).toHaveBeenCalled();
    conn(0).onStatus("disconnected", "");
    await vi.advanceTimersByTimeAsync(RECONNECT_DELAY_MS * 2);
    expect(connects).toHaveLength(1);
    expect(target.textContent).toBe("");
  });

  it("gives up after repeated drops that never connect, saying why", async () => {
    await openWatch(target, "env-1", grant);
    for (let i = 0; i <= MAX_RECONNECTS; i++) {
      conn(-1).onStatus("disconnected", "the desktop refused the connection: bad token");
      await vi.advanceTimersByTimeAsync(RECONNECT_DELAY_MS);
      await flush();
    }
    expect(connects).toHaveLength(MAX_RECONNECTS + 1);
    expect(target.querySelector("[data-testid='watch-state']")?.textContent).toContain("bad token");
  });

  it("shows the API's refusal when the environment is gone", async () => {
    let first = true;
    const gone = (): Promise<{ url: string }> => {
      if (first) {
        first = false;
        return Promise.resolve({ url: "/websockify?token=a" });
      }
      return Promise.reject(new Error("the environment is gone"));
    };
    await openWatch(target, "env-1", gone);
    conn(0).onStatus("disconnected", "");
    await vi.advanceTimersByTimeAsync(RECONNECT_DELAY_MS);
    await flush();
    expect(target.textContent).toContain("the environment is gone");
  });
});
