"""The review workflow (issue 5 item 7): queue, independent reviews, agreement, executability
replay, duplicate detection."""
