"""knowledge/: one typed loader per validators/*.yaml, one cached reader, one diagnostic for a broken file.

Each file is broken the way a hand edit breaks it (through a real copy of validators/ that
INFRA_VALIDATORS_DIR points at); the loader must answer `knowledge.invalid` with the file, the line of the
fault and a hint, never a traceback. update_semantics.yaml must classify every attribute the plan compares.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from infra_cli.diagnostics import DiagnosticError
from infra_cli.knowledge import (base_images, curated, failure_signatures, frameworks, image_evidence, launchers, names,
                                 nccl_transport, skus, update_semantics)
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.kinds.cluster import cluster_attributes, cluster_resource
from infra_cli.stack.load import load_stack

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def validators(tmp_path, monkeypatch) -> Path:
    """A user's copy of validators/, in use for this test."""
    target = tmp_path / "validators"
    shutil.copytree(ROOT / "validators", target)
    monkeypatch.setenv("INFRA_VALIDATORS_DIR", str(target))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return target


def _edit(directory: Path, name: str, change) -> None:
    path = directory / name
    data = yaml.load(path.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=1000), encoding="utf-8")


def _set(*keys_and_value):
    *keys, value = keys_and_value

    def change(data):
        for k in keys[:-1]:
            data = data[k]
        data[keys[-1]] = value
    return change


def _delete(*keys):
    def change(data):
        for k in keys[:-1]:
            data = data[k]
        del data[keys[-1]]
    return change


