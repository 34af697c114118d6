import { describe, expect, it } from "vitest";
import { commandFor, isTakeoverKey } from "./keys";

const press = (key: string, extra: Partial<Parameters<typeof commandFor>[0]> = {}) => ({ key, ctrlKey: false, metaKey: false, altKey: false, editing: false, ...extra });

describe("commandFor", () => {
  it("accepts candidate k with key k", () => {
    expect(commandFor(press("1"), 3)).toEqual({ kind: "accept", index: 0 });
    expect(commandFor(press("3"), 3)).toEqual({ kind: "accept", index: 2 });
  });
  it("ignores numbers beyond the candidates, and while none are ready", () => {
    expect(commandFor(press("4"), 3)).toBeNull();
    expect(commandFor(press("1"), 0)).toBeNull();
  });
  it("leaves keys to text fields and modified presses, except Escape", () => {
    expect(commandFor(press("1", { editing: true }), 3)).toBeNull();
    expect(commandFor(press("1", { ctrlKey: true }), 3)).toBeNull();
    expect(commandFor(press("Escape", { editing: true }), 3)).toEqual({ kind: "cancel" });
  });
  it("maps the letter commands", () => {
    expect(commandFor(press("e"), 2)).toEqual({ kind: "edit" });
    expect(commandFor(press("e"), 0)).toBeNull();
    expect(commandFor(press("O"), 0)).toEqual({ kind: "override" });
    expect(commandFor(press("t"), 0)).toEqual({ kind: "takeoverHint" });
    expect(commandFor(press("?"), 0)).toEqual({ kind: "help" });
  });
  it("takes over and back with the same chord, Alt+T, even from a text field", () => {
    expect(commandFor(press("t", { altKey: true }), 0)).toEqual({ kind: "takeover" });
    expect(commandFor(press("T", { altKey: true, editing: true }), 0)).toEqual({ kind: "takeover" });
    expect(commandFor(press("t", { altKey: true, ctrlKey: true }), 0)).toBeNull();
    expect(isTakeoverKey({ key: "t", altKey: false, ctrlKey: false, metaKey: false })).toBe(false);
  });
});
