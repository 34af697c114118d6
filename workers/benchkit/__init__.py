"""The benchmarks' pure parts (no Django): seed ranges, Wilson / bootstrap intervals (`stats`) and the
typed bench configurations (`config`). What needs Django or owns processes is `webapp.benchkit`."""
