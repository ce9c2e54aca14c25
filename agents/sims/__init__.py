"""Simulations that score the runtimes through a real server: sequential and concurrent runs, teams, workers."""
