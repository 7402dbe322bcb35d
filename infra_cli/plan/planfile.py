"""Plan files: the diff, the desired state and the live fingerprint a plan saw, and where and when it was made.
Mode 0600, no secrets: every secret (stack/secret.py) is written as its keyed digest, HMAC-SHA256 under
INFRA_PLAN_KEY, else scrypt under a random salt of the plan's own (`secret_salt`), never a fast hash.

Applying one re-reads the stack (for the secrets a create needs, which the file never holds) and refuses if
the stack's desired state or the live state's fingerprint no longer match what was planned (apply/engine.py then
derives the actions again and refuses a file whose recorded ones differ). A plan is bound, as Terraform binds its
saved plans: to the workspace it was made for (`workspace`: cloud, subscription, resource group, name), which the
stack must still name, and to the state it was made against (`state`: the stack's lineage and serial,
state/serial.py), which apply checks under the lock.

A plan file carries the sha256 digest of its content (`digest`), and with INFRA_PLAN_KEY set an HMAC-SHA256 of
it under that key (`hmac`); reading one checks both, so a file changed after `infra plan` wrote it is refused.
Both are computed over the canonical JSON (sorted keys, no spaces) of every other field, as read back.
The key itself is never written anywhere.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass, field, replace as with_fields
from pathlib import Path
from typing import Any, Callable, Mapping

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, DiagnosticError, Text, says, words
from infra_cli.private_state import write_private_file
from infra_cli.plan.cost import costs_json
from infra_cli.plan.desired import desired_resources
from infra_cli.plan.model import (FORMAT_VERSION, WORKSPACE_IDENTITY, Plan, PlanMode, Resource, ResourceChange,
                                  canonical_json, describe_workspace, same_workspace, with_secret_paths,
                                  workspace_identity)
from infra_cli.plan.preflight import LIVE_JUDGED_RULES
from infra_cli.stack.addresses import EVERY_KIND, parse_address
from infra_cli.stack.load import LoadedStack
from infra_cli.stack.secret import keyed_digest, sealed
from infra_cli.stack.variables import Inputs, command_words
from infra_cli.state.serial import StateSerial
from infra_cli.stack.bounded_yaml import MAX_DEPTH
from infra_cli.validate.engine import load_valid_stack

KIND = "infra-plan"
PLAN_KEY_ENV = "INFRA_PLAN_KEY"
_SEALS = ("digest", "hmac")   # the fields that seal the others
_DIGEST, _HMAC = "sha256:", "hmac-sha256:"
SECRET_MARK = "(sensitive value) "   # what precedes a secret's keyed digest in a plan file
PLAN_OUT = NextStep(("infra", "plan"), ("STACK", "--out", "FILE"))   # a plan saved to a file, the stack unknown
REPLAN_HINT = says("run ", PLAN_OUT, " again and apply the new file")


def replan_hint(stack: str) -> Text:
    """What to do when a plan made by this apply no longer holds, with the stack's path filled in so the command
    can be copied as it is (the command's view adds --local on a local run). A saved plan's hint is the exact
    command that made it (replan_step)."""
    return says("run ", NextStep(("infra", "plan"), (stack,)), " to see what would change now, then ",
                NextStep(("infra", "apply"), (stack,)), " again")


@dataclass
class SavedPlan:
    plan: Plan
    stack_path: Path
    targets: list[str]
    warnings: list[Diagnostic] = field(default_factory=list)
    variables: dict = field(default_factory=dict)  # the variable values it was made with (variables.recorded_values)
    file: str | None = None
    replace: list[str] = field(default_factory=list)   # --replace ADDR it was made with
    local: bool = False   # made with --local: against this project's local Azure (apply of it uses that one)
    # what the file keeps of each secret (stack/secret.py keyed_digest under its key and salt): the stack's values
    # now, sealed by it, compare with the file's
    # (None: the file's secrets are keyed with INFRA_PLAN_KEY, which this reader does not have)
    seal: Callable[[Any], str] | None = None


def plan_key(environ: Mapping[str, str]) -> bytes | None:
    """The key plan files are signed with (INFRA_PLAN_KEY), None when unset; set but empty is an error (a CI
    secret that did not arrive would otherwise turn signing off without a word)."""
    value = environ.get(PLAN_KEY_ENV)
    if value is None:
        return None
    if not value:
        raise DiagnosticError([Diagnostic("error", "planfile.key-empty", f"{PLAN_KEY_ENV} is set but empty",
                                          None, None, None, f"set {PLAN_KEY_ENV} to the secret plan files are signed "
                                          "with, or unset it to work without signatures")])
    return value.encode("utf-8")


def _sealed_content(body: dict) -> bytes:
    return canonical_json({k: v for k, v in body.items() if k not in _SEALS}).encode()


def content_digest(body: dict) -> str:
    """`sha256:HEX` of a plan file's content (every field but the seals, as canonical JSON)."""
    return _DIGEST + hashlib.sha256(_sealed_content(body)).hexdigest()


def content_hmac(body: dict, key: bytes) -> str:
    return _HMAC + hmac.new(key, _sealed_content(body), hashlib.sha256).hexdigest()


def secret_seal(key: bytes | None, salt: str) -> Callable[[Any], str]:
    """How a plan file keeps a secret (every Secret of the plan, a sensitive variable's value): its keyed digest,
    HMAC-SHA256 under INFRA_PLAN_KEY, else scrypt under the plan's own random salt (stack/secret.py keyed_digest)."""
    done: dict[str, str] = {}

    def seal(clear: Any) -> str:
        text = clear if isinstance(clear, str) else json.dumps(clear, sort_keys=True)
        if text not in done:
            done[text] = SECRET_MARK + keyed_digest(text, key, salt)
        return done[text]
    return seal


def desired_json(desired: list[Resource], changes: list[ResourceChange]) -> list[dict]:
    """The desired resources as a plan file keeps them: each sensitive path of its change a Secret (sealed after)."""
    paths = {c.address: c.sensitive for c in changes}
    return [{**r.to_json(), "attributes": with_secret_paths(r.attributes, paths.get(r.address, ()))} for r in desired]


def as_saved(changes: list[ResourceChange], seal: Callable[[Any], str]) -> list[ResourceChange]:
    """Changes derived now, with their `after` as a plan file sealed with `seal` keeps it (apply compares the two)."""
    return [with_fields(c, after=sealed(with_secret_paths(c.after, c.sensitive), seal)) for c in changes]


def write_plan_file(path: Path, plan: Plan, stack_path: Path, targets: list[str], *, key: bytes | None = None,
                    variables: dict | None = None, replace: list[str] | None = None, local: bool = False) -> None:
    """`key`: sign the file with HMAC-SHA256 under it (INFRA_PLAN_KEY); the digest is written either way.
    `local`: the plan was made with --local, against the project's local Azure (sealed with the rest: apply of
    the file uses that cloud, as Terraform's saved plan carries its backend).
    `variables`: the values of the stack's variables (variables.recorded_values: a sensitive one as a Secret).
    Every Secret is written as its keyed digest (secret_seal), whoever put it in the plan."""
    salt = secrets.token_hex(16)
    body = json.loads(json.dumps(sealed({   # as a reader will see it: the seals cover what is read back
        "kind": KIND,
        **plan.to_json(mask_sensitive=False),
        "stack_path": str(stack_path),
        "targets": targets,
        "desired": desired_json(plan.desired, plan.resource_changes),
        "variables": variables or {},
        "replace": replace or [],
        "local": bool(local),
        "secret_salt": salt,
    }, secret_seal(key, salt))))
    body["digest"] = content_digest(body)
    if key is not None:
        body["hmac"] = content_hmac(body, key)
    data = json.dumps(body, indent=2, sort_keys=True).encode()
    try:
        write_private_file(Path(path), data, 0o600)   # a fresh, randomly named file (O_EXCL|O_NOFOLLOW) renamed over it
    except OSError as exc:   # a full disk (ENOSPC), a file over its size limit (EFBIG): `path` is as it was
        if exc.errno not in _CANNOT_WRITE:
            raise
        raise DiagnosticError([Diagnostic(
            "error", "planfile.unwritten", f"cannot write the plan file {path}: {exc.strerror or exc}; nothing was "
            f"written ({path} is as it was)", str(path), None, None,
            says("free space on its disk (or raise the file size limit, ulimit -f) and run ", NextStep(("infra", "plan")),
                 " again"))]) from None


_CANNOT_WRITE = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def is_plan_file(path: Path) -> bool:
    """A saved plan is a JSON object with our `kind` (a stack is YAML; JSON stacks are not a thing here)."""
    if not Path(path).is_file():  # a FIFO would block the open; the stack loader says what it is instead
        return False
    try:
        with open(path, "rb") as fh:
            if not fh.read(64).lstrip().startswith(b"{"):
                return False
            fh.seek(0)
            data = json.load(fh)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("kind") == KIND


def made_locally(path: Path) -> bool:
    """Whether the plan file says it was made with --local: which cloud apply of it builds its provider for. Read
    before its seals are checked (prepare_from_plan_file checks them, and refuses a file whose seal or cloud
    disagrees): a file that is no plan says False."""
    try:
        data = json.loads(Path(path).read_bytes()) if Path(path).stat().st_size <= MAX_PLAN_BYTES else None
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(data, dict) and data.get("local") is True


ZIP_MAGIC = b"PK\x03\x04"  # a Terraform plan file is a zip archive
MAX_PLAN_BYTES = 64 << 20  # a plan of thousands of resources is a few MiB; more is not one of ours


def looks_like_plan_file(path: Path) -> bool:
    """What `infra show` reads as a plan (read_plan_file then says what is wrong with it) rather than as a
    stack: a JSON object, or a Terraform plan. A stack is YAML."""
    try:
        if not Path(path).is_file():
            return False
        with open(path, "rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return head.lstrip().startswith(b"{") or head.startswith(ZIP_MAGIC)


# A plan holds the stack's values a few levels down; a stack nests at most stack/bounded_yaml.py's MAX_DEPTH.
MAX_PLAN_DEPTH = 2 * MAX_DEPTH


def _depth_over(data: object, limit: int) -> bool:
    """Whether JSON data nests deeper than `limit` lists and objects, found without recursion."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > limit:
                return True
            stack.extend((v, depth + 1) for v in (value.values() if isinstance(value, dict) else value))
    return False


def read_plan_file(path: Path, *, key: bytes | None, strict: bool = True) -> SavedPlan:
    """Read a plan file and check its seals: its digest always, its HMAC under `key` (INFRA_PLAN_KEY; a file
    without one is refused while a key is set). A signed file read without a key is refused when `strict`
    (apply), and read with a warning otherwise (show)."""
    def bad(message: str, hint: str = says("create a fresh one with ", PLAN_OUT),
            rule: str = "planfile.invalid") -> DiagnosticError:
        return DiagnosticError([Diagnostic("error", rule, message, str(path), None, None, hint)])

    try:
        if Path(path).stat().st_size > MAX_PLAN_BYTES:
            raise bad(f"not an infra plan file: larger than {MAX_PLAN_BYTES >> 20} MiB")
        raw = path.read_bytes()
        if raw.startswith(ZIP_MAGIC):
            raise bad("not an infra plan file: a zip archive, as Terraform writes its plans",
                      says("`terraform show` reads Terraform's plans; infra's are written by ", PLAN_OUT))
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError) as exc:   # RecursionError: nested past the parser's depth
        raise bad(f"cannot read plan file: {exc}") from None
    if _depth_over(data, MAX_PLAN_DEPTH):   # before anything walks it recursively (the seals' canonical JSON)
        raise bad(f"not an infra plan file: nested more than {MAX_PLAN_DEPTH} levels deep")
    if isinstance(data, dict) and "kind" not in data and "resource_changes" in data:
        raise bad(says("not an infra plan file: this is the JSON ", NextStep(("infra", "plan"), ("--json",)),
                       " prints, which apply cannot use"), says("save a plan with ", PLAN_OUT))
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise bad("not an infra plan file")
    if data.get("format_version") != FORMAT_VERSION:
        raise bad(f"plan file format {data.get('format_version')} is not {FORMAT_VERSION}")
    warnings = _check_seals(data, key, strict, bad, str(path))
    try:
        plan = Plan(
            stack=data["stack"], mode=data["mode"],
            resource_changes=[ResourceChange.from_json(c) for c in data["resource_changes"]],
            smoke_jobs=list(data.get("smoke_jobs") or []),
            diagnostics=[Diagnostic(**d) for d in data.get("diagnostics") or []],   # typed from here on
            live_fingerprint=data["live_fingerprint"],
            desired=[Resource.from_json(r) for r in data.get("desired") or []],
            smoke_reasons={k: v for k, v in (data.get("smoke_reasons") or {}).items() if v},
            drift=[ResourceChange.from_json(c) for c in data.get("resource_drift") or []],
            workspace=_workspace(data["workspace"]), state=StateSerial.from_json(data["state"]),
            configuration=configuration if isinstance(configuration := data.get("configuration"), dict) else {},
        )
        for change in plan.resource_changes + plan.drift:
            change.action   # an action list infra does not know is a ValueError here, not in show or apply
        _check_shapes(plan)
        if not all(isinstance(v, str) for v in [plan.stack, *plan.smoke_jobs, *saved_targets(data)]):
            raise TypeError("the stack's name, smoke jobs and targets are strings")
        recorded = data.get("variables") or {}
        if not isinstance(recorded, dict) or not all(isinstance(v, dict) for v in recorded.values()):
            raise TypeError("variables is a mapping of names to {value} or {sensitive, digest}")
        replace = data.get("replace") or []
        if not isinstance(replace, list) or not _strings(replace):
            raise TypeError("replace is a list of addresses")
        for address in (*saved_targets(data), *replace):   # as `infra plan` read them: a ValueError names the grammar
            parse_address(address, EVERY_KIND)
        local = data.get("local", False)
        if not isinstance(local, bool):
            raise TypeError("local is true or false")
        salt = data.get("secret_salt", "")
        if not isinstance(salt, str):
            raise TypeError("secret_salt is a string")
        keyed_elsewhere = key is None and data.get("hmac") is not None   # read unchecked (show): no key to seal with
        return SavedPlan(plan, Path(data["stack_path"]), saved_targets(data), warnings, recorded, str(path), replace,
                         local, None if keyed_elsewhere else secret_seal(key, salt))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise bad(f"plan file is missing {exc}" if isinstance(exc, KeyError) else f"plan file is malformed: {exc}") from None


def _workspace(data) -> dict[str, str]:
    if not (isinstance(data, dict) and set(data) == set(WORKSPACE_IDENTITY) and _strings(data.values())):
        raise TypeError(f"workspace is a mapping of {', '.join(WORKSPACE_IDENTITY)} to strings")
    return dict(data)


def _strings(values) -> bool:
    return all(isinstance(v, str) for v in values)


def _check_shapes(plan: Plan) -> None:
    """Each field of a read plan of the type infra writes (a TypeError naming it otherwise), and so everything
    show draws of it (commands/views/plan.py) and apply reads: an edited file whose digest was recomputed must be
    refused here, not fail later in show or apply."""
    for c in plan.resource_changes + plan.drift:
        where = c.address if isinstance(c.address, str) else "a change"
        if not _strings((c.address, c.type, c.name, *c.actions)):
            raise TypeError(f"{where}: its address, type, name and actions are strings")
        if not all(side is None or isinstance(side, dict) for side in (c.before, c.after)):
            raise TypeError(f"{where}: its before and after are mappings or null")
        if not all(_strings(p) for p in (*c.replace_paths, *c.sensitive)):
            raise TypeError(f"{where}: its replace_paths and sensitive_paths are lists of strings")
        if not all(c.replace_paths):   # show marks the attribute each one starts with
            raise TypeError(f"{where}: each of its replace_paths names an attribute")
        if not (c.action_reason is None or isinstance(c.action_reason, str)):
            raise TypeError(f"{where}: its action_reason is a string or null")
    for r in plan.desired:
        if not (_strings((r.address, r.type, r.name, *r.depends_on)) and isinstance(r.attributes, dict)
                and isinstance(r.tags, dict) and _strings(r.tags.values())):
            raise TypeError("a desired resource's address, type, name and depends_on are strings, its attributes "
                            "and tags mappings")
    if not _strings(plan.smoke_reasons.values()):
        raise TypeError("smoke_reasons: each reason is a string")
    costs_json(plan.resource_changes)   # the cost show and plan --json print: a size or count it cannot price
    for diagnostic in plan.diagnostics:   # show prints them
        if not _strings((diagnostic.severity, diagnostic.rule, diagnostic.message)) or not all(
                v is None or isinstance(v, t) and not isinstance(v, bool) for v, t in (
                    (diagnostic.file, str), (diagnostic.line, int), (diagnostic.column, int), (diagnostic.hint, str))):
            raise TypeError("a diagnostic's severity, rule and message are strings, its file, line, column and "
                            "hint strings, whole numbers or null")


def saved_targets(data: dict) -> list:
    targets = data.get("targets") or []
    if not isinstance(targets, list):
        raise TypeError("targets is not a list")
    return targets


def _check_seals(data: dict, key: bytes | None, strict: bool, bad, file: str) -> list[Diagnostic]:
    """Refuse a file whose digest or HMAC does not match its content; the warnings of a file read unchecked."""
    digest, seal = data.get("digest"), data.get("hmac")
    if not isinstance(digest, str) or not digest.startswith(_DIGEST):
        raise bad(says("the plan file carries no digest of its content: it was not written by this version of ",
                       NextStep(("infra", "plan")), ", or its digest was removed"), REPLAN_HINT, "planfile.changed")
    if not hmac.compare_digest(digest.encode(), content_digest(data).encode()):
        raise bad("the plan file was changed after infra plan wrote it: its content no longer matches its sha256 "
                  "digest", REPLAN_HINT + " (a plan file is applied only as plan wrote it)", "planfile.changed")
    if key is not None:
        if seal is None:
            raise bad(says(f"{PLAN_KEY_ENV} is set, but the plan file carries no HMAC: ", NextStep(("infra", "plan")),
                           f" wrote it without {PLAN_KEY_ENV} set (or its HMAC was removed)"),
                      says("run ", PLAN_OUT, f" with the same {PLAN_KEY_ENV} set"), "planfile.unsigned")
        if not isinstance(seal, str) or not hmac.compare_digest(seal.encode(), content_hmac(data, key).encode()):
            raise bad(says(f"the plan file's HMAC does not match {PLAN_KEY_ENV}: it was changed after ",
                           NextStep(("infra", "plan")), " wrote it, or signed with another key"),
                      REPLAN_HINT + f", with this {PLAN_KEY_ENV} set", "planfile.changed")
        return []
    if seal is not None:
        message = f"the plan file is signed (HMAC-SHA256), but {PLAN_KEY_ENV} is not set, so its signature "
        if strict:
            raise bad(message + "cannot be checked",
                      says(f"set {PLAN_KEY_ENV} to the key ", NextStep(("infra", "plan")), " signed it with"),
                      "planfile.unsigned")
        return [Diagnostic("warning", "planfile.unverified", message + "was not checked", file, None, None,
                           f"set {PLAN_KEY_ENV} to check it; apply refuses it without")]
    return []


def replan_step(saved: SavedPlan, path: Path | str) -> NextStep:
    """The `infra plan` that makes this plan again, now: its stack, mode, targets, the variable values it was made
    with (without them a `${var.env}` workspace is another one) and file (a view adds --local where the run is
    local)."""
    mode = {PlanMode.DESTROY: ("--destroy",), PlanMode.REFRESH_ONLY: ("--refresh-only",)}.get(saved.plan.mode, ())
    targets = [w for t in saved.targets for w in ("--target", t)] + [w for a in saved.replace for w in ("--replace", a)]
    return NextStep(("infra", "plan"), (str(saved.stack_path), *mode, *targets, *command_words(saved.variables),
                                        "--out", str(path)))


def replan_command(saved: SavedPlan, path: Path | str) -> str:
    """replan_step's command line, as written."""
    return words(replan_step(saved, path))


def other_workspace(saved: SavedPlan, loaded: LoadedStack, path: Path | str) -> Diagnostic | None:
    """An error when the stack now names another workspace than the one the plan was made for (a `${VAR}` in the
    workspace set otherwise, or the stack edited): the plan read that workspace, and must not write this one."""
    now = workspace_identity(loaded.stack.workspace)
    if same_workspace(saved.plan.workspace, now):
        return None
    return Diagnostic("error", "planfile.other-workspace", f"Saved plan is for another workspace: it was made for "
                      f"{describe_workspace(saved.plan.workspace)}, but the stack {saved.stack_path} now names "
                      f"{describe_workspace(now)}", str(path), None, None,
                      says(f"apply it where it was made (the stack naming {describe_workspace(saved.plan.workspace)}), "
                           "or make a plan for this workspace with ", replan_step(saved, path), " and apply that file"))


def current_against_stack(saved: SavedPlan, path: Path) -> Diagnostic | None:
    """Whether the stack the plan came from still asks for what was planned, offline (apply checks the live
    state too): an error when it does not or names another workspace (apply would refuse the plan), a warning
    when this cannot be told here (the stack file is gone or does not load, e.g. its ${VAR}s are unset), None
    when it does. The state's serial is not read here (offline): apply checks it under the lock."""
    if saved.seal is None:
        return Diagnostic("warning", "planfile.unchecked", f"cannot tell whether this plan is still current: its "
                          f"secrets are kept as digests keyed with {PLAN_KEY_ENV}, which is not set here", str(path),
                          None, None, f"set {PLAN_KEY_ENV} to check it; apply checks it again, with the stack and the "
                          "live state")
    try:
        loaded = load_planned_stack(saved)
        changed = stack_changed_since(saved, loaded)
    except (DiagnosticError, OSError) as exc:
        first = getattr(exc, "diagnostics", None)
        why = first[0].message if first else (getattr(exc, "strerror", None) or "it does not load")
        return Diagnostic("warning", "planfile.unchecked", f"cannot tell whether this plan is still current: the "
                          f"stack {saved.stack_path} does not load here ({why})", str(path), None, None,
                          "apply checks it again, with the stack and the live state")
    elsewhere = other_workspace(saved, loaded, path)
    if elsewhere is not None:
        return elsewhere
    if changed:
        return Diagnostic("error", "planfile.stale", says(f"the plan is stale: the stack file {saved.stack_path} "
                                                          "changed since it was made, so ", NextStep(("infra", "apply")), " would refuse it"), str(path),
                          None, None, says("make a fresh plan with ", replan_step(saved, path)))
    return None


def binding_note(saved: SavedPlan, path: Path) -> Diagnostic:
    """What `infra show` says of a plan it could not refuse offline: where and when it was made, and that its
    state's serial is checked by apply (under the lock), not here."""
    return Diagnostic("info", "show.plan-bound", says(f"this plan was made for {describe_workspace(saved.plan.workspace)} "
                      f"against the stack's state at {saved.plan.state.describe()}; ", NextStep(("infra", "apply")),
                           " refuses it as stale if the state has moved on since (checked under the stack's lock at "
                           "apply, not offline)"),
                      str(path))


def load_planned_stack(saved: SavedPlan) -> LoadedStack:
    """The stack a saved plan came from, as it is now (the rules the plan judged live are not judged again)."""
    inputs = Inputs(recorded=saved.variables, plan_file=saved.file, seal=saved.seal)  # the plan's, never this run's
    return load_valid_stack(saved.stack_path, judged_live=LIVE_JUDGED_RULES, inputs=inputs)[0]


def stack_changed_since(saved: SavedPlan, loaded: LoadedStack) -> bool:
    """Whether the stack now asks for other resources than the saved plan planned."""
    if saved.seal is None:   # keyed with INFRA_PLAN_KEY, which this reader lacks (current_against_stack says so)
        return True
    now = sealed(desired_json(desired_resources(loaded), saved.plan.resource_changes), saved.seal)   # as the file
    return canonical_json(now) != canonical_json([r.to_json() for r in saved.plan.desired])


def saved_stack_path(path: Path) -> Path | None:
    """The stack file a plan file names, read without checking its seals: only to find the project whose local
    cloud `--local` uses (read_plan_file checks the seals before anything is read from that cloud). None for a
    file that is not a plan file."""
    try:
        if Path(path).stat().st_size > MAX_PLAN_BYTES:
            return None
        data = json.loads(Path(path).read_bytes().decode("utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    stack_path = data.get("stack_path") if isinstance(data, dict) else None
    return Path(stack_path) if isinstance(stack_path, str) and "\0" not in stack_path else None
