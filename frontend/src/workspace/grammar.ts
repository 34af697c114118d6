// The UI-TARS action grammar as the editor knows it: action names, their arguments, and
// auto-completion at the caret (action names, argument names, argument values).

export type ArgKind = "point" | "text" | "keys" | "direction";

export interface ArgSpec {
  name: string;
  kind: ArgKind;
  required: boolean;
}

const START: ArgSpec = { name: "start_box", kind: "point", required: true };
const END: ArgSpec = { name: "end_box", kind: "point", required: true };

/** Actions in the order the editor offers them, with their canonical argument names. */
export const ACTIONS: Readonly<Record<string, readonly ArgSpec[]>> = {
  click: [START],
  left_double: [START],
  right_single: [START],
  drag: [START, END],
  hotkey: [{ name: "key", kind: "keys", required: true }],
  type: [{ name: "content", kind: "text", required: true }],
  scroll: [{ ...START, required: false }, { name: "direction", kind: "direction", required: true }],
  wait: [],
  finished: [{ name: "content", kind: "text", required: false }],
  call_user: [{ name: "content", kind: "text", required: false }],
  hover: [START],
  long_press: [START],
  press_home: [],
  press_back: [],
  swipe: [START, { ...END, required: false }, { name: "direction", kind: "direction", required: false }],
  open_app: [{ name: "app_name", kind: "text", required: true }],
};

export const ACTION_HELP: Readonly<Record<string, string>> = {
  click: "left click at a point",
  left_double: "double click",
  right_single: "right click",
  drag: "press, move, release",
  hotkey: "press keys together, e.g. 'ctrl c'",
  type: "type text; end with \\n to press Enter",
  scroll: "scroll up / down / left / right",
  wait: "wait for the screen to change",
  finished: "the task is done (answer in content)",
  call_user: "ask the user for help",
  hover: "move the pointer",
  long_press: "touch and hold (phone)",
  press_home: "home button (phone)",
  press_back: "back button (phone)",
  swipe: "swipe (phone)",
  open_app: "open an app by name (phone)",
};

export const DIRECTIONS = ["down", "up", "left", "right"] as const;

export const COMMON_KEYS = [
  "enter", "tab", "escape", "backspace", "delete", "space", "up", "down", "left", "right", "home", "end",
  "pageup", "pagedown", "ctrl a", "ctrl c", "ctrl v", "ctrl x", "ctrl z", "ctrl s", "ctrl f", "ctrl l",
  "ctrl t", "ctrl w", "shift tab", "alt tab", "alt f4", "ctrl shift t", "f5",
] as const;

export type Context =
  | { kind: "action"; prefix: string; from: number }
  | { kind: "arg"; action: string; prefix: string; from: number; used: string[] }
  | { kind: "value"; action: string; arg: string; prefix: string; from: number; quote: string }
  | { kind: "none" };

const IDENT = /[A-Za-z_][A-Za-z0-9_]*$/;

function identBefore(text: string, end: number): { name: string; from: number } {
  const m = IDENT.exec(text.slice(0, end));
  return m ? { name: m[0], from: end - m[0].length } : { name: "", from: end };
}

function prevNonSpace(text: string, index: number): string {
  for (let i = index - 1; i >= 0; i--) {
    const ch = text.charAt(i);
    if (!/\s/.test(ch)) return ch;
  }
  return "";
}

/** What is being written at `caret`: an action name, an argument name, or an argument's value. */
export function completionContext(text: string, caret: number): Context {
  let quote = "";
  let quoteStart = -1;
  const opens: number[] = [];
  for (let i = 0; i < caret; i++) {
    const ch = text.charAt(i);
    if (quote !== "") {
      if (ch === "\\") i++;
      else if (ch === quote) quote = "";
      continue;
    }
    if (ch === "'" || ch === '"') {
      quote = ch;
      quoteStart = i;
    } else if (ch === "(") opens.push(i);
    else if (ch === ")") opens.pop();
  }
  const open = opens[0];
  const action = open === undefined ? "" : identBefore(text, open).name;
  if (quote !== "") {
    if (open === undefined) return { kind: "none" };
    const eq = text.slice(0, quoteStart).trimEnd();
    if (!eq.endsWith("=")) return { kind: "none" };
    const name = eq.slice(0, -1).trimEnd();
    const arg = identBefore(name, name.length).name;
    return { kind: "value", action, arg, prefix: text.slice(quoteStart + 1, caret), from: quoteStart + 1, quote };
  }
  const word = identBefore(text, caret);
  const before = prevNonSpace(text, word.from);
  if (open !== undefined) {
    if (before !== "(" && before !== ",") return { kind: "none" };
    const inner = text.slice(open + 1, word.from).replace(/'(?:\\.|[^'\\])*'|"(?:\\.|[^"\\])*"/g, "''");
    const used = [...inner.matchAll(/([A-Za-z_][A-Za-z0-9_]*)\s*=/g)].map((m) => m[1] ?? "");
    return { kind: "arg", action, prefix: word.name, from: word.from, used };
  }
  if (before === "" || before === ")") return { kind: "action", prefix: word.name, from: word.from };
  return { kind: "none" };
}

