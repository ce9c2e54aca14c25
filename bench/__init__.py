"""Benchmarks, run as scripts (`python bench/<name>.py`); a package so tests can share bench/synthetic.py."""
