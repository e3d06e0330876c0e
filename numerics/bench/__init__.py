"""Benchmarks: measure and return records (the pages are rendered in app.render)."""
