"""Issue 40, a secret is a type (stack/secret.py), not a flag each writer must remember: the attacks on it.

A writer that knows nothing of secrets (json.dumps without a default, yaml.safe_dump, an f-string, repr) gets the
redacted form; the loader makes every sensitive value a Secret (text built from one, a map given whole, a `${ENV}`
value passed through a variable's default); plan files keep a keyed digest, never a fast hash; errors, hints and
diagnostics never quote one; `--var`/`INFRA_VAR_` values are read under the loader's bounds; an output built from a
secret must say `sensitive: true`."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from infra_cli.diagnostics import DiagnosticError
from infra_cli.plan.desired import desired_resources
from infra_cli.stack.load import LoadedStack, parse_stack
from infra_cli.stack.secret import SHOWN, Secret, contains_secret, revealed
from infra_cli.stack.variables import Inputs, VarInput

PIN = "482913"
TOKEN = "tok-Secr3t-0a9f"

STACK = textwrap.dedent("""\
    variables:
      token: {type: string, sensitive: true}
      pick: {type: string, sensitive: true, allowed: [alpha, beta], default: alpha}
      nested: {type: map, sensitive: true, default: {}}
      deep: {type: map, default: {}}
      spot: {type: bool, default: true}
      pin: {type: string, default: "${PIN_FROM_ENV}"}
      env: {type: string, default: prod}
    stack: secret-type
    workspace:
      subscription_id: 00000000-0000-0000-0000-0000000000c1
      resource_group: rg-${var.env}
      name: mlw
      location: eastus
    clusters:
      gpu:
        size: Standard_ND96asr_v4
        max_instances: 1
        enable_node_public_ip: ${var.spot}
        description: "owned by ${var.token}"
        tags: {pin: "${var.pin}", plain: visible}
    distributions:
      ddp:
        cluster: gpu
        environment: acpt
        type: pytorch
        process_count_per_instance: 8
        environment_variables: ${var.nested}
        smoke: {enabled: false}
    environments:
      acpt: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
    """)
ENVIRON = {"INFRA_VAR_token": TOKEN, "PIN_FROM_ENV": PIN}


def load(*given: tuple[str, str], environ: dict | None = None, text: str = STACK):
    inputs = Inputs(tuple(VarInput(kind, value) for kind, value in given))
    return parse_stack(text, "stack.yaml", ENVIRON if environ is None else environ, inputs)


def errors(*given, environ=None, text: str = STACK):
    with pytest.raises(DiagnosticError) as exc:
        load(*given, environ=environ, text=text)
    return exc.value.diagnostics


# ---- the type -------------------------------------------------------------------------------------------

def test_every_way_a_writer_turns_a_secret_into_text_gives_the_redacted_form():
    s = Secret(PIN)
    shown = [str(s), repr(s), f"{s}", f"{s!r}", f"{s:>20}".strip(), "%s" % s, "{}".format(s),
             json.dumps({"v": s}), json.dumps([s], indent=2), yaml.safe_dump({"v": s}), yaml.dump([s]),
             json.dumps({"v": s}, sort_keys=True, separators=(",", ":"))]
    assert all(PIN not in text for text in shown), shown
    assert json.loads(json.dumps({"v": s})) == {"v": SHOWN}
    assert yaml.safe_load(yaml.safe_dump({"v": s})) == {"v": SHOWN}
    # compared, hashed and revealed by its clear value: what Azure reads back equals it
    assert s == PIN and PIN == s and s == Secret(PIN) and s != "other" and len(s) == len(PIN)
    assert {s: 1}[Secret(PIN)] == 1 and s.reveal() == PIN and revealed({"a": [s]}) == {"a": [PIN]}
    with pytest.raises(AttributeError):
        s._clear = "x"


def test_a_new_json_writer_inherits_the_redaction_without_asking_for_it():
    """A writer added tomorrow (any json.dumps, any JSONEncoder that does not override default) redacts."""
    class MyEncoder(json.JSONEncoder):
        pass

    assert PIN not in MyEncoder().encode({"deep": [{"x": Secret(PIN)}]})
    assert PIN not in json.dumps({"deep": {"x": [Secret(PIN)]}})


# ---- the loader makes them -----------------------------------------------------------------------------

def test_text_built_from_a_secret_a_map_given_whole_and_an_env_default_are_secrets():
    stack, source = load(environ={**ENVIRON, "INFRA_VAR_nested": '{"API_KEY": "map-s3cret"}'})
    cluster = stack.clusters["gpu"]
    assert isinstance(cluster.description, Secret) and cluster.description == f"owned by {TOKEN}"
    assert isinstance(cluster.tags["pin"], Secret) and cluster.tags["pin"] == PIN   # ${ENV} through a default
    assert not isinstance(cluster.tags["plain"], Secret)
    env = stack.distributions["ddp"].environment_variables
    assert isinstance(env["API_KEY"], Secret) and env["API_KEY"] == "map-s3cret"
    assert source.variables["pin"].sensitive   # a default built from ${ENV} makes the variable sensitive
    # and the plan's desired attributes carry them as Secrets (so every writer after it redacts)
    loaded = LoadedStack(stack, Path("stack.yaml").resolve(), source)
    (gpu,) = [r for r in desired_resources(loaded) if r.type == "cluster"]
    assert contains_secret(gpu.attributes) and TOKEN not in json.dumps(gpu.to_json())


def test_a_bool_given_as_text_reads_as_written():
    """`--var spot=true` is true (and `false` false): a bool read from text is not its negation or a constant."""
    assert load(("var", "spot=true"))[0].clusters["gpu"].enable_node_public_ip is True
    assert load(("var", "spot=false"))[0].clusters["gpu"].enable_node_public_ip is False
    assert load(environ={**ENVIRON, "INFRA_VAR_spot": "true"})[0].clusters["gpu"].enable_node_public_ip is True


# ---- errors never quote one -----------------------------------------------------------------------------

@pytest.mark.parametrize("environ,rule", [
    ({"INFRA_VAR_pick": "Secr3t-not-allowed"}, "variable.not-allowed"),
    ({"INFRA_VAR_nested": "Secr3t-not-a-map"}, "variable.type"),
    ({"INFRA_VAR_nested": "[Secr3t-in-a-list]"}, "variable.type"),
])
def test_a_bad_sensitive_value_from_the_environment_is_not_echoed(environ, rule):
    (d,) = errors(environ={**ENVIRON, **environ})
    said = d.message + (d.hint or "")
    assert d.rule == rule and "Secr3t" not in said and SHOWN in d.message, said


# ---- bounds ---------------------------------------------------------------------------------------------

BOMB = ('a: &a ["l","l","l","l","l","l","l","l","l"]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n'
        'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n'
        'e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n'
        'g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]\nh: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]\n')
DEEP = "[" * 3000 + "]" * 3000


@pytest.mark.parametrize("value,said", [(BOMB, "more than 100000 values"), (DEEP, "more than 64 levels deep"),
                                        ("[" * 65 + "]" * 65, "more than 64 levels deep")])
def test_a_var_value_is_read_under_the_loader_s_bounds(value, said):
    """An alias bomb in 300 bytes, 3,000 levels of nesting (a RecursionError before), one level past the bound."""
    for given, environ in (((("var", f"nested={value}"),), ENVIRON), ((), {**ENVIRON, "INFRA_VAR_nested": value})):
        (d,) = errors(*given, environ=environ)
        assert d.rule == "variable.too-large" and said in d.message and value[:20] not in d.message, d


def test_a_var_value_at_the_depth_bound_reads():
    value = "[" * 62 + "{a: 1}" + "]" * 62   # with the map around it, 64 levels: the stack's own bound, reached not passed
    stack, source = load(environ={**ENVIRON, "INFRA_VAR_deep": "{k: " + value + "}"})
    assert source.variables["deep"].value["k"][0][0]


def test_the_cli_says_a_bound_not_an_internal_error(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack), "--json"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, **ENVIRON, "INFRA_VAR_nested": DEEP})
    assert r.returncode == 1 and "internal error" not in r.stderr and "RecursionError" not in r.stdout + r.stderr
    (d,) = json.loads(r.stdout)["diagnostics"]
    assert d["rule"] == "variable.too-large"


# ---- outputs --------------------------------------------------------------------------------------------

def test_an_output_built_from_a_secret_must_say_sensitive(tmp_path):
    """Terraform's "Output refers to sensitive values": validate and plan fail at the output, naming it and the
    reference (never the value); with `sensitive: true` it is valid."""
    text = STACK + 'outputs:\n  leak: {value: "${cluster.gpu.name} ${var.token}"}\n'
    stack = tmp_path / "stack.yaml"
    stack.write_text(text)
    env = {**os.environ, **ENVIRON, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    for args in (["validate", str(stack)], ["validate", str(stack), "--json"], ["plan", str(stack), "--local"],
                 ["plan", str(stack), "--local", "--json"]):
        r = subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True, timeout=120,
                           env=env)
        assert r.returncode == 1 and "output.sensitive" in r.stdout + r.stderr, (args, r.stdout, r.stderr)
        assert "'leak' refers to sensitive values" in r.stdout + r.stderr and "${var.token}" in r.stdout + r.stderr
        assert TOKEN not in r.stdout + r.stderr
    stack.write_text(text.replace('${var.token}"}', '${var.token}", sensitive: true}'))
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack)], capture_output=True, text=True,
                       timeout=60, env=env)
    assert r.returncode == 0, r.stderr


# ---- plan files and hints -------------------------------------------------------------------------------

def _plan(tmp_path: Path, *extra: str, env: dict | None = None) -> tuple[dict, subprocess.CompletedProcess]:
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK)
    out = tmp_path / "p.plan"
    environ = {k: v for k, v in os.environ.items() if k != "INFRA_PLAN_KEY"}
    environ.update({**ENVIRON, "INFRA_LOCAL_DIR": str(tmp_path / "state"), **(env or {})})
    r = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(stack), "--local", "--out", str(out),
                        *extra], capture_output=True, text=True, timeout=120, env=environ)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(out.read_text()), r


def test_a_plan_file_keeps_a_pin_as_scrypt_under_its_own_salt_not_a_fast_hash(tmp_path):
    saved, _ = _plan(tmp_path, "--var", f"token={PIN}")
    text = json.dumps(saved)
    salt = saved["secret_salt"]
    for fast in (hashlib.sha256(PIN.encode()).hexdigest(), hashlib.sha256(f"{salt}:{json.dumps(PIN)}".encode())
                 .hexdigest(), hashlib.sha256(f"{salt}:{PIN}".encode()).hexdigest()):
        assert fast not in text and fast[:16] not in text
    assert PIN not in text.replace(salt, "")
    digest = saved["variables"]["token"]["digest"]
    expected = hashlib.scrypt(json.dumps(PIN).encode(), salt=salt.encode(), n=2**14, r=8, p=1,
                              maxmem=64 * 1024 * 1024, dklen=32).hex()
    assert digest == f"{SHOWN} scrypt:{expected}"   # memory-hard, ~30 ms a guess: a 6-digit PIN is hours away
    assert saved["variables"]["pin"]["sensitive"] is True   # a default built from ${ENV}


def test_a_plan_file_signed_with_infra_plan_key_keeps_an_hmac_under_that_key(tmp_path):
    key = "plan-signing-key-for-the-test"
    saved, _ = _plan(tmp_path, "--var", f"token={PIN}", env={"INFRA_PLAN_KEY": key})
    digest = saved["variables"]["token"]["digest"]
    clear = json.dumps(PIN)
    assert digest == f"{SHOWN} hmac-sha256:" + hmac.new(key.encode(), f"{saved['secret_salt']}\0{clear}".encode(),
                                                       hashlib.sha256).hexdigest()
    (gpu,) = [r for r in saved["desired"] if r["type"] == "cluster"]
    assert gpu["attributes"]["description"].startswith(f"{SHOWN} hmac-sha256:")
    # shown without the key: not "stale" (its digests cannot be checked here); applied with it: the digests match
    environ = {k: v for k, v in os.environ.items() if k != "INFRA_PLAN_KEY"}
    environ.update({**ENVIRON, "INFRA_LOCAL_DIR": str(tmp_path / "state"), "INFRA_VAR_token": PIN})
    shown = subprocess.run([sys.executable, "-m", "infra_cli", "show", str(tmp_path / "p.plan")], capture_output=True,
                           text=True, timeout=120, env=environ)
    assert shown.returncode == 0 and "warning[planfile.unchecked]" in shown.stderr, shown.stdout + shown.stderr
    assert "stale" not in shown.stderr.replace("refuses it as stale", "")
    applied = subprocess.run([sys.executable, "-m", "infra_cli", "apply", str(tmp_path / "p.plan"), "--local"],
                             capture_output=True, text=True, timeout=300, env={**environ, "INFRA_PLAN_KEY": key})
    assert applied.returncode == 0 and "Apply complete!" in applied.stdout, applied.stdout + applied.stderr


def test_a_hint_naming_a_command_gives_this_run_s_vars_again_but_not_a_sensitive_one(tmp_path):
    """`infra output` of a stack never applied hints `infra apply STACK ...` with this run's --var options: the
    variable that is not sensitive is there (so the command reads the same workspace), the secret is not."""
    stack = tmp_path / "stack.yaml"
    stack.write_text(STACK + 'outputs:\n  name: {value: "${cluster.gpu.name}"}\n')
    environ = {**os.environ, **ENVIRON, "INFRA_LOCAL_DIR": str(tmp_path / "state")}
    r = subprocess.run([sys.executable, "-m", "infra_cli", "output", str(stack), "--local", "--var", "env=prod",
                        "--var", f"token={PIN}", "--var", "pin=given-pin-42"], capture_output=True, text=True,
                       timeout=120, env=environ)
    assert r.returncode == 0 and "--var env=prod" in r.stderr, r.stdout + r.stderr
    assert PIN not in r.stdout + r.stderr and "given-pin-42" not in r.stdout + r.stderr, r.stderr
    assert "(with --var pin=..., --var token=... again)" in r.stderr, r.stderr   # named, without their values


def test_a_rule_judges_a_secret_by_its_clear_value_and_never_quotes_it(tmp_path):
    """NCCL_NET from ${ENV} is a Secret: the InfiniBand rule reads it (no internal error on a Secret) and its
    diagnostic quotes no clear value."""
    stack = tmp_path / "stack.yaml"
    stack.write_text(textwrap.dedent("""\
        stack: nccl
        workspace: {subscription_id: 00000000-0000-0000-0000-0000000000c2, resource_group: rg, name: mlw,
                    location: eastus}
        clusters:
          gpu: {size: Standard_ND96asr_v4, max_instances: 2}
        environments:
          e: {curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"}
        distributions:
          ddp:
            cluster: gpu
            environment: e
            type: pytorch
            instance_count: 2
            process_count_per_instance: 8
            environment_variables: {NCCL_NET: "${NET_FROM_ENV}", TOKEN: "${TOKEN_FROM_ENV}"}
        """))
    r = subprocess.run([sys.executable, "-m", "infra_cli", "validate", str(stack), "--json"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, "NET_FROM_ENV": "Socket", "TOKEN_FROM_ENV": TOKEN})
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stdout + r.stderr
    rules = [d["rule"] for d in json.loads(r.stdout)["diagnostics"]]
    assert "distribution.infiniband-disabled" in rules and TOKEN not in r.stdout


def test_a_field_kept_as_text_is_redacted_in_every_dump_of_the_stack():
    """A secret where the field keeps plain text (a command, a curated reference's registry, a workspace's resource
    group): the field reads as its text (it is parsed, or part of a URL), but any dump of the stack, and so any
    writer of one (the plan JSON's `configuration`), gives the redacted form."""
    text = STACK.replace("type: pytorch", 'type: pytorch\n    command: "python train.py --key ${var.token}"') \
        .replace('curated: "azureml:AzureML-ACPT-pytorch-1.13-py38-cuda11.7-gpu@latest"',
                 'curated: "azureml://registries/${var.token}/environments/e/labels/latest"') \
        .replace("resource_group: rg-${var.env}", "resource_group: rg-${RG_FROM_ENV}")
    stack, _ = load(environ={**ENVIRON, "RG_FROM_ENV": "rgs3cret"}, text=text)
    assert stack.distributions["ddp"].command == f"python train.py --key {TOKEN}"   # read as text
    assert stack.workspace.resource_group == "rg-rgs3cret"
    dumps = [stack.model_dump(mode="json"), stack.model_dump()]
    for dumped in dumps:
        written = json.dumps(dumped) + yaml.safe_dump(json.loads(json.dumps(dumped)))
        assert TOKEN not in written and "rgs3cret" not in written, written
    assert dumps[0]["distributions"]["ddp"]["command"] == SHOWN
    assert dumps[0]["environments"]["acpt"]["curated"] == SHOWN
    assert dumps[0]["distributions"]["ddp"]["type"] == "pytorch"   # what no secret reached is as written


def test_a_template_parameter_from_env_is_judged_by_its_clear_text_and_sealed_in_a_plan_file(tmp_path):
    stack = tmp_path / "stack.yaml"
    stack.write_text(textwrap.dedent("""\
        stack: tpl
        workspace: {subscription_id: 00000000-0000-0000-0000-0000000000c3, resource_group: rg, name: mlw,
                    location: eastus}
        environments:
          img:
            build:
              template: openmpi-rdma
              parameters: {hpcx_url: "https://acct.blob.core.windows.net/c/hpcx.tbz?${SAS_FROM_ENV}"}
        """))
    env = {k: v for k, v in os.environ.items() if k != "INFRA_PLAN_KEY"}
    env.update({"SAS_FROM_ENV": "sig=SasS3cret77", "INFRA_LOCAL_DIR": str(tmp_path / "state")})
    r = subprocess.run([sys.executable, "-m", "infra_cli", "plan", str(stack), "--local", "--json", "--out",
                        str(tmp_path / "p.plan")], capture_output=True, text=True, timeout=120, env=env)
    assert r.returncode == 0, r.stdout + r.stderr   # the grammar judged the URL itself, not "(sensitive value)"
    assert "SasS3cret77" not in r.stdout + r.stderr + (tmp_path / "p.plan").read_text()


def test_a_hash_of_a_secret_s_text_is_a_secret(tmp_path):
    """An inline conda file with a package index token from ${ENV}: its sha256 and the environment's content hash
    (fast hashes of the token's text) read "(sensitive value)" in plan JSON and are sealed in the plan file; the
    version Azure registers carries the clear conda file (the next plan has nothing to change)."""
    stack = tmp_path / "stack.yaml"
    stack.write_text(textwrap.dedent("""\
        stack: envs
        workspace: {subscription_id: 00000000-0000-0000-0000-0000000000c4, resource_group: rg, name: mlw,
                    location: eastus}
        environments:
          img:
            image: mcr.microsoft.com/azureml/openmpi4.1.0-ubuntu20.04:latest
            conda_file:
              channels: [conda-forge]
              dependencies: [python=3.10, {pip: ["--extra-index-url https://u:${PIP_TOKEN}@pkgs.example.com", torch]}]
        """))
    env = {k: v for k, v in os.environ.items() if k != "INFRA_PLAN_KEY"}
    env.update({"PIP_TOKEN": "PipS3cret42", "INFRA_LOCAL_DIR": str(tmp_path / "state")})

    def infra(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "infra_cli", *args], capture_output=True, text=True,
                              timeout=300, env=env)

    plan = infra("plan", str(stack), "--local", "--json", "--out", str(tmp_path / "p.plan"))
    assert plan.returncode == 0, plan.stdout + plan.stderr
    (change,) = json.loads(plan.stdout)["resource_changes"]
    assert change["change"]["after"]["conda_sha256"] == SHOWN and change["change"]["after"]["content_hash"] == SHOWN
    saved = (tmp_path / "p.plan").read_text()
    assert "PipS3cret42" not in plan.stdout + saved
    assert json.loads(saved)["resource_changes"][0]["change"]["after"]["conda_sha256"].startswith(f"{SHOWN} scrypt:")
    assert infra("apply", str(tmp_path / "p.plan"), "--local").returncode == 0
    again = infra("plan", str(stack), "--local")
    assert "No changes." in again.stdout, again.stdout + again.stderr


def test_a_diagnostic_at_a_stack_position_quotes_no_secret_but_keeps_short_flags_readable():
    from infra_cli.stack.source import SourceMap

    source = SourceMap("stack.yaml", secrets={"1", "reg-Secr3t", "reg-Secr3t/envs"})
    d = source.diagnostic((), "rule.x", "1 node reads azureml://registries/reg-Secr3t/envs/x", "see reg-Secr3t")
    assert d.message == "1 node reads azureml://registries/(sensitive value)/x" and d.hint == "see (sensitive value)"
