"""Plan reads as a batch: the requests a plan sends, counted at the emulator (its stats), must not grow with the
stack. List calls (computes, environments, sizes, usages) are the same for a stack of 2 resources as for one of
40; single reads are the workspace and, for each of the stack's environments that is live, its version (a
version's tags are in no list: Azure lists versions per environment only). No compute is read on its own."""

from __future__ import annotations

import json
import threading
import time

import pytest

from emulator_fixtures import TEST_LOCATION, TEST_RESOURCE_GROUP, TEST_SUBSCRIPTION, TEST_WORKSPACE, WORKSPACE_YAML
from infra_cli.commands.backend import build_clients
from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.engine import plan_stack
from infra_cli.stack.load import load_stack

_WORKSPACE = (f"/subscriptions/{TEST_SUBSCRIPTION}/resourceGroups/{TEST_RESOURCE_GROUP}/providers/"
              f"Microsoft.MachineLearningServices/workspaces/{TEST_WORKSPACE}")
_LISTS = ("computes", "environments", "versions", "skus", "usages")


def _put(emulator, path: str, body: dict, api: str = "2023-04-01-preview") -> None:
    response = emulator.handle("PUT", f"{_WORKSPACE}/{path}?api-version={api}",
                               {"Authorization": f"Bearer {emulator.token}", "Content-Type": "application/json"},
                               json.dumps(body).encode())
    assert response.status in (200, 201, 202), response.body


def _put_version(emulator, name: str, version: str, tags: dict | None = None, archived: bool = False) -> None:
    _put(emulator, f"environments/{name}/versions/{version}",
         {"properties": {"image": f"mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:{name}", "tags": tags or {},
                         "isArchived": archived}})


def _stack(tmp_path, clusters: int, environments: int):
    text = ["stack: batch\n", WORKSPACE_YAML, "clusters:\n"]
    text += [f"  cpu{i:03d}: {{size: Standard_D4s_v3, max_instances: 1}}\n" for i in range(clusters)]
    text += ["environments:\n"] + [f"  env{i:03d}: {{image: 'mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:{i}'}}\n"
                                   for i in range(environments)]
    path = tmp_path / f"stack{clusters}-{environments}.yaml"
    path.write_text("".join(text))
    return load_stack(path)


def _counted_plan(emulator, loaded) -> tuple[int, int]:
    """(list calls, single reads) of one plan, as the emulator counted them."""
    provider = AzureProvider(build_clients(loaded.stack.workspace, local=True, emulator=emulator))
    emulator.stats.reset()
    plan_stack(loaded, provider)
    records = emulator.stats.records
    assert all(r.method == "GET" for r in records), [r for r in records if r.method != "GET"]
    assert not [r for r in records if "/computes/" in r.path], "a compute was read on its own"
    lists = sum(r.path.rstrip("/").rsplit("/", 1)[-1].lower() in _LISTS for r in records)
    return lists, len(records) - lists


def test_plan_requests_do_not_grow_with_the_stack(tmp_path, emulator):
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    small, large = _stack(tmp_path, 1, 1), _stack(tmp_path, 20, 20)
    before = [_counted_plan(emulator, s) for s in (small, large)]
    assert before[0] == before[1], f"nothing live: requests grew from {before[0]} to {before[1]} (lists, singles)"
    for i in range(20):   # everything live: the clusters as computes, each environment with two versions
        _put(emulator, f"computes/cpu{i:03d}", {"location": TEST_LOCATION, "properties": {
            "computeType": "AmlCompute", "properties": {"vmSize": "Standard_D4s_v3",
                                                        "scaleSettings": {"maxNodeCount": 1, "minNodeCount": 0}}}},
             api="2023-08-01-preview")
        _put_version(emulator, f"env{i:03d}", "1")
        _put_version(emulator, f"env{i:03d}", "2")
    (small_lists, small_singles), (large_lists, large_singles) = (_counted_plan(emulator, s) for s in (small, large))
    assert small_lists == large_lists == before[0][0], "list calls grew with the stack"
    # one version read per live environment of the stack (1 and 20), nothing else that grows
    assert large_singles - small_singles == 20 - 1, (small_singles, large_singles)


@pytest.mark.parametrize("versions, pinned", [
    ([("1", False), ("2", False)], None),        # the latest
    ([("1", False), ("2", False)], "1"),         # a pin below the latest
    ([("1", False)], "7"),                       # a pin that does not exist
    ([("1", False), ("2", True)], None),         # the latest archived: the active one before it
    ([("1", True), ("2", True)], None),          # every version archived: none live, the next passes them
])
def test_listed_read_equals_the_per_environment_read(emulator, clients, versions, pinned):
    """What read_environments answers from the container list and one GET is what read_environment's own
    reads answer, in every case of latest, pin and archive."""
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    for version, archived in versions:
        _put_version(emulator, "e1", version, {"owner": f"v{version}"}, archived)
    provider = AzureProvider(clients)
    assert provider.read_environments({"e1": pinned, "absent": None}) == {
        "e1": provider.read_environment("e1", pinned), "absent": None}


def test_the_container_list_is_read_past_its_first_page(emulator, clients):
    """Azure pages a list with nextLink: an environment on the third page is read as one on the first."""
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    emulator.backend.page_size = 2
    for i in range(5):
        _put_version(emulator, f"e{i}", "1", {"n": str(i)})
    emulator.stats.reset()
    found = AzureProvider(clients).read_environments({f"e{i}": None for i in range(5)})
    assert {n: (v["version"], v["tags"], v["next_version"]) for n, v in found.items()} == {
        f"e{i}": ("1", {"n": str(i)}, "2") for i in range(5)}
    assert len([r for r in emulator.stats.records if r.path.endswith("/environments")]) == 3   # pages: 2, 2, 1


class _Overlap(AzureProvider):
    """The real provider, counting how many of plan's live reads run at once (each held a moment, so reads the
    pool lets run together do overlap)."""

    def __init__(self, clients):
        super().__init__(clients)
        self.lock, self.now, self.most = threading.Lock(), 0, 0

    def _held(self, read, *args):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(0.1)
            return read(*args)
        finally:
            with self.lock:
                self.now -= 1

    def list_computes(self, *a):
        return self._held(super().list_computes, *a)

    def read_environments(self, *a):
        return self._held(super().read_environments, *a)

    def resolve_environments(self, *a):
        return self._held(super().resolve_environments, *a)


@pytest.mark.parametrize("parallelism, overlap", [(1, False), (8, True)])
def test_plan_parallelism_bounds_its_live_reads(tmp_path, emulator, parallelism, overlap):
    # `infra plan -parallelism=N`: at most N of plan's reads at once
    emulator.ensure_workspace(TEST_SUBSCRIPTION, TEST_RESOURCE_GROUP, TEST_WORKSPACE, TEST_LOCATION)
    loaded = _stack(tmp_path, 1, 1)
    provider = _Overlap(build_clients(loaded.stack.workspace, local=True, emulator=emulator))
    plan_stack(loaded, provider, parallelism=parallelism)
    assert (provider.most > 1) is overlap, provider.most
