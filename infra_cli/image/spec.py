"""Requirement specs (`openmpi>=4.1`, `nccl>=2.18`): parsed in infra_cli/knowledge/requirements.py, where
validate reads stacks' `requires:` too (a lower floor than image/)."""

from infra_cli.knowledge.requirements import Requirement, SpecError, parse_requirement, parse_version, version_satisfies

__all__ = ["Requirement", "SpecError", "parse_requirement", "parse_version", "version_satisfies"]
