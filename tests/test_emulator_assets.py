"""Environments (versions, immutability, label latest, nextVersion) and code snapshots (upload to the
emulator's blob endpoint, reuse by content hash) through the real azure-ai-ml client."""

from __future__ import annotations

import pytest
from azure.ai.ml.entities import Environment
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError


IMAGE = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04:latest"


def test_environment_versions_next_version_and_latest(clients, emulator):
    first = clients.ml.environments.create_or_update(Environment(name="mpi", image=IMAGE))
    assert first.version == "1"
    second = clients.ml.environments.create_or_update(Environment(name="mpi", image=IMAGE + "-2"))
    assert second.version == "2"
    assert clients.ml.environments.get("mpi", label="latest").image == IMAGE + "-2"
    assert clients.ml.environments.get("mpi", version="1").image == IMAGE
    assert [e.name for e in clients.ml.environments.list()] == ["mpi"]
    assert sorted(e.version for e in clients.ml.environments.list(name="mpi")) == ["1", "2"]


def test_environment_version_is_immutable_but_same_content_is_idempotent(clients):
    clients.ml.environments.create_or_update(Environment(name="mpi", version="7", image=IMAGE))
    again = clients.ml.environments.create_or_update(Environment(name="mpi", version="7", image=IMAGE,
                                                                 description="tags and description may change"))
    assert again.description == "tags and description may change"
    with pytest.raises(HttpResponseError) as info:
        clients.ml.environments.create_or_update(Environment(name="mpi", version="7", image=IMAGE + "-other"))
    assert info.value.status_code == 409 and info.value.error.code == "UserError"
    assert "already registered and cannot be changed" in info.value.error.message
    assert clients.ml.environments.get("mpi", version="7").image == IMAGE


def test_missing_environment_is_an_arm_404(clients):
    with pytest.raises(ResourceNotFoundError) as info:
        clients.ml.environments.get("nope", version="1")
    assert info.value.error.code == "ResourceNotFound"


def test_code_upload_and_reuse_by_content_hash(clients, emulator, tmp_path):
    from azure.ai.ml.entities._assets import Code  # the snapshot jobs.create_or_update uploads

    src = tmp_path / "src"
    (src / "pkg").mkdir(parents=True)
    (src / "train.py").write_text("print('hello')\n")
    (src / "pkg" / "data.txt").write_text("x" * 1000)
    code = clients.ml._code.create_or_update(Code(path=str(src)))
    uploads = emulator.stats.matching("PUT", "/devstoreaccount1/")
    assert len([u for u in uploads if u.path.endswith(("train.py", "data.txt"))]) >= 2
    container, _, prefix = code.path.split("/devstoreaccount1/")[1].partition("/")
    stored = emulator.backend.blobs.names(container, prefix)
    assert sorted(n.rsplit("/", 1)[-1] for n in stored) == ["data.txt", "train.py"]
    assert emulator.backend.blobs.read(container, next(n for n in stored if n.endswith("train.py"))) == b"print('hello')\n"

    emulator.stats.reset()
    again = clients.ml._code.create_or_update(Code(path=str(src)))
    assert again.id == code.id
    assert not emulator.stats.matching("POST", "startPendingUpload"), "same content must not be uploaded again"
