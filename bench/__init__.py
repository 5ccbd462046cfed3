"""Benchmarks and the scripts that build the write guard corpus and model (run from the checkout)."""
