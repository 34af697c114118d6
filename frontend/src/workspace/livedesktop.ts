// The live desktop of a desktop session: the noVNC view over the screenshot, and the take-over in
// which the annotator drives the machine by hand (recorded as take-over steps when it ends).

import { api, errorText } from "../lib/api";
import type { ScreenView } from "./screen";
import type { SessionState, VncGrant } from "./types";
import { connectVnc, type VncView } from "./vnc";

/** What the live desktop needs from the session page it sits in. */
export interface LiveDesktopHost {
  readonly sessionId: number;
  readonly screen: ScreenView;
  readonly root: HTMLElement;
  /** The thought typed in the editor: it explains the hand-made steps of a take-over. */
  thought(): string;
  redrawHead(): void;
  showBanner(text: string, kind?: "error" | "info"): void;
  apply(state: SessionState): void;
  requestState(): void;
}

export class LiveDesktop {
  private vnc: VncView | null = null;
  private takingOver = false;

  constructor(private readonly host: LiveDesktopHost) {}

  /** True while the annotator drives the desktop by hand (keys belong to the desktop then). */
  get takeover(): boolean {
    return this.takingOver;
  }

  get connected(): boolean {
    return this.vnc !== null;
  }

  toggleTakeover(): void {
    this.setTakeover(!this.takingOver);
  }

  async connect(): Promise<void> {
    const host = this.host;
    try {
      const grant = await api<VncGrant>(`/api/annotation/sessions/${host.sessionId}/vnc/`, { method: "POST", body: { read_only: false } });
      this.vnc = await connectVnc(host.screen.vncHost, grant.url, true, (status, detail) => {
        if (status === "connected") {
          host.screen.useVnc(() => this.vnc?.canvas() ?? null);
          setTimeout(() => {
            host.screen.layout();
          }, 300);
        } else if (status === "disconnected") {
          host.screen.useScreenshot();
          if (this.takingOver) this.setTakeover(false);
          this.vnc = null;
          if (detail !== "") host.showBanner(`Live desktop: ${detail}. Showing screenshots.`);
        }
        host.redrawHead();
      });
    } catch (error) {
      host.showBanner(`The live desktop is not available (${errorText(error)}); showing the screenshots after each action.`, "info");
    }
  }

  private setTakeover(on: boolean): void {
    if (this.vnc === null) return;
    this.takingOver = on;
    this.vnc.setViewOnly(!on);
    this.host.screen.setPicking(!on);
    this.host.root.classList.toggle("ws-takeover", on);
    this.host.redrawHead();
    // What the annotator did by hand becomes take-over steps; then the new screen gets proposals.
    if (on) void this.startTakeover();
    else void this.endTakeover();
  }

  private async startTakeover(): Promise<void> {
    try {
      await api(`/api/annotation/sessions/${this.host.sessionId}/takeover/start/`, { method: "POST", body: {} });
    } catch (error) {
      this.host.showBanner(`The take-over could not start recording: ${errorText(error)}`);
      this.setTakeover(false);
    }
  }

  private async endTakeover(): Promise<void> {
    const host = this.host;
    try {
      const result = await api<{ actions: number; state: SessionState }>(`/api/annotation/sessions/${host.sessionId}/takeover/end/`, {
        method: "POST",
        body: { thought: host.thought().trim() },
      });
      if (result.actions > 0) host.showBanner(`Recorded ${result.actions} action${result.actions === 1 ? "" : "s"} from your take-over.`, "info");
      host.apply(result.state);
    } catch (error) {
      host.showBanner(`The take-over could not be recorded: ${errorText(error)}`);
      host.requestState();
    }
  }
}
