"""What every benchmark shares (SPEC §10): its own database, the processes it owns, the figures'
statistics (seed ranges, Wilson intervals) and its typed configuration (`benchkit.config`)."""
