import { describe, expect, it } from "vitest";
import { duration, filterEnvs, kindsOf, type FleetEnv } from "./model";

const env = (over: Partial<FleetEnv>): FleetEnv => ({
  env_id: "e", kind: "browser", host: "h", state: "idle", health: "ok", health_reason: "",
  boot_s: 1, age_s: 10, lease: null, watchable: false, ...over,
});

describe("duration", () => {
  it("reads in words at every scale", () => {
    expect(duration(null)).toBe("—");
    expect(duration(4.4)).toBe("4 s");
    expect(duration(185)).toBe("3 min 5 s");
    expect(duration(120)).toBe("2 min");
    expect(duration(7800)).toBe("2 h 10 min");
    expect(duration(3 * 86400 + 4 * 3600)).toBe("3 d 4 h");
  });
});

describe("filterEnvs", () => {
  const run = env({ env_id: "a", state: "leased", lease: { lease_id: "l", owner: { kind: "rl", id: 3, label: "run #3", url: "/runs/3/" }, owner_raw: "rl:3:0:1", task: "", age_s: 1, expires_in_s: 50 } });
  const free = env({ env_id: "b", kind: "desktop" });
  const dead = env({ env_id: "c", state: "crashed", health: "crashed" });
  const all = [run, free, dead];
  it("keeps what each filter asks for", () => {
    expect(filterEnvs(all, { kind: "", owner: "", problems: false })).toHaveLength(3);
    expect(filterEnvs(all, { kind: "desktop", owner: "", problems: false }).map((e) => e.env_id)).toEqual(["b"]);
    expect(filterEnvs(all, { kind: "", owner: "rl", problems: false }).map((e) => e.env_id)).toEqual(["a"]);
    expect(filterEnvs(all, { kind: "", owner: "free", problems: false }).map((e) => e.env_id)).toEqual(["b", "c"]);
    expect(filterEnvs(all, { kind: "", owner: "", problems: true }).map((e) => e.env_id)).toEqual(["c"]);
  });
  it("lists kinds once, sorted", () => {
    expect(kindsOf(all)).toEqual(["browser", "desktop"]);
  });
});
