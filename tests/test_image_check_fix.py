"""`infra image check`'s unmet requirement says what to do: the install command for the image's own distribution
(read from its os-release), base images that carry it, infra's Dockerfile template; in the text verdict, the JSON
and the GitHub Action's job summary. Real images (umoci builds of tar layers and Debian's packages)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from image_fixtures import OPENMPI_ALTERNATIVES, OPENMPI_DEBS, Layer, build_oci, package_layer
from test_ci_integrations import Runner, _run_action

ROOT = Path(__file__).resolve().parent.parent
APT_OPENMPI = "apt-get update && apt-get install -y --no-install-recommends openmpi-bin"
DNF_OPENMPI = "dnf install -y openmpi"
AZUREML_CPU = "mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu22.04"
AZUREML_OMPI5 = "mcr.microsoft.com/azureml/openmpi5.0-cuda12.6-ubuntu24.04"


def os_release_layer(text: str) -> Layer:
    """As Ubuntu and the RHEL family ship it: /usr/lib/os-release, and /etc/os-release a link to it."""
    return (Layer().dir("/usr").dir("/usr/lib").dir("/etc").file("/usr/lib/os-release", text)
            .symlink("/etc/os-release", "../usr/lib/os-release"))


UBUNTU = 'PRETTY_NAME="Ubuntu 22.04.4 LTS"\nNAME="Ubuntu"\nVERSION_ID="22.04"\nID=ubuntu\nID_LIKE=debian\n'
# an ID infra does not list, whose ID_LIKE names the RHEL family (as Rocky's and AlmaLinux's do)
RHEL_LIKE = 'NAME="Acme Linux"\nID="acmelinux"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.3"\n'


@dataclass
class Built:
    refs: dict[str, str]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    work = tmp_path_factory.mktemp("fix-images")
    layout = work / "layout"
    app = Layer().file("/app/train.py", "print(1)\n")
    openmpi = package_layer(OPENMPI_DEBS, OPENMPI_ALTERNATIVES, work)
    refs = {
        "ubuntu": build_oci(layout, "ubuntu", [os_release_layer(UBUNTU), app]),
        "rhel": build_oci(layout, "rhel", [os_release_layer(RHEL_LIKE), app]),
        "none": build_oci(layout, "none", [app]),
        # Debian's Open MPI 4.1 over an Ubuntu os-release: its version (dpkg status, in the layer above) decides
        # `openmpi>=5` before the os-release below is reached
        "ubuntu-openmpi": build_oci(layout, "ubuntu-openmpi", [os_release_layer(UBUNTU), openmpi, app]),
        "hostile": build_oci(layout, "hostile", [os_release_layer(
            'ID="ubuntu\x1b]8;;https://evil.example\x07"\nID_LIKE=`reboot`\nVERSION_ID="$(id)"\n'), app]),
    }
    return Built(refs)


def cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra_cli", "image", "check", *args], capture_output=True,
                          text=True, cwd=cwd, timeout=120)


def check(ref: str, *requires: str, tmp_path: Path) -> tuple[int, str, dict]:
    """The text verdict and, from the same run, --json-out's document."""
    out = tmp_path / "verdict.json"
    args = [a for r in requires for a in ("--require", r)]
    proc = cli(ref, *args, "--json-out", str(out))
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.returncode, proc.stdout, json.loads(out.read_text())


