"""Ordered, concurrent, retried execution of a plan; the stack lock."""
