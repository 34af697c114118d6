// Follow one export job to its end: live over the websocket ws/export-jobs/<id>/, falling back to
// polling the REST endpoint when the socket cannot open or drops (e.g. a WSGI-only server).

import { api } from "./api";
import type { ExportJob, ExportProgressEvent, JobStatus } from "./types";

export type JobView = Pick<
  ExportJob,
  "id" | "status" | "progress" | "done_trajectories" | "total_trajectories" | "error"
> & { download_url?: string | null };

export interface SocketLike {
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: (() => void) | null;
  close(): void;
}

export interface WatchDeps {
  openSocket: (url: string) => SocketLike;
  fetchJob: (id: number) => Promise<ExportJob>;
  pollMs: number;
  location: Pick<Location, "protocol" | "host">;
}

const TERMINAL: ReadonlySet<JobStatus> = new Set(["succeeded", "failed", "cancelled"]);

export function isTerminal(status: JobStatus): boolean {
  return TERMINAL.has(status);
}

/** ws:// or wss:// URL of a websocket path on the page's own host. */
export function wsUrl(path: string, location: Pick<Location, "protocol" | "host">): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}${path}`;
}

export function parseProgress(data: unknown): ExportProgressEvent | null {
  if (typeof data !== "string") return null;
  try {
    const event = JSON.parse(data) as Partial<ExportProgressEvent>;
    return event.type === "export.progress" && typeof event.job_id === "number"
      ? (event as ExportProgressEvent)
      : null;
  } catch {
    return null;
  }
}

function browserSocket(url: string): SocketLike {
  const ws = new WebSocket(url);
  const socket: SocketLike = { onmessage: null, onclose: null, close: () => { ws.close(); } };
  ws.onmessage = (event: MessageEvent) => socket.onmessage?.({ data: event.data });
  ws.onclose = () => socket.onclose?.();
  return socket;
}

function defaultDeps(): WatchDeps {
  return {
    openSocket: browserSocket,
    fetchJob: (id) => api<ExportJob>(`/api/export-jobs/${id}/`),
    pollMs: 1500,
    location: window.location,
  };
}

/**
 * Calls `onUpdate` with every new state of job `jobId` until it is terminal; the last call carries
 * the REST view of the job (with `download_url`). `onError` gets polling failures. Returns `stop`.
 */
export function watchExportJob(
  jobId: number,
  onUpdate: (job: JobView) => void,
  onError: (message: string) => void = () => undefined,
  deps: WatchDeps = defaultDeps(),
): () => void {
  let halted = false;
  // A function, not the flag: it changes while a fetch is awaited, which narrowing can't see.
  const stopped = (): boolean => halted;
  let socket: SocketLike | null = null;
  let timer: ReturnType<typeof setTimeout> | null = null;

  const stop = (): void => {
    halted = true;
    if (timer !== null) clearTimeout(timer);
    if (socket !== null) {
      socket.onclose = null;
      socket.close();
    }
  };

  const poll = async (): Promise<void> => {
    if (stopped()) return;
    try {
      const job = await deps.fetchJob(jobId);
      if (stopped()) return;
      onUpdate(job);
      if (isTerminal(job.status)) {
        stop();
        return;
      }
    } catch (error) {
      onError(error instanceof Error ? error.message : String(error));
    }
    if (!stopped()) timer = setTimeout(() => void poll(), deps.pollMs);
  };

  const finish = async (): Promise<void> => {
    // The event has no download link; the REST view of the finished job does.
    try {
      const job = await deps.fetchJob(jobId);
      if (!stopped()) onUpdate(job);
    } catch (error) {
      onError(error instanceof Error ? error.message : String(error));
    }
    stop();
  };

  try {
    socket = deps.openSocket(wsUrl(`/ws/export-jobs/${jobId}/`, deps.location));
  } catch {
    socket = null;
  }
  if (socket === null) {
    void poll();
    return stop;
  }
  socket.onmessage = (message) => {
    const event = parseProgress(message.data);
    if (stopped() || event === null || event.job_id !== jobId) return;
    onUpdate({
      id: event.job_id,
      status: event.status,
      progress: event.progress,
      done_trajectories: event.done_trajectories,
      total_trajectories: event.total_trajectories,
      error: event.error,
    });
    if (isTerminal(event.status)) {
      if (socket !== null) socket.onclose = null;
      void finish();
    }
  };
  socket.onclose = () => {
    socket = null;
    void poll();
  };
  return stop;
}
