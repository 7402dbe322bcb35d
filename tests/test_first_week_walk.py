"""What the issue 43 walk (a fresh clone, the README alone, a two-workspace stack with a sensitive variable, the
pre-commit hooks and the Action's scripts) met after the first fixes: each wrong turn that remained, held here."""

from __future__ import annotations

from pathlib import Path

from infra_cli.validate.engine import validate_files

MISSPELT = """\
stack: dn
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  a100: {size: SIZE, max_instances: 2, infiniband: required}
environments:
  acpt: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
distributions:
  ddp: {cluster: a100, environment: acpt, type: pytorch, instance_count: 2, process_count_per_instance: 8}
"""


def test_a_misspelt_size_is_one_error_with_no_warnings_judging_the_misspelling(tmp_path: Path):
    # `Standard_DN96asr_v4` (two letters swapped) reads as an RDMA size by its name: beside "did you mean
    # 'Standard_ND96asr_v4'?" it got two warnings that its InfiniBand was unconfirmed, judging the typo as a size
    for size in ("Standard_DN96asr_v4", "ND96asr_v4", "Standard_ND96asrv4"):
        stack = tmp_path / "s.yaml"
        stack.write_text(MISSPELT.replace("SIZE", size))
        found = validate_files([stack])
        assert [(d.severity, d.rule) for d in found] == [("error", "cluster.size-unknown")], \
            (size, [d.format() for d in found])
        assert "did you mean 'Standard_ND96asr_v4'?" in found[0].message
    # a size the catalog does not have and that is no misspelling is still judged by its name
    stack.write_text(MISSPELT.replace("SIZE", "Standard_ND96zzr_v9"))
    assert {d.rule for d in validate_files([stack])} >= {"cluster.infiniband-unverified",
                                                         "distribution.infiniband-unverified"}