# (file, how it is broken, the loader, what the message must name, the text at the reported line)
BROKEN = [
    ("skus.yaml", _set("sizes", "Standard_NC6", "gpus", "three"), skus.load_catalog,
     "sizes.Standard_NC6", "Standard_NC6"),
    ("skus.yaml", _set("sizes", "Standard_NC6", "nccl_env", "nope"), skus.load_catalog, "unknown nccl_env", "nccl_env"),
    ("skus.yaml", _set("prices", "sizes", "Standard_ND96asr_v4", "regions", "eastus", "dedicated", -3),
     skus.load_catalog, "prices.sizes.Standard_ND96asr_v4.regions.eastus.dedicated", "dedicated"),
    ("skus.yaml", _set("prices", "sizes", "Standard_Nope_v9", {"as_of": "2025-01-01", "source": "s", "regions": {}}),
     skus.load_catalog, "not a size of `sizes:`", "Standard_Nope_v9"),
    ("update_semantics.yaml", _set("cluster", "in_place", ["tier", "max_instances"]),
     lambda: update_semantics.semantics("cluster"), "both in_place and under force_replacement", "in_place"),
    ("update_semantics.yaml", _delete("transient_errors", "max_attempts"), update_semantics.transient_errors,
     "missing key 'max_attempts'", "transient_errors"),
    ("frameworks.yaml", _delete("frameworks", "deepspeed", "source"), frameworks.frameworks,
     "frameworks.deepspeed: missing key 'source'", "deepspeed"),
    # module names reach the smoke job's command (its preflight's arguments): a dotted identifier or nothing
    ("frameworks.yaml", _set("frameworks", "deepspeed", "imports", ["deepspeed; touch /tmp/x"]), frameworks.frameworks,
     "frameworks.deepspeed.imports: 'deepspeed; touch /tmp/x' is not a module name", "imports"),
    ("frameworks.yaml", _set("smoke_scripts", "ddp_smoke.py", ["torch", "$(id)"]),
     lambda: frameworks.smoke_script_imports("ddp_smoke.py"), "smoke_scripts.ddp_smoke.py: '$(id)' is not a module",
     "ddp_smoke.py"),
    # a variable's severity becomes a diagnostic's: error or warning, nothing else
    ("frameworks.yaml", _set("distribution_types", "mpi", "launcher_sets", {"eror": ["OMPI_COMM_WORLD_RANK"]}),
     frameworks.launcher_variables, "launcher_sets: a severity is error or warning, not 'eror'", "launcher_sets"),
    ("launchers.yaml", _set("launchers", "torchrun", "kind", "sideways"), launchers.launchers,
     "launchers.torchrun", "kind"),
    ("curated_environments.yaml", _set("curated", 0, "pattern", "(unclosed"), lambda: curated.curated_info("x"),
     "curated[0]: bad regular expression", "pattern"),
    ("names.yaml", _delete("tags", "max_tags"), names.tag_limits, "missing key 'max_tags'", "tags"),
    ("image_evidence.yaml", _set("profiles", "openmpi", "variants", 0, "all", [{"file": ["relative/libmpi.so"]}]),
     image_evidence.profiles, "profiles.openmpi.variants[0].all[0]", "file"),
    # a profile's fix: (image/fix.py): a template that exists and provides it, a known family, public sources
    ("image_evidence.yaml", _set("profiles", "openmpi", "fix", "template", {"name": "nope"}), image_evidence.profiles,
     "profiles.openmpi.fix.template.name: no Dockerfile template 'nope'", "nope"),
    ("image_evidence.yaml", _set("profiles", "nccl", "fix", "template", {"name": "openmpi-rdma"}),
     image_evidence.profiles, "template openmpi-rdma does not provide nccl", "openmpi-rdma"),
    ("image_evidence.yaml", _set("profiles", "ucx", "fix", "install", "alpine",
                                 {"run": "apk add ucx", "source": "https://x"}),
     image_evidence.profiles, "unknown distribution family 'alpine'", "alpine"),
    ("image_evidence.yaml", _set("profiles", "ucx", "fix", "install", "debian", "source", "facts/images-and-nccl.md"),
     image_evidence.profiles, "must be a public https:// URL", "facts/images-and-nccl.md"),
    ("image_evidence.yaml", _set("profiles", "nccl", "fix", "base_images", 0, "image", "not an image!"),
     image_evidence.profiles, "profiles.nccl.fix.base_images[0].image", "not an image!"),
    ("nccl_transport.yaml", _set("patterns", "channel_net", "via NET/IB"), nccl_transport.transport_rules,
     "named group(s) net, gdrdma", "channel_net"),
    ("failure_signatures.yaml", _set("signatures", 0, "cause", "interface {7} is missing"),
     failure_signatures.signatures, "signatures[0].cause", "cause"),
    ("nccl_transport.yaml", _set("transport_rules", 5, "none", ["comm_nope"]), nccl_transport.transport_rules,
     "transport_rules[5]: any/all must name patterns, none may", "single-rank"),
    ("failure_signatures.yaml", _set("signatures", 3, "multi_node_only", "yes"), failure_signatures.signatures,
     "signatures[3].multi_node_only: must be true or false", "multi_node_only"),
    ("base_images.yaml", _set("pip_packages", "mpi4py", "needs_to_build", ["compiler", "mpi-header"]),
     base_images.build_knowledge, "undeclared capability mpi-header", "needs_to_build"),
    ("base_images.yaml", _set("bases", 1, "pattern", "(unclosed"), base_images.build_knowledge,
     "bases[1].pattern: bad regular expression", "pattern"),
    ("base_images.yaml", _set("pip_packages", "mpi4py", "wheels_since", "soon"), base_images.build_knowledge,
     "pip_packages.mpi4py.wheels_since", "wheels_since"),
]


@pytest.mark.parametrize("name, change, loader, named, at_line", BROKEN, ids=[f"{b[0]}:{b[3][:30]}" for b in BROKEN])
def test_a_broken_file_is_one_diagnostic_with_its_line(validators, name, change, loader, named, at_line):
    _edit(validators, name, change)
    with pytest.raises(DiagnosticError) as exc:
        loader()
    [d] = exc.value.diagnostics
    assert (d.rule, d.severity, d.file) == ("knowledge.invalid", "error", str(validators / name))
    assert named in d.message and d.message.startswith(name), d.message
    assert d.line is not None, d.message
    assert at_line in (validators / name).read_text(encoding="utf-8").splitlines()[d.line - 1], (d.line, d.message)
    assert "INFRA_VALIDATORS_DIR" in d.hint and name in d.hint


