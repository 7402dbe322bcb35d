"""Environment versions get / list / createOrUpdate: Azure's recorded examples (2024-10-01) replayed through
infra's real SDK clients, and what infra makes of them.

These examples are generated ones: every text is the placeholder "string". Three placeholders stand where a
real answer has something else, and the replay swaps them (each test says which): the ARM `id` (the SDK
reads name and version out of it; the replay builds it from the request it answers), and `condaFile`
(a conda YAML document in a real answer; azure-ai-ml reads the text "string" as a file path).
"""

from __future__ import annotations

import pytest
import yaml

from contract_support import (ARM, azure_clients, body_of, load_stack_text, ml_example, query_of, replay,
                              response_body, sent, workspace_url)
from spec_schema import ASSETS_SPEC, problems

from infra_cli.azure.provider import AzureProvider
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.diff import diff
from infra_cli.plan.kinds.environment import live_environment
from infra_cli.plan.live import LiveState, refresh
from infra_cli.conventions import TAG_ADDRESS, TAG_HASH, TAG_STACK
from infra_cli.plan.model import CREATE, NO_OP

GET = ml_example("EnvironmentVersion/get.json")
LIST = ml_example("EnvironmentVersion/list.json")
CREATE_OR_UPDATE = ml_example("EnvironmentVersion/createOrUpdate.json")
CONTAINERS = ml_example("EnvironmentContainer/list.json")
PARAMS = GET["parameters"]
W = workspace_url(PARAMS)
NAME = PARAMS["name"]                      # "string"
VERSIONS = f"{W}/environments/{NAME}/versions"
CONDA = "name: serving\ndependencies:\n- python=3.10\n"   # stands for the placeholder condaFile "string"
STACK = f"""
stack: contract
workspace: {{subscription_id: {PARAMS['subscriptionId']}, resource_group: {PARAMS['resourceGroupName']},
             name: {PARAMS['workspaceName']}, location: eastus}}
environments:
  {NAME}:
    image: docker.io/tensorflow/serving:latest
    conda_file: conda.yaml
    description: string
    tags: {{string: string}}
"""


@pytest.fixture
def clients(monkeypatch):
    return azure_clients(monkeypatch, PARAMS, "eastus")


def version_body(recorded_body: dict, version: str, tags: dict | None = None) -> dict:
    """A recorded EnvironmentVersionResource with its placeholders swapped: the ARM id of `version` (an ARM
    id is a path, without the host) and a conda YAML document; tags as given (default: as recorded)."""
    body = recorded_body
    body["id"] = f"{VERSIONS[len(ARM):]}/{version}"
    body["properties"]["condaFile"] = CONDA
    if tags is not None:
        body["properties"]["tags"] = tags
    assert problems(body, "EnvironmentVersionResource", request=False, spec=ASSETS_SPEC) == []
    return body


def latest_page(tags: dict | None = None) -> dict:
    """list.json, the answer to `$orderBy=createdtime desc&$top=1` (how azure-ai-ml asks for label latest)."""
    page = response_body(LIST)
    version_body(page["value"][0], page["value"][0]["name"], tags)
    return page


def containers_page(*names: str, next_link: str | None = None) -> dict:
    """EnvironmentContainer/list.json with its recorded container repeated under each name (name and id swapped,
    the rest as recorded) and its placeholder nextLink ("string") swapped for `next_link`."""
    page = response_body(CONTAINERS)
    recorded = page["value"][0]
    page["value"] = [dict(recorded, name=n, id=recorded["id"].rsplit("/", 1)[0] + "/" + n) for n in names]
    assert page["nextLink"] == "string"
    page["nextLink"] = next_link
    return page


def read(clients, pinned=None):
    """The environment NAME as plan reads it (its versions only: the container list is not asked for)."""
    values = AzureProvider(clients).read_environment(NAME, pinned)
    return None if values is None else live_environment(values)


def stack(tmp_path, text=STACK, conda=CONDA):
    (tmp_path / "conda.yaml").write_text(conda)
    loaded = load_stack_text(tmp_path, text)
    return loaded, desired_resources(loaded)


