// Review: the reviewer's queue, and one trajectory under review (frontend/src/review/).
import { mountReview } from "../review";

mountReview();
