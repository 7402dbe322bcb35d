"""Smoke-test jobs: rendered from templates/, submitted, waited on, judged."""