def test_latest_is_read_with_the_recorded_list_query(clients):
    """infra's refresh reads the latest version the way list.json records: $orderBy and $top=1, one page."""
    with replay() as mock:
        mock.get(VERSIONS, json=latest_page())
        env = read(clients)
    (request,) = sent(mock, "GET")
    query = query_of(request)
    assert query["$top"] == str(LIST["parameters"]["$top"]) and query["$orderBy"] == "createdtime desc"
    assert "$skipToken" not in query, "latest is the first item: the recorded nextLink is not followed"
    assert env.name == NAME and env.address == f"environment.{NAME}"
    assert env.attributes == {"version": "string", "next_version": None, "content_hash": None,
                              "tags": {"string": "string"}}
    assert env.tags == {}


def test_a_pinned_version_is_read_with_get(clients):
    """get.json answers the pinned version (its id swapped for the requested version's)."""
    with replay() as mock:
        mock.get(VERSIONS, json=latest_page())
        mock.get(f"{VERSIONS}/7", json=version_body(response_body(GET), "7"))
        env = read(clients, "7")
    assert [r.url.split("?")[0] for r in sent(mock, "GET")] == [VERSIONS, f"{VERSIONS}/7"]
    assert env.attributes["version"] == "7" and env.attributes["tags"] == {"string": "string"}


def test_a_pinned_version_not_there_yet_reads_as_absent(clients):
    not_found = {"error": {"code": "UserError", "message": "Environment string version 7 does not exist."}}
    with replay() as mock:
        mock.get(VERSIONS, json=latest_page())
        mock.get(f"{VERSIONS}/7", json=not_found, status=404)
        env = read(clients, "7")
    assert env.attributes["version"] is None and env.attributes["next_version"] is None


def test_an_environment_with_no_version_reads_as_absent(clients):
    with replay() as mock:
        mock.get(VERSIONS, json={"value": []})
        assert AzureProvider(clients).read_environment(NAME, None) is None


def test_the_recorded_version_is_not_adopted(tmp_path, clients):
    """The recorded version carries no ownership tag: plan refuses to touch it, and its hint is one that works
    (an import block or `infra import` adopts it)."""
    loaded, resources = stack(tmp_path)
    with replay() as mock:
        mock.get(f"{W}/environments", json=containers_page(NAME))
        mock.get(VERSIONS, json=latest_page())
        mock.get(f"{W}/computes", json={"value": []})  # the refresh lists the workspace's clusters too
        live = refresh(AzureProvider(clients), resources)
    result = diff(resources, live, stack="contract", source=loaded.source)
    assert [d.rule for d in result.diagnostics] == ["plan.unmanaged-resource"]
    assert result.diagnostics[0].hint.startswith(f"adopt it with an import block (`import: [{{to: environment.{NAME}, "
                                                 f"id: {NAME}}}]`) or `infra import environment.{NAME} {NAME} ")


def test_an_owned_version_with_the_same_content_is_no_change(tmp_path, clients):
    loaded, resources = stack(tmp_path)
    (env,) = resources
    ours = {"string": "string", TAG_STACK: "contract", TAG_ADDRESS: env.address, TAG_HASH: env.tags[TAG_HASH]}
    with replay() as mock:
        mock.get(f"{W}/environments", json=containers_page(NAME))
        mock.get(VERSIONS, json=latest_page(ours))
        mock.get(f"{W}/computes", json={"value": []})
        live = refresh(AzureProvider(clients), resources)
    (change,) = diff(resources, live, stack="contract", source=loaded.source).changes
    assert change.actions == NO_OP and change.after["version"] == "string"


def test_new_content_is_a_new_version_never_the_recorded_one(tmp_path, clients):
    loaded, resources = stack(tmp_path, conda=CONDA.replace("3.10", "3.11"))
    (env,) = resources
    ours = {TAG_STACK: "contract", TAG_ADDRESS: env.address, TAG_HASH: "0" * 16}
    live = LiveState()
    with replay() as mock:
        mock.get(VERSIONS, json=latest_page(ours))
        live.of("environment")[NAME] = read(clients)
    (change,) = diff(resources, live, stack="contract", source=loaded.source).changes
    assert change.actions == CREATE
    assert change.before["version"] == "string" and change.after["version"] not in (None, "string")


