// The action editor: thought + action in the UI-TARS grammar, with suggestions at the caret
// (action names, their arguments, directions, keys, the coordinates of the last click). Used for
// editing a candidate (its convention) and for the annotator's own action (screen pixels).

import { h, render } from "../lib/dom";
import { applySuggestion, quickCheck, suggest, type CompletionHints, type Suggestion } from "./grammar";

export type EditorMode = { kind: "edit"; index: number; convention: string } | { kind: "override"; convention: string };

export interface EditorSubmit {
  mode: EditorMode;
  thought: string;
  actionText: string;
}

export class ActionEditor {
  readonly root: HTMLElement;
  readonly thought: HTMLTextAreaElement;
  readonly action: HTMLTextAreaElement;
  private readonly title: HTMLElement;
  private readonly hint: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly error: HTMLElement;
  private readonly send: HTMLButtonElement;
  private suggestions: Suggestion[] = [];
  private selected = 0;
  mode: EditorMode = { kind: "override", convention: "screen" };
  hints: CompletionHints = {};

  constructor(
    private readonly onSubmit: (value: EditorSubmit) => void,
    private readonly onCancel: () => void,
  ) {
    this.title = h("h3", {}, "Your action");
    this.hint = h("p", { class: "ws-editor-hint" });
    this.thought = h("textarea", { id: "ws-thought", rows: 3, placeholder: "Why this action? (what you see, what you intend)" });
    this.action = h("textarea", {
      id: "ws-action",
      rows: 2,
      spellcheck: "false",
      autocomplete: "off",
      placeholder: "click(start_box='(x,y)') — click the screen, or type and pick a suggestion",
      "aria-autocomplete": "list",
      "aria-controls": "ws-suggest",
    });
    this.list = h("ul", { class: "ws-suggest", id: "ws-suggest", role: "listbox", hidden: true });
    this.error = h("div", { class: "ws-editor-error", role: "alert", "data-testid": "editor-error" });
    this.send = h("button", { type: "button", class: "btn" }, "Send");
    const cancel = h("button", { type: "button", class: "btn btn-secondary" }, "Cancel");
    this.root = h(
      "section",
      { class: "ws-editor", "data-testid": "editor", hidden: true },
      this.title,
      this.hint,
      h("label", { for: "ws-thought" }, "Thought"),
      this.thought,
      h("label", { for: "ws-action" }, "Action"),
      h("div", { class: "ws-action-wrap" }, this.action, this.list),
      this.error,
      h("div", { class: "ws-editor-buttons" }, this.send, cancel, h("span", { class: "muted" }, "Enter (Ctrl+Enter in the thought) sends · Ctrl+Space suggests · Esc closes")),
    );
    this.send.addEventListener("click", () => {
      this.submit();
    });
    cancel.addEventListener("click", () => {
      this.onCancel();
    });
    this.action.addEventListener("input", () => {
      this.refreshSuggestions(false);
      this.setError("");
    });
    this.action.addEventListener("click", () => {
      this.refreshSuggestions(false);
    });
    // Close the suggestions when the focus or a click goes elsewhere (not on blur: a window losing
    // focus should not lose the list).
    document.addEventListener("focusin", (ev) => {
      if (ev.target !== this.action) this.closeSuggestions();
    });
    document.addEventListener("pointerdown", (ev) => {
      if (ev.target instanceof Node && !this.list.contains(ev.target) && ev.target !== this.action) this.closeSuggestions();
    });
    this.action.addEventListener("keydown", (ev) => {
      this.onKey(ev);
    });
    this.thought.addEventListener("keydown", (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) {
        ev.preventDefault();
        this.submit();
      }
    });
  }

  get isOpen(): boolean {
    return !this.root.hidden;
  }

  /** Open the editor in `mode`, with `thought` / `actionText` unless `keep` (what was typed stays). */
  open(mode: EditorMode, thought: string, actionText: string, focus: "thought" | "action" | null = "action"): void {
    this.mode = mode;
    this.root.hidden = false;
    this.thought.value = thought;
    this.action.value = actionText;
    this.describe();
    this.setError("");
    this.root.scrollIntoView({ block: "nearest" });
    if (focus !== null) {
      const el = focus === "thought" ? this.thought : this.action;
      el.focus();
      el.setSelectionRange(el.value.length, el.value.length);
    }
  }

  /** Replace only the action (a click on the screen), keeping the thought typed so far. */
  setAction(mode: EditorMode, actionText: string): void {
    const thought = this.isOpen ? this.thought.value : "";
    this.open(mode, thought, actionText, null);
  }

  close(): void {
    this.root.hidden = true;
    this.closeSuggestions();
  }

  setBusy(busy: boolean): void {
    this.send.disabled = busy;
    this.send.textContent = busy ? "Sending…" : "Send";
  }

  /** The screen changed under an open editor: an edit of an old candidate becomes the annotator's
   *  own action in the same convention, so it is not applied to a different candidate. */
  screenChanged(): void {
    if (!this.isOpen) return;
    if (this.mode.kind === "edit") this.mode = { kind: "override", convention: this.mode.convention };
    this.describe();
    this.setError("The screen changed while you were writing: check the action against the new screen.");
  }

  setError(text: string): void {
    this.error.textContent = text;
    this.error.hidden = text === "";
  }

  private describe(): void {
    if (this.mode.kind === "edit") {
      this.title.textContent = `Edit candidate ${this.mode.index + 1}`;
      this.hint.textContent = `Coordinates in the model's convention (${this.mode.convention}). Clicking the screen switches to your own action in screen pixels.`;
    } else if (this.mode.convention === "screen") {
      this.title.textContent = "Your action";
      this.hint.textContent = "Coordinates in screen pixels: click or drag on the screen to set them.";
    } else {
      this.title.textContent = "Your action";
      this.hint.textContent = `Coordinates in the model's convention (${this.mode.convention}).`;
    }
  }

  private submit(): void {
    this.closeSuggestions();
    const problem = quickCheck(this.action.value);
    if (problem !== "") {
      this.setError(problem);
      this.action.focus();
      return;
    }
    this.onSubmit({ mode: this.mode, thought: this.thought.value.trim(), actionText: this.action.value.trim() });
  }

  private onKey(ev: KeyboardEvent): void {
    const open = this.suggestions.length > 0 && !this.list.hidden;
    if (ev.key === " " && ev.ctrlKey) {
      ev.preventDefault();
      this.refreshSuggestions(true);
    } else if (open && (ev.key === "ArrowDown" || ev.key === "ArrowUp")) {
      ev.preventDefault();
      const n = this.suggestions.length;
      this.selected = (this.selected + (ev.key === "ArrowDown" ? 1 : n - 1)) % n;
      this.drawSuggestions();
    } else if (open && (ev.key === "Tab" || ev.key === "Enter")) {
      ev.preventDefault();
      this.pick(this.selected);
    } else if (open && ev.key === "Escape") {
      ev.preventDefault();
      ev.stopPropagation();
      this.closeSuggestions();
    } else if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      this.submit();
    }
  }

  private refreshSuggestions(explicit: boolean): void {
    const caret = this.action.selectionStart;
    this.suggestions = suggest(this.action.value, caret, this.hints, explicit).slice(0, 12);
    this.selected = 0;
    this.drawSuggestions();
  }

  private pick(index: number): void {
    const chosen = this.suggestions[index];
    if (chosen === undefined) return;
    const next = applySuggestion(this.action.value, chosen);
    this.action.value = next.text;
    this.action.focus();
    this.action.setSelectionRange(next.caret, next.caret);
    this.refreshSuggestions(false);
  }

  private closeSuggestions(): void {
    this.suggestions = [];
    this.list.hidden = true;
    this.action.removeAttribute("aria-activedescendant");
  }

  private drawSuggestions(): void {
    if (this.suggestions.length === 0) {
      this.closeSuggestions();
      return;
    }
    this.list.hidden = false;
    render(
      this.list,
      ...this.suggestions.map((s, i) => {
        const item = h(
          "li",
          { id: `ws-suggest-${i}`, role: "option", "aria-selected": i === this.selected ? "true" : "false", class: i === this.selected ? "active" : null },
          h("code", {}, s.label),
          h("span", { class: "muted" }, s.detail),
        );
        item.addEventListener("mousedown", (ev) => {
          ev.preventDefault();
          this.pick(i);
        });
        return item;
      }),
    );
    this.action.setAttribute("aria-activedescendant", `ws-suggest-${this.selected}`);
  }
}
