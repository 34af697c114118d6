"""What every benchmark shares (SPEC §10) that needs Django or the OS: its own database and the
processes it owns. The figures' statistics and the typed configurations are `workers.benchkit`."""
