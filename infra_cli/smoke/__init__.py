"""Smoke-test jobs: filled from templates/, submitted, waited on, judged, recorded."""
