"""The benchmark's parts; ``benchmark_performance.py`` is their command line."""
