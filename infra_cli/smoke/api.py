"""What another engine may use of smoke/: the smoke (and training) job files `infra render` writes.

Everything else in smoke/ is smoke's own business (tests/test_import_graph.py).
"""

from infra_cli.smoke.job_templates import distribution_job_files

__all__ = ["distribution_job_files"]