def fail_block(text: str, requirement: str) -> list[str]:
    """The FAIL line of `requirement` and the lines under it, up to the next verdict line."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"  FAIL  {requirement} "))
    end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("     ")), len(lines))
    return lines[start:end]


def requirement(verdict: dict, name: str) -> dict:
    return next(r for r in verdict["requirements"] if r["requirement"] == name)


def test_an_ubuntu_image_is_told_the_apt_get_line_a_base_image_and_the_template(built, tmp_path):
    code, text, verdict = check(built.refs["ubuntu"], "openmpi>=4.1", tmp_path=tmp_path)
    assert code == 1
    block = "\n".join(fail_block(text, "openmpi>=4.1"))
    assert f"fix: on ubuntu 22.04: {APT_OPENMPI}" in block, block
    assert f"build FROM {AZUREML_CPU}" in block and "openmpi-rdma" in block, block
    assert "dnf" not in block, block                  # the image's distribution only
    fix = requirement(verdict, "openmpi>=4.1")["fix"]
    assert (fix["install"], fix["family"], fix["distribution"]) == (APT_OPENMPI, "debian", "ubuntu 22.04")
    assert AZUREML_CPU in fix["base_images"] and fix["template"] == "openmpi-rdma"
    assert set(fix["install_by_family"]) == {"debian", "rhel"}
    assert all(s.startswith("https://") for s in fix["sources"]), fix["sources"]
    assert verdict["distribution"] == {"path": "/etc/os-release", "id": "ubuntu", "id_like": ["debian"],
                                       "version_id": "22.04", "family": "debian"}


def test_a_rhel_like_image_is_told_the_dnf_line_through_its_id_like(built, tmp_path):
    code, text, verdict = check(built.refs["rhel"], "openmpi>=4.1", "ibverbs", tmp_path=tmp_path)
    assert code == 1
    block = "\n".join(fail_block(text, "openmpi>=4.1"))
    assert f"fix: on acmelinux 9.3 (RHEL, CentOS, Rocky, AlmaLinux, Fedora): {DNF_OPENMPI}" in block, block
    assert "/usr/lib64/openmpi/bin" in block and "apt-get" not in block, block   # mpirun is off PATH there
    assert "dnf install -y libibverbs" in "\n".join(fail_block(text, "ibverbs"))
    fix = requirement(verdict, "openmpi>=4.1")["fix"]
    assert (fix["install"], fix["family"]) == (DNF_OPENMPI, "rhel")
    assert verdict["distribution"]["id_like"] == ["rhel", "centos", "fedora"]


def test_an_image_without_os_release_is_given_every_family(built, tmp_path):
    code, text, verdict = check(built.refs["none"], "openmpi", "nccl", tmp_path=tmp_path)
    assert code == 1 and verdict["distribution"] is None
    block = "\n".join(fail_block(text, "openmpi"))
    assert "distribution is unknown" in block and APT_OPENMPI in block and DNF_OPENMPI in block, block
    fix = requirement(verdict, "nccl")["fix"]
    assert fix["install"] is None and fix["family"] is None
    assert {k: v["run"].split()[0] for k, v in fix["install_by_family"].items()} == {"debian": "apt-get",
                                                                                    "rhel": "dnf"}
    assert "libnccl2" in fix["install_by_family"]["debian"]["run"]


def test_a_fix_for_any_distribution_says_install_and_the_template_parameters(built, tmp_path):
    code, text, verdict = check(built.refs["ubuntu"], "deepspeed", tmp_path=tmp_path)
    block = "\n".join(fail_block(text, "deepspeed"))
    assert code == 1 and "fix: install: pip install deepspeed" in block, block
    assert 'build: {template: openmpi-rdma, parameters: {pip_packages: ["deepspeed"]}}' in block, block
    fix = requirement(verdict, "deepspeed")["fix"]
    assert (fix["install_family"], fix["template_parameters"]) == ("any", {"pip_packages": ["deepspeed"]})


def test_a_met_requirement_carries_no_fix(built, tmp_path):
    code, text, verdict = check(built.refs["ubuntu-openmpi"], "openmpi>=4.1", tmp_path=tmp_path)
    assert code == 0 and "fix:" not in text
    assert requirement(verdict, "openmpi>=4.1")["fix"] is None


def test_a_version_too_old_reads_down_to_the_os_release_and_names_only_what_is_new_enough(built, tmp_path):
    """The verdict is decided in the layer with dpkg's status; the os-release lies in the layer below, so the check
    reads on (only when a requirement fails) for the fix to name the distribution. Of the base images only the Open
    MPI 5.0 one meets >=5, and the template (Open MPI 4.1) is not named."""
    code, text, verdict = check(built.refs["ubuntu-openmpi"], "openmpi>=5", tmp_path=tmp_path)
    assert code == 1
    r = requirement(verdict, "openmpi>=5")
    assert "does not satisfy >=5" in r["reason"]
    assert verdict["layers_read"] == 3 and r["fix"]["family"] == "debian", verdict["layers"]
    assert r["fix"]["base_images"] == [AZUREML_OMPI5] and r["fix"]["template"] is None
    assert "openmpi-rdma" not in "\n".join(fail_block(text, "openmpi>=5"))
    # and a check that passes still stops early
    _, _, met = check(built.refs["ubuntu-openmpi"], "openmpi>=4.1", tmp_path=tmp_path)
    assert met["stopped_early"] and met["layers_read"] == 2


def test_an_os_release_written_to_harm_is_read_as_no_distribution(built, tmp_path):
    code, text, verdict = check(built.refs["hostile"], "openmpi", tmp_path=tmp_path)
    assert code == 1
    assert verdict["distribution"]["id"] is None and verdict["distribution"]["family"] is None
    assert verdict["distribution"]["id_like"] == [] and verdict["distribution"]["version_id"] is None
    assert "\x1b" not in text and "evil.example" not in text and "reboot" not in text and "$(id)" not in text
    block = "\n".join(fail_block(text, "openmpi"))
    assert APT_OPENMPI in block and DNF_OPENMPI in block    # every family, as for an unknown distribution


# ---- the GitHub Action's job summary -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def runner(tmp_path_factory) -> Runner:
    """action.yml's check step run as the runner runs it, on this checkout: the job's PATH holds an `infra` that is
    this checkout's and a python3 (the action run on the installed package is tests/test_ci_integrations.py's)."""
    job = tmp_path_factory.mktemp("job")
    (job / "bin").mkdir()
    shim = job / "bin" / "infra"
    shim.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m infra_cli "$@"\n')
    shim.chmod(0o755)
    (job / "bin" / "python3").symlink_to(sys.executable)
    return Runner(ROOT, job)


def test_the_action_summary_names_the_fix_for_the_image_distribution(built, runner, tmp_path):
    code, verdict, _, summary, log = _run_action(runner, tmp_path, image=built.refs["rhel"], require="openmpi>=4.1")
    assert code == 1 and "NOT met" in summary, log
    assert "- not met: `openmpi>=4.1`: not found" in summary, summary
    family = "\\(RHEL, CentOS, Rocky, AlmaLinux, Fedora\\)"
    assert f"  - fix: on acmelinux 9.3 {family}: <code>dnf install -y openmpi</code>" in summary, summary
    assert f"  - fix: build FROM <code>{AZUREML_CPU}</code>" in summary
    assert "  - fix: infra's <code>openmpi-rdma</code> template" in summary
    assert summary.count("- not met:") == 1     # the log's lines are the fallback, not a second copy


def test_the_action_summary_escapes_what_the_image_wrote(runner, tmp_path):
    """A version string from the image's dpkg status reaches the reason; in the summary it stays text, never a
    Markdown image (a tracking pixel) or HTML."""
    evil = "4.1![x](https://evil.example/p.png)<img>"
    layer = (Layer().dir("/usr").dir("/usr/bin").dir("/usr/lib").dir("/var/lib/dpkg")
             .file("/usr/bin/mpirun", b"\x7fELF", 0o755).file("/usr/lib/libmpi.so.40", b"x")
             .file("/usr/lib/libopen-pal.so.40", b"x")
             .file("/var/lib/dpkg/status", f"Package: openmpi-bin\nStatus: install ok installed\nVersion: {evil}\n"))
    ref = build_oci(tmp_path / "layout", "evil", [layer])
    code, verdict, _, summary, _ = _run_action(runner, tmp_path, image=ref, require="openmpi>=5")
    assert code == 1 and evil in requirement(verdict, "openmpi>=5")["reason"]
    assert "![x](" not in summary.split("```")[0] and "<img>" not in summary.split("```")[0], summary
    assert "\\!\\[x\\]\\(https://evil.example/p.png\\)\\<img\\>" in summary, summary


# ---- the knowledge -----------------------------------------------------------------------------------------

def test_every_shipped_profile_has_a_fix_and_cites_public_sources_only():
    data = yaml.safe_load((ROOT / "validators" / "image_evidence.yaml").read_text(encoding="utf-8"))
    for name, profile in data["profiles"].items():
        assert profile.get("fix"), f"profile {name} has no fix:"
        for source in profile.get("sources") or []:
            assert source.startswith("https://"), (name, source)
    text = (ROOT / "validators" / "image_evidence.yaml").read_text(encoding="utf-8")
    assert "facts/" not in text and "/work/" not in text
