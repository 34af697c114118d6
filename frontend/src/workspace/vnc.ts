// The live desktop through noVNC: connect to the session's VNC proxy URL, scale it to fit, and
// switch between proposal mode (view only: clicks go to the overlay) and take-over (input goes to
// the desktop). noVNC is loaded only for desktop tasks.

import type RFB from "@novnc/novnc";

const XK_ALT_L = 0xffe9;
const XK_ALT_R = 0xffea;

export type VncStatus = "connecting" | "connected" | "disconnected";

export interface VncView {
  setViewOnly(viewOnly: boolean): void;
  /** The desktop's canvas (for placing the overlay), once connected. */
  canvas(): HTMLCanvasElement | null;
  disconnect(): void;
}

/** An absolute ws(s):// URL for `url` (the API may answer a path). */
export function absoluteWsUrl(url: string, location: { protocol: string; host: string } = window.location): string {
  if (/^wss?:\/\//.test(url)) return url;
  if (/^https?:\/\//.test(url)) return url.replace(/^http/, "ws");
  return `${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${url.startsWith("/") ? "" : "/"}${url}`;
}

export async function connectVnc(
  target: HTMLElement,
  url: string,
  viewOnly: boolean,
  onStatus: (status: VncStatus, detail: string) => void,
): Promise<VncView> {
  const { default: RFBClass } = await import("@novnc/novnc");
  onStatus("connecting", "");
  const rfb: RFB = new RFBClass(target, absoluteWsUrl(url), { shared: true });
  rfb.viewOnly = viewOnly;
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.background = "#0b1220";
  rfb.addEventListener("connect", () => {
    onStatus("connected", "");
  });
  rfb.addEventListener("disconnect", (ev) => {
    const clean = (ev as CustomEvent<{ clean: boolean }>).detail.clean;
    onStatus("disconnected", clean ? "" : "the connection to the desktop dropped");
  });
  rfb.addEventListener("securityfailure", (ev) => {
    const reason = (ev as CustomEvent<{ reason?: string }>).detail.reason ?? "refused";
    onStatus("disconnected", `the desktop refused the connection: ${reason}`);
  });
  return {
    setViewOnly(value: boolean) {
      // Leaving the take-over with Alt+T: the Alt went down on the desktop and its release would come
      // after the client turned view-only (which sends nothing), so release it now.
      if (value && !rfb.viewOnly) {
        rfb.sendKey(XK_ALT_L, "AltLeft", false);
        rfb.sendKey(XK_ALT_R, "AltRight", false);
      }
      rfb.viewOnly = value;
      if (!value) rfb.focus();
    },
    canvas: () => target.querySelector("canvas"),
    disconnect() {
      rfb.disconnect();
    },
  };
}