def test_a_name_rule_whose_section_is_not_in_a_stack_is_a_diagnostic_not_a_crash(validators, tmp_path):
    """A user's names.yaml row pointing at a place stacks do not have (a typo in `section`) was an
    AttributeError in the middle of validate."""
    from infra_cli.validate.engine import validate_stack

    _edit(validators, "names.yaml", _set("names", "environment_variable", "section", "distributions.*.env"))
    stack = tmp_path / "s.yaml"
    stack.write_text("stack: s\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, "
                     "resource_group: rg, name: mlw, location: eastus}\n"
                     "distributions: {d: {cluster: c, environment: e, type: pytorch}}\n", encoding="utf-8")
    with pytest.raises(DiagnosticError) as exc:
        validate_stack(load_stack(stack))
    [d] = exc.value.diagnostics
    assert (d.rule, d.file) == ("knowledge.invalid", str(validators / "names.yaml"))
    assert "'distributions.*.env'" in d.message and "INFRA_VALIDATORS_DIR" in d.hint


def test_a_file_that_is_not_yaml_names_its_line(validators):
    (validators / "launchers.yaml").write_text("launchers:\n  torchrun: {kind: per-node\n", encoding="utf-8")
    with pytest.raises(DiagnosticError) as exc:
        launchers.launchers()
    [d] = exc.value.diagnostics
    assert d.rule == "knowledge.invalid" and "not valid YAML" in d.message and d.line == 3


def test_a_missing_file_is_a_diagnostic(validators):
    (validators / "names.yaml").unlink()
    with pytest.raises(DiagnosticError) as exc:
        names.name_rules()
    assert exc.value.diagnostics[0].rule == "knowledge.invalid" and "cannot read names.yaml" in str(exc.value)


def test_the_reader_follows_the_file_and_the_directory(validators, monkeypatch):
    assert "deepspeed" in frameworks.frameworks()
    _edit(validators, "frameworks.yaml", _delete("frameworks", "deepspeed"))
    assert "deepspeed" not in frameworks.frameworks()  # a new version of the file is read again
    monkeypatch.delenv("INFRA_VALIDATORS_DIR")
    assert "deepspeed" in frameworks.frameworks()  # the packaged one, as the variable says


STACK = """\
stack: t
workspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, name: mlw, location: eastus}
clusters:
  gpu:
    size: Standard_ND96asr_v4
    tier: low_priority
    max_instances: 2
    description: d
    network_settings: {vnet_name: v, subnet: s}
    identity: {type: user_assigned, user_assigned_identities: [{resource_id: /subscriptions/x/id}]}
    ssh_public_access_enabled: true
    ssh_settings: {admin_username: azureuser, ssh_key_value: ssh-rsa AAAA}
    tags: {team: a}
"""


def test_every_cluster_attribute_the_plan_compares_is_classified(tmp_path):
    path = tmp_path / "stack.yaml"
    path.write_text(STACK, encoding="utf-8")
    loaded = load_stack(path)
    desired = cluster_attributes(loaded.stack, "gpu", loaded.stack.clusters["gpu"])
    live = cluster_resource({"name": "gpu", "size": "Standard_ND96asr_v4"}).attributes
    rules = update_semantics.semantics("cluster")
    # provisioning_* are live state, judged by cluster_provisioning (a failed cluster is tainted), not fields
    compared = set(desired) | {k for k in live if not k.startswith("provisioning_")}
    unclassified = sorted(k for k in compared if not rules.classified(k))
    assert not unclassified, f"classify {unclassified} in validators/update_semantics.yaml (in_place or force_replacement)"


def test_an_unclassified_attribute_forces_a_replacement(validators, tmp_path):
    from infra_cli.plan.diff import LiveState, diff

    rules = update_semantics.semantics("cluster")
    assert "max_instances" not in rules.force_replacement and "size" in rules.force_replacement
    _edit(validators, "update_semantics.yaml", _delete("cluster", "force_replacement", "tier"))
    rules = update_semantics.semantics("cluster")
    assert "tier" in rules.force_replacement and not rules.classified("tier")
    assert "not classified" in rules.force_replacement["tier"]
    assert "tier" not in list(rules.force_replacement)  # iteration lists only the file's own rows

    path = tmp_path / "stack.yaml"
    path.write_text(STACK, encoding="utf-8")
    before = desired_resources(load_stack(path))
    live = LiveState()
    for r in before:
        if r.type == "cluster":
            live.of("cluster")[r.name] = r
    path.write_text(STACK.replace("tier: low_priority", "tier: dedicated"), encoding="utf-8")
    loaded = load_stack(path)
    result = diff(desired_resources(loaded), live, stack="t", source=loaded.source, mode="normal")
    [change] = [c for c in result.changes if c.address == "cluster.gpu"]
    assert change.actions == ["delete", "create"] and change.replace_paths == [["tier"]]