export interface Suggestion {
  label: string;
  detail: string;
  /** Replace text[from, to) with `insert`, then put the caret at `caret` (absolute). */
  from: number;
  to: number;
  insert: string;
  caret: number;
}

export interface CompletionHints {
  /** The last point the annotator clicked on the screen, in the editor's coordinates. */
  point?: [number, number] | null;
  /** The other end of the last drag on the screen. */
  endPoint?: [number, number] | null;
}

function pointText(p: [number, number]): string {
  return `(${Math.round(p[0])},${Math.round(p[1])})`;
}

/** `before` + caret + `after`, as (text, caret offset). */
function snippet(before: string, after = ""): [string, number] {
  return [before + after, before.length];
}

export function actionSnippet(name: string, hints: CompletionHints = {}): [string, number] {
  const spec = ACTIONS[name] ?? [];
  const point = hints.point ? pointText(hints.point) : null;
  const end = hints.endPoint ? pointText(hints.endPoint) : null;
  if (spec.length === 0) return snippet(`${name}()`);
  switch (name) {
    case "drag":
      if (point && end) return snippet(`drag(start_box='${point}', end_box='${end}')`);
      if (point) return snippet(`drag(start_box='${point}', end_box='(`, ")')");
      return snippet("drag(start_box='(", ")', end_box='()')");
    case "scroll":
      return point ? snippet(`scroll(start_box='${point}', direction='`, "')") : snippet("scroll(direction='", "')");
    case "swipe":
      if (point && end) return snippet(`swipe(start_box='${point}', end_box='${end}')`);
      return point ? snippet(`swipe(start_box='${point}', direction='`, "')") : snippet("swipe(start_box='(", ")', direction='up')");
    case "call_user":
      return snippet("call_user()");
    default: {
      const first = spec[0];
      if (first === undefined) return snippet(`${name}()`);
      if (first.kind === "point") return point ? snippet(`${name}(start_box='${point}')`) : snippet(`${name}(start_box='(`, ")')");
      return snippet(`${name}(${first.name}='`, "')");
    }
  }
}

function argSnippet(arg: ArgSpec, hints: CompletionHints): [string, number] {
  if (arg.kind === "point") {
    const p = arg.name === "end_box" ? hints.endPoint : hints.point;
    return p ? snippet(`${arg.name}='${pointText(p)}'`) : snippet(`${arg.name}='(`, ")'");
  }
  return snippet(`${arg.name}='`, "'");
}

/** Suggestions at `caret`, best first; empty when nothing fits. `explicit`: asked for (Ctrl+Space),
 *  so an empty prefix still lists everything. */
