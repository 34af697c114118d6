// Shapes shared by the pages that show trajectories — the workspace, the fix view, review and replay
// (annotation/selectors.py, annotation/review/selectors.py, docs/annotation.md "Numbering"). One
// module, so a field the API adds or renames changes in one place.

/** One action as the server stores it (workers/actions/types.py Action.to_json). */
export interface ActionJson {
  kind: string;
  point?: [number, number];
  end_point?: [number, number];
  text?: string;
  keys?: string[];
  direction?: string;
  name?: string;
  arguments?: Record<string, unknown>;
}

/** The task a session or trajectory belongs to, as the annotation and review APIs send it. */
export interface TaskBrief {
  id: number;
  external_id: string;
  env_kind: string;
  pool: string;
}

/** What every page knows of a stored step: its numbers (0-based index, 1-based as shown), what was
 *  thought and done, and how it was decided. */
export interface StepBase {
  index: number;
  /** 1-based, as shown; absent from older servers. */
  number?: number;
  thought: string;
  action_text: string;
  decision: string;
  decision_index: number | null;
  decision_number?: number | null;
  screenshot_url: string;
}

/** A step drawn over its screenshot: its actions in the screen's own pixels and the screen's size. */
export interface ScreenStep extends StepBase {
  screen_actions: ActionJson[];
  screen_width: number | null;
  screen_height: number | null;
}
