import { describe, expect, it } from "vitest";
import { duration, filterEnvs, kindsOf, queueState, type FleetEnv, type FleetQueue } from "./model";

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

describe("queueState", () => {
  const q = (over: Partial<FleetQueue>): FleetQueue => ({ queue: "asr.live", depth: 0, oldest_wait_s: null, workers: ["asr-live@h"], concurrency: 2, ...over });
  it("says idle, how long the oldest waits, or that nobody consumes the queue", () => {
    expect(queueState(q({}))).toEqual({ text: "idle", tone: "completed" });
    expect(queueState(q({ depth: 3, oldest_wait_s: 12.4 }))).toEqual({ text: "3 waiting, oldest 12 s", tone: "running" });
    expect(queueState(q({ depth: 2, workers: [] }))).toEqual({ text: "2 waiting and no worker", tone: "failed" });
    expect(queueState(q({ workers: [] })).text).toBe("no worker");
  });
});