def test_create_sends_what_the_spec_and_the_recorded_create_say(tmp_path, clients):
    """createOrUpdate.json: infra's PUT of an image environment carries the recorded request's values and
    nothing read-only (environmentType, provisioningState); the recorded 201 is read back."""
    loaded, (env,) = stack(tmp_path)
    env = env.__class__(env.address, env.type, env.name, dict(env.attributes, version=PARAMS["version"]), env.tags)
    with replay() as mock:
        mock.put(f"{VERSIONS}/string", status=201,
                 json=version_body(response_body(CREATE_OR_UPDATE, "201"), PARAMS["version"]))
        created = AzureProvider(clients).create_environment_version(env, tmp_path, "conda.yaml", None)
    assert created == PARAMS["version"]
    (put,) = sent(mock, "PUT")
    body = body_of(put)
    assert problems(body, "EnvironmentVersionResource", request=True, spec=ASSETS_SPEC) == []
    ours, recorded = body["properties"], CREATE_OR_UPDATE["parameters"]["body"]["properties"]
    for key in ("image", "description", "isAnonymous"):
        assert ours[key] == recorded[key], key
    assert ours["tags"] == {**recorded["tags"], **env.tags}, "the user's tags and infra's ownership tags"
    assert yaml.safe_load(ours["condaFile"]) == yaml.safe_load(CONDA), "the conda file's content, as YAML text"
    assert "build" not in ours, "an image environment has no build context"


def test_the_recorded_version_reads_as_recorded(clients):
    """The recorded answer with only its id swapped (condaFile left as the placeholder text). azure-ai-ml read
    the text 'string' as a conda file path and raised; the refresh reads only version and tags."""
    page = response_body(LIST)
    page["value"][0]["id"] = f"{VERSIONS[len(ARM):]}/string"
    with replay() as mock:
        mock.get(VERSIONS, json=page)
        env = read(clients)
    assert env.attributes["version"] == "string"


def test_only_environments_the_workspace_lists_are_read(tmp_path, clients):
    """The refresh asks for the workspace's environments once (EnvironmentContainer/list.json, followed across its
    nextLink: the replay puts the list URL with a $skipToken there) and reads versions only of those listed: a
    declared environment that is not there costs no request, whatever the stack's size."""
    from responses import matchers

    loaded, resources = stack(tmp_path, STACK + "  absent: {image: docker.io/library/ubuntu:22.04}\n")
    with replay() as mock:
        mock.get(f"{W}/environments", json=containers_page(NAME),
                 match=[matchers.query_param_matcher({"$skipToken": "skiptoken"}, strict_match=False)])
        mock.get(f"{W}/environments", json=containers_page(
            "testEnvironment", next_link=f"{W}/environments?api-version=2024-10-01&$skipToken=skiptoken"))
        mock.get(VERSIONS, json=latest_page())
        mock.get(f"{W}/computes", json={"value": []})
        live = refresh(AzureProvider(clients), resources)
    assert sorted(live.of("environment")) == [NAME]
    gets = [r.url.split("?")[0] for r in sent(mock, "GET")]
    assert gets.count(f"{W}/environments") == 2 and f"{W}/environments/absent/versions" not in gets
    assert len(gets) == 4
    (change,) = [c for c in diff(resources, live, stack="contract", source=loaded.source).changes
                 if c.address == "environment.absent"]
    assert change.actions == CREATE and change.after["version"] == "1"


def test_the_put_body_is_what_azure_ai_ml_serialises(tmp_path, clients):
    """The version's PUT is built without azure-ai-ml (its import cost more than an apply's requests): for the
    same image, conda file, description and tags it must be the JSON azure-ai-ml's Environment serialises."""
    from azure.ai.ml.entities import Environment

    loaded, (env,) = stack(tmp_path, conda="name: serving\nchannels: [conda-forge]\ndependencies:\n- python=3.10\n"
                                           "- pip: [torch==2.3.0, {not: a-package}]\n")
    with replay() as mock:
        mock.put(f"{VERSIONS}/{env.attributes['version']}", status=201,
                 json=version_body(response_body(CREATE_OR_UPDATE, "201"), env.attributes["version"]))
        AzureProvider(clients).create_environment_version(env, tmp_path, "conda.yaml", None)
    a = env.attributes
    sdk = Environment(name=env.name, version=a["version"], image=a["image"], conda_file=str(tmp_path / "conda.yaml"),
                      description=a.get("description"), tags={**a.get("tags", {}), **env.tags})
    assert body_of(sent(mock, "PUT")[0]) == {"properties": sdk._to_rest_object().as_dict()["properties"]}
