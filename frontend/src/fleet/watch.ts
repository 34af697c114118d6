// A read-only noVNC view of one desktop in `target`, from a watch grant of the API (the run page's
// fleet panel and the fleet page both use it). Returns when connected or failed; Close disconnects.
// The view follows the environment: when its desktop session ends (an RL episode's reset starts a
// new one) the connection drops, and the view asks for a new grant — the env host names its current
// display — and connects again, until Close, the environment is gone, or it keeps failing.

import "./watch.css";
import { h, notice, render } from "../lib/dom";
import type { VncView } from "../workspace/vnc";

/** Reconnects in a row without the desktop ever connecting before the view gives up. */
export const MAX_RECONNECTS = 5;
export const RECONNECT_DELAY_MS = 1500;

export async function openWatch(target: HTMLElement, title: string, grant: () => Promise<{ url: string }>): Promise<void> {
  render(target, notice("loading", "Connecting to the desktop (read-only)…"));
  let view: VncView | null = null;
  let closed = false;
  let failures = 0;
  let timer: number | undefined;
  const screen = h("div", { class: "rc-vnc" });
  const state = h("p", { class: "muted", "data-testid": "watch-state" }, "connecting…");
  const close = h("button", { type: "button", class: "btn btn-small btn-secondary" }, "Close");
  const fail = (err: unknown): void => {
    closed = true;
    render(target, notice("error", err instanceof Error ? err.message : String(err)));
  };
  const connect = async (url: string): Promise<void> => {
    const { connectVnc } = await import("../workspace/vnc");
    screen.replaceChildren();
    view = await connectVnc(screen, url, true, (s, detail) => {
      if (closed) return;
      if (s === "connected") failures = 0;
      if (s === "disconnected") {
        if (failures >= MAX_RECONNECTS) {
          state.textContent = `disconnected: ${detail || "the desktop closed the connection"}`;
          return;
        }
        state.textContent = "the desktop's session ended; following the environment…";
        failures += 1;
        timer = window.setTimeout(() => {
          grant().then(({ url: next }) => (closed ? undefined : connect(next))).catch(fail);
        }, RECONNECT_DELAY_MS);
        return;
      }
      state.textContent = `${s}${detail ? `: ${detail}` : ""}`;
    });
  };
  try {
    const { url } = await grant();
    render(target, h("div", { class: "card-head" }, h("h3", {}, `Watching ${title} (read-only)`), close), state, screen);
    close.addEventListener("click", () => {
      closed = true;
      window.clearTimeout(timer);
      view?.disconnect();
      render(target);
    });
    await connect(url);
  } catch (err) {
    fail(err);
  }
}
