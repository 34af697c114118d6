"""Browser sandboxes: a pooled Chromium (`pool`), MiniWoB++ (`miniwob`), shared page-env machinery."""
