// Shapes of the review API (annotation/api/review_views.py, annotation/review/selectors.py).

import type { ActionJson, ScreenStep, TaskBrief } from "../lib/trajectory";

export type { ActionJson } from "../lib/trajectory";

export type Verdict = "approve" | "fix" | "reject";
export const VERDICTS: readonly Verdict[] = ["approve", "fix", "reject"];

export interface QueueRow {
  id: number;
  task: string;
  instruction: string;
  pool: string;
  env_kind: string;
  source: string;
  num_steps: number;
  final_reward: number | null;
  review_state: string;
  reviews: number;
  created_at: string;
}

export interface MyReviewRow {
  review_id: number;
  trajectory_id: number;
  task: string;
  verdict: string;
  submitted: boolean;
  completed_at: string | null;
  review_state: string;
}

export interface Queue {
  reviews_required: number;
  count: number;
  queue: QueueRow[];
  mine: MyReviewRow[];
}

export interface StepVerdict {
  index: number;
  verdict: Verdict;
  comment: string;
  /** With "fix": the reviewer's corrected action (screen pixels); `action` is it parsed. */
  action_text?: string;
  action?: ActionJson[];
}

export interface ReviewJson {
  id: number;
  reviewer: string;
  verdict: string;
  comment: string;
  step_verdicts: StepVerdict[];
  created_at: string;
  completed_at: string | null;
}

export interface CandidateJson {
  index?: number;
  thought?: string;
  action_text?: string;
}

export interface ReviewStep extends ScreenStep {
  parse_error: string;
  decision_meta: Record<string, unknown>;
  candidates: CandidateJson[];
  reward: number;
  done: boolean;
  human_thought: string;
}

export interface Executability {
  status: "queued" | "running" | "done" | "failed";
  replayed_steps?: number;
  total_steps?: number;
  reward?: number | null;
  ok?: boolean;
  error?: string;
  seed?: number | null;
  seed_recorded?: boolean;
  note?: string;
  at: string;
}

export interface Duplicate {
  trajectory_id: number;
  score: number;
  source: string;
  annotator: string;
  review_state: string;
}

export interface Outcome {
  outcome: string;
  verdicts: string[];
  step_agreement: number;
  disagreeing_steps: number[];
  flagged_steps: number[];
}

export interface ReviewData {
  trajectory: {
    id: number;
    source: string;
    status: string;
    review_state: string;
    final_reward: number | null;
    validation: number | null;
    validator: string;
    num_steps: number;
    annotator: string;
    seed: number | null;
    /** The episode's own instruction, when the environment gave one. */
    instruction?: string;
    review_round?: number;
  };
  task: TaskBrief & { instruction: string };
  steps: ReviewStep[];
  reviews_required: number;
  reviews_done: number;
  my_review: ReviewJson | null;
  other_reviews: ReviewJson[];
  others_hidden: boolean;
  outcome: Outcome | null;
  executability: Executability | null;
  duplicates: Duplicate[];
}
