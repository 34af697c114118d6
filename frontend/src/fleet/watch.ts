// A read-only noVNC view of one desktop in `target`, from a watch grant of the API (the run page's
// fleet panel and the fleet page both use it). Returns when connected or failed; Close disconnects.

import "./watch.css";
import { h, notice, render } from "../lib/dom";

export async function openWatch(target: HTMLElement, title: string, grant: () => Promise<{ url: string }>): Promise<void> {
  render(target, notice("loading", "Connecting to the desktop (read-only)…"));
  try {
    const { url } = await grant();
    const screen = h("div", { class: "rc-vnc" });
    const state = h("p", { class: "muted", "data-testid": "watch-state" }, "connecting…");
    const close = h("button", { type: "button", class: "btn btn-small btn-secondary" }, "Close");
    render(target, h("div", { class: "card-head" }, h("h3", {}, `Watching ${title} (read-only)`), close), state, screen);
    const { connectVnc } = await import("../workspace/vnc");
    const view = await connectVnc(screen, url, true, (s, detail) => { state.textContent = `${s}${detail ? `: ${detail}` : ""}`; });
    close.addEventListener("click", () => { view.disconnect(); render(target); });
  } catch (err) {
    render(target, notice("error", err instanceof Error ? err.message : String(err)));
  }
}
