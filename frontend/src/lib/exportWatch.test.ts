import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { parseProgress, watchExportJob, wsUrl, type JobView, type SocketLike, type WatchDeps } from "./exportWatch";
import type { ExportJob } from "./types";

class FakeSocket implements SocketLike {
  onmessage: ((event: { data: unknown }) => void) | null = null;
  onclose: (() => void) | null = null;
  closed = false;
  constructor(readonly url: string) {}
  close(): void {
    this.closed = true;
  }
  emit(event: object): void {
    this.onmessage?.({ data: JSON.stringify(event) });
  }
}

function job(overrides: Partial<ExportJob>): ExportJob {
  return {
    id: 7, created_by: "res", format: "jsonl", filters: {}, status: "queued", progress: 0,
    total_trajectories: 0, done_trajectories: 0, error: "", download_url: null,
    created_at: "2026-01-01T00:00:00Z", started_at: null, finished_at: null, ...overrides,
  };
}

function progress(status: ExportJob["status"], pct: number): object {
  return { type: "export.progress", job_id: 7, status, progress: pct, done_trajectories: pct, total_trajectories: 100, error: "" };
}

let sockets: FakeSocket[];
let fetchJob: ReturnType<typeof vi.fn<(id: number) => Promise<ExportJob>>>;
let deps: WatchDeps;

beforeEach(() => {
  sockets = [];
  fetchJob = vi.fn<(id: number) => Promise<ExportJob>>();
  deps = {
    openSocket: (url) => {
      const socket = new FakeSocket(url);
      sockets.push(socket);
      return socket;
    },
    fetchJob,
    pollMs: 1000,
    location: { protocol: "http:", host: "127.0.0.1:8000" },
  };
});

afterEach(() => {
  vi.useRealTimers();
});

describe("wsUrl", () => {
  it("follows the page's scheme", () => {
    expect(wsUrl("/ws/x/", { protocol: "https:", host: "fly.example" })).toBe("wss://fly.example/ws/x/");
    expect(wsUrl("/ws/x/", { protocol: "http:", host: "localhost:8000" })).toBe("ws://localhost:8000/ws/x/");
  });
});

describe("parseProgress", () => {
  it("accepts progress events only", () => {
    expect(parseProgress(JSON.stringify(progress("running", 5)))).toMatchObject({ status: "running" });
    expect(parseProgress("not json")).toBeNull();
    expect(parseProgress('{"type": "other"}')).toBeNull();
    expect(parseProgress(42)).toBeNull();
  });
});

describe("watchExportJob over the websocket", () => {
  it("reports live progress, then the finished job with its download link", async () => {
    const seen: JobView[] = [];
    fetchJob.mockResolvedValue(job({ status: "succeeded", progress: 100, download_url: "/api/export-jobs/7/download/" }));
    watchExportJob(7, (j) => seen.push(j), undefined, deps);
    const socket = sockets[0];
    expect(socket?.url).toBe("ws://127.0.0.1:8000/ws/export-jobs/7/");

    socket?.emit(progress("running", 40));
    socket?.emit({ ...progress("running", 50), job_id: 8 }); // another job's event: ignored
    socket?.emit(progress("succeeded", 100));
    await vi.waitFor(() => {
      expect(seen).toHaveLength(3);
    });
    expect(seen.map((j) => j.status)).toEqual(["running", "succeeded", "succeeded"]);
    expect(seen[2]?.download_url).toBe("/api/export-jobs/7/download/");
    expect(socket?.closed).toBe(true);
    expect(fetchJob).toHaveBeenCalledTimes(1);
  });
});

describe("watchExportJob without a websocket", () => {
  it("polls the REST endpoint until the job is terminal", async () => {
    vi.useFakeTimers();
    const seen: string[] = [];
    fetchJob
      .mockResolvedValueOnce(job({ status: "running", progress: 30 }))
      .mockResolvedValueOnce(job({ status: "failed", error: "ValueError: bad filter" }));
    watchExportJob(7, (j) => seen.push(`${j.status}:${j.error}`), undefined, deps);
    sockets[0]?.onclose?.(); // the server refused the upgrade

    await vi.advanceTimersByTimeAsync(0);
    expect(seen).toEqual(["running:"]);
    await vi.advanceTimersByTimeAsync(1000);
    expect(seen).toEqual(["running:", "failed:ValueError: bad filter"]);
    await vi.advanceTimersByTimeAsync(5000);
    expect(fetchJob).toHaveBeenCalledTimes(2);
  });

  it("keeps polling through a failed request and reports it", async () => {
    vi.useFakeTimers();
    const errors: string[] = [];
    fetchJob.mockRejectedValueOnce(new Error("Could not reach the server")).mockResolvedValueOnce(job({ status: "cancelled" }));
    const seen: string[] = [];
    deps.openSocket = () => {
      throw new Error("WebSocket unsupported");
    };
    watchExportJob(7, (j) => seen.push(j.status), (m) => errors.push(m), deps);
    await vi.advanceTimersByTimeAsync(1000);
    expect(errors).toEqual(["Could not reach the server"]);
    expect(seen).toEqual(["cancelled"]);
  });

  it("stops when asked", async () => {
    vi.useFakeTimers();
    fetchJob.mockResolvedValue(job({ status: "running" }));
    const stop = watchExportJob(7, () => undefined, undefined, deps);
    sockets[0]?.onclose?.();
    await vi.advanceTimersByTimeAsync(0);
    stop();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(fetchJob).toHaveBeenCalledTimes(1);
  });
});
