"""The benchmarks of SPEC §10, outside the product: one module per benchmark (its driver; its settings
in `harness.config` / `harness.platform_config`), the shared harness in `harness`, and the
`manage.py bench NAME [--quick]` command. Product packages import nothing from here."""
