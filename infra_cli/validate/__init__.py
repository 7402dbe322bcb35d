"""Offline rules (validate) and live checks (preflight), reported as diagnostics."""
