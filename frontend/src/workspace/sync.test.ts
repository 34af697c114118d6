import { describe, expect, it } from "vitest";
import { connectionLabel } from "./sync";

describe("connectionLabel", () => {
  it("says what the socket does, and that a finished session's closed socket is the session closing", () => {
    expect(connectionLabel("open", true)).toEqual({ text: "Live", status: "open" });
    expect(connectionLabel("reconnecting", true)).toEqual({ text: "Reconnecting…", status: "reconnecting" });
    expect(connectionLabel("closed", true)).toEqual({ text: "Offline", status: "closed" });
    expect(connectionLabel("closed", null)).toEqual({ text: "Offline", status: "closed" });
    expect(connectionLabel("closed", false)).toEqual({ text: "Session closed", status: "ended" });
  });
});
