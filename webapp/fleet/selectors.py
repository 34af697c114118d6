"""fleet selectors: the fleet panel (issue 8) reads and publishes through here."""
