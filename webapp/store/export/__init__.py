"""Trajectory export: streamed JSONL (constant memory) and archive formats for export jobs."""
