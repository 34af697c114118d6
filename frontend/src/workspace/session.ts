// The annotator's workspace for one session: wires the state (kept in step by sync.ts), the screen with
// its overlay, the candidates, the editor, the outcome buttons and the timeline.

import { api, ApiError, errorText } from "../lib/api";
import { h, render } from "../lib/dom";
import { ActionEditor, type EditorSubmit } from "./editor";
import { actionShapes, type Shape } from "./geometry";
import { pickActionText, sketchAction } from "./grammar";
import { commandFor, isTakeoverKey, SHORTCUTS, type Command } from "./keys";
import { drawOverlay, type OverlayLayer } from "./overlay";
import { LiveDesktop } from "./livedesktop";
import { takeNextTask } from "./next";
import { OutcomePanel } from "./outcome";
import { candidatesPanel, headerMeta, modeControls, timeline } from "./panels";
import { ThinkAloudRecorder } from "./recorder";
import { ScreenView, type ScreenPick } from "./screen";
import { canDecide, mergeState } from "./state";
import { SessionSync } from "./sync";
import type { DecideResult, Decision, SessionState } from "./types";

function isEditable(target: EventTarget | null): boolean {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

export class SessionPage {
  private state: SessionState | null = null;
  private shownAt = performance.now();
  private pendingSince = Date.now();
  private hovered: number | null = null;
  private own: ScreenPick | null = null;
  private busy = false;
  private readonly sync: SessionSync;
  private candidatesKey = "";
  private timelineKey = "";

  private readonly instruction = h("h1", { class: "ws-instruction", "data-testid": "instruction" }, "Loading the session…");
  private readonly meta = h("div", { class: "ws-meta" });
  private readonly modeBox = h("div", { class: "ws-mode" });
  private readonly banner = h("div", { class: "ws-banner", role: "alert", "data-testid": "banner", hidden: true });
  private readonly screen: ScreenView;
  private readonly candidates = h("div", { class: "ws-cand-box", "aria-live": "polite" });
  private readonly editor: ActionEditor;
  private readonly outcome: OutcomePanel;
  private readonly timelineBox = h("section", { class: "ws-timeline", "aria-label": "Timeline" });
  private readonly help = h("div", { class: "ws-help", hidden: true, "data-testid": "help" });
  private readonly thinkaloud: ThinkAloudRecorder;
  private readonly desktop: LiveDesktop;

  constructor(
    private readonly root: HTMLElement,
    private readonly sessionId: number,
  ) {
    this.screen = new ScreenView(
      (pick) => {
        this.onPick(pick);
      },
      () => {
        this.drawOverlay();
      },
    );
    this.editor = new ActionEditor(
      (value) => {
        void this.onEditorSubmit(value);
      },
      () => {
        this.cancel();
      },
    );
    this.editor.action.addEventListener("input", () => {
      this.drawOverlay();
    });
    this.outcome = new OutcomePanel({
      writeOwn: () => {
        this.runCommand({ kind: "override" });
      },
      decide: (body) => this.decide(body),
      submit: () => void this.submit(),
      abandon: () => void this.abandon(),
      takeNext: (button) => void takeNextTask(button, this.banner),
    });
    this.sync = new SessionSync(sessionId, {
      current: () => this.state,
      apply: (state) => {
        this.apply(state);
      },
      setState: (next, before) => {
        this.setState(next, before);
      },
      showBanner: (text, kind) => {
        this.showBanner(text, kind);
      },
      thinkAloud: (state) => {
        this.thinkaloud.onEvent(state);
      },
    });
    this.thinkaloud = new ThinkAloudRecorder(sessionId, () => {
      this.thinkaloud.decorate(this.timelineBox);
    });
    this.desktop = new LiveDesktop({
      sessionId,
      screen: this.screen,
      root,
      thought: () => this.editor.thought.value,
      redrawHead: () => {
        if (this.state !== null) this.drawHead(this.state);
      },
      showBanner: (text, kind) => {
        this.showBanner(text, kind);
      },
      apply: (state) => {
        this.apply(state);
      },
      requestState: () => {
        this.sync.requestState();
      },
    });
    this.layout();
  }

  private layout(): void {
    const helpButton = h("button", { type: "button", class: "btn btn-secondary btn-small", title: "Keyboard shortcuts (?)" }, "Keys ?");
    helpButton.addEventListener("click", () => {
      this.toggleHelp();
    });
    render(
      this.help,
      h("h3", {}, "Keyboard"),
      h("dl", {}, ...SHORTCUTS.flatMap(([key, what]) => [h("dt", {}, h("kbd", {}, key)), h("dd", {}, what)])),
    );
    render(
      this.root,
      h(
        "header",
        { class: "ws-head" },
        h("div", { class: "ws-head-main" }, h("div", { class: "ws-kicker" }, "Task"), this.instruction, this.meta),
        h("div", { class: "ws-head-side" }, this.sync.connection, this.modeBox, helpButton),
      ),
      this.thinkaloud.root,
      this.banner,
      this.help,
      h(
        "div",
        { class: "ws-main" },
        this.screen.root,
        h(
          "aside",
          { class: "ws-side", "aria-label": "Candidates and decisions" },
          this.editor.root,
          h("h2", {}, "Model's candidates"),
          this.candidates,
          this.outcome.root,
        ),
      ),
      h("h2", { class: "ws-timeline-title" }, "Timeline"),
      this.timelineBox,
    );
  }

  async start(): Promise<void> {
    // Alt+T is taken before anything else sees it (noVNC included): in take-over the desktop gets
    // every other key, never this one, so leaving the take-over types nothing and records no step.
    for (const type of ["keydown", "keyup", "keypress"] as const) {
      window.addEventListener(
        type,
        (ev) => {
          if (!isTakeoverKey(ev) || !this.desktop.connected) return;
          ev.preventDefault();
          ev.stopImmediatePropagation();
          if (type === "keydown" && !ev.repeat) this.desktop.toggleTakeover();
        },
        { capture: true },
      );
    }
    document.addEventListener("keydown", (ev) => {
      this.onKey(ev);
    });
    window.addEventListener("beforeunload", () => {
      this.sync.stop();
    });
    setInterval(() => {
      this.tick();
    }, 1000);
    setInterval(() => {
      this.sync.restHeartbeat();
    }, 10_000);
    try {
      this.apply(await api<SessionState>(`/api/annotation/sessions/${this.sessionId}/`));
    } catch (error) {
      this.showBanner(`Could not load the session: ${errorText(error)}`);
      return;
    }
    this.sync.start(this.state?.status === "active");
    void this.thinkaloud.start(this.state?.status === "active");
    if (this.state?.task.env_kind === "desktop" && this.state.status === "active") void this.desktop.connect();
  }

  // ---------- state ----------

  private apply(incoming: SessionState): void {
    const before = this.state;
    const next = mergeState(before, incoming);
    this.setState(next, before);
  }

  private setState(next: SessionState, before: SessionState | null): void {
    this.state = next;
    const newScreen = before === null || before.observation.obs_version !== next.observation.obs_version;
    if (newScreen) {
      this.shownAt = performance.now();
      this.own = null;
      // While our own decision is in flight the new screen is its result, not a surprise.
      if (before !== null && !this.busy) this.editor.screenChanged();
    }
    if (next.candidates.status === "pending" && (newScreen || before.candidates.status !== "pending")) this.pendingSince = Date.now();
    if (before !== null && before.status === "active" && next.status !== "active") {
      this.sync.stop();
      void this.thinkaloud.finish();
    }
    this.draw();
  }

  private tick(): void {
    if (this.state?.candidates.status !== "pending") return;
    const el = this.candidates.querySelector<HTMLElement>("[data-elapsed]");
    if (el !== null) el.textContent = `${Math.round((Date.now() - this.pendingSince) / 1000)} s`;
  }

  // ---------- drawing ----------

  private draw(): void {
    const state = this.state;
    if (state === null) return;
    this.drawHead(state);
    const obs = state.observation;
    this.screen.showScreenshot(obs.screenshot_url, { width: obs.width, height: obs.height });
    this.drawCandidates(state);
    this.drawOutcome(state);
    this.drawTimeline(state);
    this.drawOverlay();
    this.editor.hints = { point: this.own?.point ?? null, endPoint: this.own?.end ?? null };
  }

  private drawHead(state: SessionState): void {
    this.instruction.textContent = state.instruction !== undefined && state.instruction !== "" ? state.instruction : state.task.instruction;
    render(this.meta, ...headerMeta(state));
    const desktop = this.desktop;
    const mode = modeControls(state.task.env_kind === "desktop", desktop.takeover, desktop.connected && state.status === "active", () => {
      desktop.toggleTakeover();
    });
    render(this.modeBox, ...mode);
  }

  private drawCandidates(state: SessionState): void {
    const enabled = canDecide(state) && !this.busy;
    const c = state.candidates;
    const key = [c.obs_version, c.status, c.items.length, enabled, state.observation.obs_version, state.status, state.observation.env_done].join("|");
    if (key === this.candidatesKey) return;
    this.candidatesKey = key;
    if (!canDecide(state)) {
      render(this.candidates, h("p", { class: "notice notice-info" }, state.status === "active" ? "No more candidates: the episode has ended." : `This session is ${state.status}.`));
      return;
    }
    render(
      this.candidates,
      ...candidatesPanel(c, state.policy.n, this.pendingSince, {
        accept: (i) => void this.decide({ kind: "accept", index: i }),
        edit: (i) => {
          this.openEdit(i);
        },
        hover: (i) => {
          this.setHover(i);
        },
      }, enabled),
    );
    this.markHover();
  }

  private setHover(index: number | null): void {
    if (this.hovered === index) return;
    this.hovered = index;
    this.markHover();
    this.drawOverlay();
  }

  private markHover(): void {
    for (const card of this.candidates.querySelectorAll<HTMLElement>(".ws-cand[data-index]")) {
      card.classList.toggle("ws-cand-hl", card.dataset.index === String(this.hovered));
    }
  }

  private drawOverlay(): void {
    const state = this.state;
    const display = this.screen.displaySize;
    const screen = this.screen.screenSize;
    if (state === null || display.width === 0 || screen.width === 0) return;
    const lastStep = state.steps.at(-1);
    const focus = lastStep?.executed_points.at(-1) ?? null;
    const layers: OverlayLayer[] = [];
    const c = state.candidates;
    if (canDecide(state) && c.status === "ready" && c.obs_version === state.observation.obs_version) {
      let noteRow = 0; // each candidate's corner notes below the ones before
      for (const cand of c.items) {
        // A candidate flagged off screen: its own points when they are screen pixels (the server's
        // screen_actions hold them moved onto the edge), so the marker says where they were.
        const actions = cand.clamped && cand.convention === "screen" && cand.actions.length > 0 ? cand.actions : cand.screen_actions;
        const shapes = actionShapes(actions, { screen, display, label: String(cand.index + 1), focus, noteRow, clamped: cand.clamped });
        noteRow += shapes.filter((sh) => sh.type === "text" && sh.pinned === true).length;
        layers.push({ index: cand.index, shapes });
      }
    }
    let own: Shape[] | null = null;
    const sketch = this.editor.isOpen && this.editor.mode.kind === "override" && this.editor.mode.convention === "screen" ? sketchAction(this.editor.action.value) : null;
    if (sketch !== null) own = actionShapes([sketch], { screen, display, label: "✎", focus });
    else if (this.own !== null) {
      own = actionShapes([{ kind: this.own.kind, point: this.own.point, ...(this.own.end ? { end_point: this.own.end } : {}) }], { screen, display, label: "✎" });
    }
    drawOverlay(this.screen.svg, layers, this.hovered, own, (i) => {
      this.setHover(i);
    });
  }

  private drawTimeline(state: SessionState): void {
    const key = state.steps.map((s) => `${s.index}:${s.decision}`).join(",");
    if (key === this.timelineKey && this.timelineBox.childElementCount > 0) return;
    this.timelineKey = key;
    render(this.timelineBox, ...timeline(state));
    this.thinkaloud.decorate(this.timelineBox);
    const list = this.timelineBox.querySelector("ol");
    if (list !== null) list.scrollLeft = list.scrollWidth;
  }

  private drawOutcome(state: SessionState): void {
    this.outcome.update(state, this.busy);
    if (state.status !== "active") this.editor.close();
  }

  private showBanner(text: string, kind: "error" | "info" = "error"): void {
    this.banner.textContent = text;
    this.banner.dataset.kind = kind;
    this.banner.hidden = text === "";
  }

  private toggleHelp(): void {
    this.help.hidden = !this.help.hidden;
  }

  // ---------- input ----------

  private onKey(ev: KeyboardEvent): void {
    if (this.desktop.takeover) return; // keys belong to the desktop
    const n = this.state?.candidates.status === "ready" ? this.state.candidates.items.length : 0;
    const command = commandFor(
      { key: ev.key, ctrlKey: ev.ctrlKey, metaKey: ev.metaKey, altKey: ev.altKey, editing: isEditable(ev.target) },
      n,
    );
    if (command === null) return;
    ev.preventDefault();
    this.runCommand(command);
  }

  private runCommand(command: Command): void {
    const state = this.state;
    switch (command.kind) {
      case "accept":
        if (state !== null && canDecide(state)) void this.decide({ kind: "accept", index: command.index });
        return;
      case "edit":
        this.openEdit(this.hovered ?? 0);
        return;
      case "override": {
        if (state === null || !canDecide(state)) return;
        const text = this.own !== null ? pickActionText(this.own) : this.editor.mode.kind === "override" ? this.editor.action.value : "";
        this.editor.open({ kind: "override", convention: "screen" }, this.editor.isOpen ? this.editor.thought.value : "", text, text === "" ? "action" : "thought");
        this.drawOverlay();
        return;
      }
      case "cancel":
        this.cancel();
        return;
      case "takeover":
        if (this.desktop.connected) this.desktop.toggleTakeover();
        return;
      case "takeoverHint":
        if (state?.task.env_kind === "desktop") this.showBanner("Take over the desktop with Alt+T; the same Alt+T brings you back to proposals.", "info");
        return;
      case "help":
        this.toggleHelp();
        return;
    }
  }

  private cancel(): void {
    this.editor.close();
    this.own = null;
    this.outcome.close();
    if (!this.help.hidden) this.help.hidden = true;
    this.draw();
  }

  private openEdit(index: number): void {
    const state = this.state;
    const cand = state?.candidates.items.find((c) => c.index === index);
    if (state === null || cand === undefined || !canDecide(state)) return;
    this.own = null;
    this.editor.hints = {};
    this.editor.open({ kind: "edit", index, convention: cand.convention }, cand.thought, cand.action_text);
    this.drawOverlay();
  }

  private onPick(pick: ScreenPick): void {
    const state = this.state;
    if (state === null || !canDecide(state) || this.busy) return;
    this.own = pick;
    this.editor.hints = { point: pick.point, endPoint: pick.end ?? null };
    this.editor.setAction({ kind: "override", convention: "screen" }, pickActionText(pick));
    this.drawOverlay();
    this.editor.thought.focus();
  }

  // ---------- decisions ----------

  private async onEditorSubmit(value: EditorSubmit): Promise<void> {
    const body: Omit<Decision, "obs_version"> =
      value.mode.kind === "edit"
        ? { kind: "edit", index: value.mode.index, thought: value.thought, action_text: value.actionText }
        : { kind: "override", thought: value.thought, action_text: value.actionText, convention: value.mode.convention };
    if (this.desktop.takeover) body.takeover = true;
    await this.decide(body);
  }

  /** Send a decision on the current screen; true when it was applied. Errors keep what was typed. */
  private async decide(body: Omit<Decision, "obs_version">): Promise<boolean> {
    const state = this.state;
    if (state === null || this.busy) return false;
    this.setBusy(true);
    this.showBanner("");
    this.editor.setError("");
    const decision: Decision = {
      ...body,
      obs_version: state.observation.obs_version,
      time_taken_ms: Math.round(performance.now() - this.shownAt),
    };
    try {
      const result = await api<DecideResult>(`/api/annotation/sessions/${this.sessionId}/decide/`, { method: "POST", body: decision });
      this.thinkaloud.cut(); // this step's words go up now
      this.editor.close();
      this.own = null;
      this.setBusy(false);
      this.apply(result.state);
      if (result.disk_full) this.showBanner(result.disk_full);
      return true;
    } catch (error) {
      this.setBusy(false);
      const text = errorText(error);
      if (error instanceof ApiError && error.status === 409) {
        this.showBanner(`${text} — the latest screen is shown now; what you typed is kept.`);
        this.sync.requestState();
      } else if (this.editor.isOpen && (body.kind === "edit" || body.kind === "override")) {
        this.editor.setError(text);
      } else {
        this.showBanner(text);
      }
      return false;
    }
  }

  private setBusy(busy: boolean): void {
    this.busy = busy;
    this.editor.setBusy(busy);
    this.root.classList.toggle("ws-busy", busy);
    if (this.state !== null) {
      this.drawCandidates(this.state);
      this.drawOutcome(this.state);
    }
  }

  private async submit(): Promise<void> {
    if (this.busy) return;
    this.setBusy(true);
    try {
      this.apply(await api<SessionState>(`/api/annotation/sessions/${this.sessionId}/submit/`, { method: "POST" }));
    } catch (error) {
      this.showBanner(errorText(error));
      if (error instanceof ApiError && error.status === 409) this.sync.requestState();
    } finally {
      this.setBusy(false);
    }
  }

  private async abandon(): Promise<void> {
    try {
      this.apply(await api<SessionState>(`/api/annotation/sessions/${this.sessionId}/abandon/`, { method: "POST" }));
    } catch (error) {
      this.showBanner(errorText(error));
    }
  }
}