def test_prices_are_typed_and_unknown_is_none():
    catalog = skus.load_catalog()
    price = catalog.price("standard_nd96asr_v4", "East US")
    assert price.dedicated > price.low_priority > 0 and isinstance(price.as_of, datetime.date)
    assert price.source.startswith("https://prices.azure.com/api/retail/prices")
    assert catalog.price("Standard_ND96asr_v4", "japaneast") is None  # never a guess from another region
    assert catalog.price("Standard_ND96isr_H200_v5", "eastus") is None
    assert catalog.price("Standard_ND96asr_v4", None) is None
    # the sizes the design names have prices in the regions that sell them
    for size in ("Standard_ND96asr_v4", "Standard_ND96amsr_A100_v4", "Standard_ND96isr_H100_v5", "Standard_NC24s_v3"):
        for region in ("eastus", "southcentralus"):
            assert catalog.price(size, region).dedicated > 0, (size, region)


def test_prices_read_the_same_from_the_parsed_cache(tmp_path):
    """The second process reads skus.yaml from the JSON cache, where days are strings."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    code = ("from infra_cli.knowledge.skus import load_catalog\np = load_catalog().price('Standard_ND96asr_v4', "
            "'eastus')\nprint(p.as_of.isoformat(), p.dedicated)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env,
                           check=True).stdout for _ in range(2)]
    assert list((tmp_path / "cache" / "infra").glob("skus-*.json"))
    assert runs[0] == runs[1] and runs[0].startswith("20")


def test_the_parsed_cache_is_written_through_no_planted_link(tmp_path):
    """The cache's temporary file has a random name, made O_EXCL|O_NOFOLLOW: a link planted at the name a
    predictable scheme (NAME.PID.tmp) would use, or at the cache file itself, is never written through."""
    from infra_cli.knowledge.reader import _write_cache

    victim = tmp_path / "victim"
    victim.write_text("mine\n")
    cache = tmp_path / "cache" / "infra" / "skus-0123-4567.json"
    cache.parent.mkdir(parents=True)
    cache.with_name(f"{cache.name}.{os.getpid()}.tmp").symlink_to(victim)
    cache.symlink_to(victim)
    _write_cache(cache, {"rows": [1]})
    assert victim.read_text() == "mine\n"
    assert not cache.is_symlink() and json.loads(cache.read_text()) == {"rows": [1]}


def test_knowledge_imports_no_azure_torch_or_jinja():
    code = ("import sys\nfrom infra_cli.knowledge import curated, failure_signatures, frameworks, image_evidence, "
            "launchers, names, nccl_transport, skus, update_semantics\n"
            "skus.load_catalog(); update_semantics.semantics('cluster'); frameworks.frameworks(); launchers.launchers()\n"
            "curated.curated_registries(); names.name_rules(); image_evidence.profiles(); nccl_transport.transport_rules()\n"
            "failure_signatures.signatures()\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'azure', 'torch', 'jinja2', 'infra_cli'}))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert json.loads(r.stdout.replace("'", '"')) == ["infra_cli"]


def test_validate_with_a_broken_file_says_where_without_a_traceback(validators):
    _edit(validators, "frameworks.yaml", _delete("frameworks", "ddp", "types"))
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", "stacks/ib-a100.yaml"], capture_output=True,
                       text=True, cwd=ROOT, env=dict(os.environ))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{validators / 'frameworks.yaml'}:" in r.stderr and "knowledge.invalid" in r.stderr
    assert "frameworks.ddp: missing key 'types'" in r.stderr