export function suggest(text: string, caret: number, hints: CompletionHints = {}, explicit = false): Suggestion[] {
  const ctx = completionContext(text, caret);
  if (ctx.kind === "none") return [];
  if (ctx.kind === "action") {
    if (ctx.prefix === "" && !explicit && text.trim() !== "") return [];
    // Replace the whole word under the caret, and a call's "(...)" after it if there is none yet.
    const wordEnd = caret + (/^[A-Za-z0-9_]*/.exec(text.slice(caret))?.[0].length ?? 0);
    return Object.keys(ACTIONS)
      .filter((name) => name.startsWith(ctx.prefix.toLowerCase()) && name !== ctx.prefix)
      .map((name) => {
        const [insert, offset] = actionSnippet(name, hints);
        return { label: name, detail: ACTION_HELP[name] ?? "", from: ctx.from, to: wordEnd, insert, caret: ctx.from + offset };
      });
  }
  const spec = ACTIONS[ctx.action];
  if (spec === undefined) return [];
  if (ctx.kind === "arg") {
    if (ctx.prefix === "" && !explicit && spec.every((a) => ctx.used.includes(a.name))) return [];
    return spec
      .filter((a) => !ctx.used.includes(a.name) && a.name.startsWith(ctx.prefix) && a.name !== ctx.prefix)
      .map((a) => {
        const [insert, offset] = argSnippet(a, hints);
        return {
          label: a.name,
          detail: `${a.kind}${a.required ? "" : ", optional"}`,
          from: ctx.from,
          to: caret,
          insert,
          caret: ctx.from + offset,
        };
      });
  }
  const arg = spec.find((a) => a.name === ctx.arg) ?? null;
  if (arg === null) return [];
  const closing = text.slice(caret).indexOf(ctx.quote);
  const to = closing === -1 ? caret : caret + closing;
  const values: { value: string; detail: string }[] =
    arg.kind === "direction"
      ? DIRECTIONS.map((d) => ({ value: d, detail: "direction" }))
      : arg.kind === "keys"
        ? COMMON_KEYS.map((k) => ({ value: k, detail: "keys" }))
        : arg.kind === "point"
          ? [hints.point, hints.endPoint]
              .filter((p): p is [number, number] => Boolean(p))
              .map((p, i) => ({ value: pointText(p), detail: i === 0 ? "last click" : "drag end" }))
          : [];
  return values
    .filter((v) => v.value.startsWith(ctx.prefix) && v.value !== ctx.prefix)
    .map((v) => ({
      label: v.value,
      detail: v.detail,
      from: ctx.from,
      to,
      insert: closing === -1 ? v.value + ctx.quote : v.value,
      caret: ctx.from + v.value.length + 1,
    }));
}

/** Apply a suggestion: the new text and caret. */
export function applySuggestion(text: string, s: Suggestion): { text: string; caret: number } {
  return { text: text.slice(0, s.from) + s.insert + text.slice(s.to), caret: s.caret };
}

/** A quick client-side check before sending (the server's parser has the last word): the action
 *  name is known and the parentheses and quotes are closed. Returns a message or "". */
export function quickCheck(text: string): string {
  const trimmed = text.trim();
  if (trimmed === "") return "Write an action, e.g. click(start_box='(120,80)')";
  const name = /^([A-Za-z_][A-Za-z0-9_]*)\s*\(/.exec(trimmed)?.[1];
  if (name === undefined) return "An action looks like name(arg='value')";
  if (!(name in ACTIONS)) return `Unknown action "${name}"; known: ${Object.keys(ACTIONS).join(", ")}`;
  const ctx = completionContext(trimmed, trimmed.length);
  if (ctx.kind === "value") return "A quoted value is not closed";
  if (!trimmed.endsWith(")")) return "The action's parenthesis is not closed";
  return "";
}

/** The action text for a pick on the screen (screen pixels). */
export function pickActionText(pick: { kind: string; point: [number, number]; end?: [number, number] | undefined }): string {
  const start = pointText(pick.point);
  if (pick.kind === "drag" && pick.end) return `drag(start_box='${start}', end_box='${pointText(pick.end)}')`;
  return `${pick.kind}(start_box='${start}')`;
}

const BOX = (name: string): RegExp => new RegExp(`${name}\\s*=\\s*['"]\\(?\\s*(-?[\\d.]+)\\s*,\\s*(-?[\\d.]+)`);

/** The first action of `text` with its points, good enough to draw while the annotator types
 *  (the server parses for real). Null when there is no known action name. */
export function sketchAction(text: string): { kind: string; point?: [number, number]; end_point?: [number, number]; direction?: string; text?: string; keys?: string[] } | null {
  const kind = /^\s*([A-Za-z_][A-Za-z0-9_]*)\s*\(/.exec(text)?.[1];
  if (kind === undefined || !(kind in ACTIONS)) return null;
  const out: { kind: string; point?: [number, number]; end_point?: [number, number]; direction?: string; text?: string; keys?: string[] } = { kind };
  const start = BOX("(?:start_box|point|start_point)").exec(text);
  if (start) out.point = [Number(start[1]), Number(start[2])];
  const end = BOX("(?:end_box|end_point)").exec(text);
  if (end) out.end_point = [Number(end[1]), Number(end[2])];
  const direction = /direction\s*=\s*['"]?(up|down|left|right)/.exec(text)?.[1];
  if (direction !== undefined) out.direction = direction;
  const content = /content\s*=\s*'((?:\\.|[^'\\])*)'/.exec(text)?.[1];
  if (content !== undefined) out.text = content.replace(/\\n/g, "\n").replace(/\\(.)/g, "$1");
  const keys = /key\s*=\s*'([^']*)'/.exec(text)?.[1];
  if (keys !== undefined) out.keys = keys.split(/\s+/).filter(Boolean);
  return out;
}
