// Keyboard shortcuts of the workspace: a pure map from a key press to a command.

export type Command =
  | { kind: "accept"; index: number }
  | { kind: "edit" }
  | { kind: "override" }
  | { kind: "cancel" }
  | { kind: "takeover" }
  | { kind: "takeoverHint" }
  | { kind: "help" };

export interface KeyPress {
  key: string;
  ctrlKey: boolean;
  metaKey: boolean;
  altKey: boolean;
  /** The focus is in a text field (shortcuts other than Escape are the field's own keys then). */
  editing: boolean;
}

export const SHORTCUTS: readonly [string, string][] = [
  ["1 … 9", "accept that candidate"],
  ["E", "edit the highlighted candidate"],
  ["O", "write your own action (or click / drag on the screen)"],
  ["Enter", "in the action field: send"],
  ["Ctrl+Space", "in the action field: suggestions"],
  ["Esc", "close the editor, clear your click"],
  ["Alt+T", "take over the desktop / back to proposals (the same key in and out; in take-over every other key goes to the desktop)"],
  ["?", "show these keys"],
];

/** Alt+T: into the take-over and out of it. It is a chord because in take-over every plain key
 *  (a "t" too) is typed into the desktop; the page takes this one before noVNC sees it. */
export function isTakeoverKey(press: Pick<KeyPress, "key" | "ctrlKey" | "metaKey" | "altKey">): boolean {
  return press.altKey && !press.ctrlKey && !press.metaKey && press.key.toLowerCase() === "t";
}

/** The command for `press` with `candidates` candidates ready (0 when none), or null. */
export function commandFor(press: KeyPress, candidates: number): Command | null {
  if (press.key === "Escape") return { kind: "cancel" };
  if (isTakeoverKey(press)) return { kind: "takeover" };
  if (press.editing || press.ctrlKey || press.metaKey || press.altKey) return null;
  if (/^[1-9]$/.test(press.key)) {
    const index = Number(press.key) - 1;
    return index < candidates ? { kind: "accept", index } : null;
  }
  switch (press.key.toLowerCase()) {
    case "e":
      return candidates > 0 ? { kind: "edit" } : null;
    case "o":
      return { kind: "override" };
    case "t":
      return { kind: "takeoverHint" };
    case "?":
      return { kind: "help" };
    default:
      return null;
  }
}
