"""Rules over the stack's resources as a whole: names Azure accepts, outputs, import blocks, tags, and (for
clusters and environments) a pasted Azure ML YAML's `name:` equal to its key."""

from __future__ import annotations

from typing import Iterator

from infra_cli.arguments import NextStep
from infra_cli.diagnostics import Diagnostic, says
from infra_cli.knowledge.names import name_rules, tag_limits
from infra_cli.stack.addresses import RULE as ADDRESS_RULE, AddressError, check_name, example_name
from infra_cli.stack.outputs import check_outputs
from infra_cli.validate.rules.registry import Context, RuleInfo, declare, rule


def _name_rules() -> list[RuleInfo]:
    """The names' rules, one a row of validators/names.yaml (users add rows without code; read as the file is now,
    so they are not declared once for the process)."""
    return [RuleInfo(r.rule_id, "error", f"a name Azure refuses: {r.what}") for r in name_rules()]


OUTPUT_RULES = (
    declare("output.sensitive", "error", "an output refers to a sensitive value without `sensitive: true`"),
    declare("output.no-reference", "error", "an output's value refers to no resource attribute"),
    declare("output.reference", "error", "an output's reference is not a resource attribute"),
    declare("output.unknown-address", "error", "an output refers to a resource the stack does not declare"),
    declare("output.unknown-attribute", "error", "an output refers to an attribute its resource type does not have"),
)


@rule(read=_name_rules)
def resource_names(ctx: Context) -> Iterator[Diagnostic]:
    """Names Azure would refuse (validators/names.yaml), matched whole: `rg/../x`, `../../etc` and a name
    with a trailing newline never reach a URL or a path."""
    for r in name_rules():
        for name, path, is_key in r.names_in(ctx.stack):
            if not r.pattern.fullmatch(name):
                yield ctx.at(path, r.rule_id, f"{r.what} {name!r} is not a name Azure accepts",
                             f"use {r.rule} ({r.source})", key=is_key)


@rule(*OUTPUT_RULES)
def output_references(ctx: Context) -> Iterator[Diagnostic]:
    """Each output refers to an address the stack declares and an attribute its type has (stack/outputs.py)."""
    yield from check_outputs(ctx.stack, ctx.loaded.source)


ADDRESS_INVALID = declare(ADDRESS_RULE, "error", "an import block's id is not a name the address grammar takes")
IMPORT_NAME_MISMATCH = declare("import.name-mismatch", "error",
                               "an import block's `to:` name differs from the resource's name in Azure")
IMPORT_DUPLICATE = declare("import.duplicate", "error", "the same address is imported twice")
IMPORT_CURATED = declare("import.curated", "error", "an import block names a curated environment (only read)")
IMPORT_UNDECLARED_RULE = declare("import.undeclared", "error",
                                 "an import block names a cluster or environment the stack does not declare")
IMPORT_UNDECLARED = IMPORT_UNDECLARED_RULE.id  # plan --generate-config-out writes the declaration instead


@rule(ADDRESS_INVALID, IMPORT_NAME_MISMATCH, IMPORT_DUPLICATE, IMPORT_CURATED, IMPORT_UNDECLARED_RULE)
def import_blocks(ctx: Context) -> Iterator[Diagnostic]:
    """An import block names a cluster or environment of the stack under its Azure name, once."""
    seen: set[str] = set()
    for i, block in enumerate(ctx.stack.imports):
        kind, _, name = block.to.partition(".")
        section = f"{kind}s"
        try:   # the address grammar's rule for the name (stack/addresses.py)
            check_name(kind, block.id, what="id")
        except AddressError as exc:
            example = example_name(kind)
            yield ctx.at(("import", i, "id"), ADDRESS_RULE, f"import of {block.to}: {exc.message}",
                         f"write the {kind}'s name in the workspace, for example `{{to: {kind}.{example}, id: {example}}}`")
            continue
        if block.id != name:
            yield ctx.at(("import", i, "id"), IMPORT_NAME_MISMATCH.id,
                         f"import of {block.to}: Azure's {kind} is {block.id!r}, but the stack would call it {name!r}; "
                         f"Azure ML cannot rename a {kind}, so infra names it by its Azure name",
                         f"write `to: {kind}.{block.id}` (and declare {section}.{block.id})")
        if block.to in seen:
            yield ctx.at(("import", i, "to"), IMPORT_DUPLICATE.id, f"{block.to} is imported twice",
                         "keep one import block for it")
        seen.add(block.to)
        declared = getattr(ctx.stack, section).get(name)
        if kind == "environment" and declared is not None and declared.curated:
            yield ctx.at(("import", i, "to"), IMPORT_CURATED.id,
                         f"{block.to} is a curated environment: infra only reads it, there is nothing to import",
                         "remove the import block")
        if declared is None:
            yield ctx.at(("import", i, "to"), IMPORT_UNDECLARED,
                         f"import of {block.to}: the stack declares no {section}.{name}",
                         says("declare it, or let ", NextStep(("infra", "plan"), (ctx.loaded.file,
                                                                               "--generate-config-out", "FILE")),
                              " write its declaration from Azure and merge FILE into the stack"))


TAGS_COUNT = declare("tags.count", "error", "a resource has more tags than Azure allows beside infra's own")
TAGS_NAME = declare("tags.name", "error", "a tag name is empty, too long or has a character Azure refuses")
TAGS_RESERVED = declare("tags.reserved", "error", "a tag name starts with infra's reserved prefix")
TAGS_VALUE = declare("tags.value", "error", "a tag value is longer than Azure allows")


@rule(TAGS_COUNT, TAGS_NAME, TAGS_RESERVED, TAGS_VALUE)
def tags(ctx: Context) -> Iterator[Diagnostic]:
    """Azure Resource Manager's tag limits (validators/names.yaml), counting the tags infra adds itself."""
    limits = tag_limits()
    room = limits.max_tags - limits.infra_tags
    for section in ("clusters", "environments"):
        for name, resource in getattr(ctx.stack, section).items():
            path = (section, name, "tags")
            if len(resource.tags) > room:
                yield ctx.at(path, TAGS_COUNT.id,
                             f"{section[:-1]} {name!r} has {len(resource.tags)} tags; Azure allows {limits.max_tags} "
                             f"per resource and infra adds up to {limits.infra_tags} of its own",
                             f"keep at most {room} tags ({limits.source})", key=True)
            for tag, value in resource.tags.items():
                bad = sorted(set(tag) & set(limits.name_forbidden_characters))
                if len(tag) > limits.max_name_length or bad or not tag.strip():
                    why = (f"is longer than {limits.max_name_length} characters" if len(tag) > limits.max_name_length
                           else f"contains {' '.join(bad)}" if bad else "is empty")
                    yield ctx.at(path + (tag,), TAGS_NAME.id, f"tag name {tag[:60]!r} {why}",
                                 f"tag names have 1-{limits.max_name_length} characters, none of "
                                 f"{' '.join(limits.name_forbidden_characters)} ({limits.source})", key=True)
                elif tag.lower().startswith(limits.reserved_prefix):
                    yield ctx.at(path + (tag,), TAGS_RESERVED.id, f"tag name {tag!r} is reserved for infra's own tags",
                                 f"choose a name that does not start with {limits.reserved_prefix!r}", key=True)
                if len(value) > limits.max_value_length:
                    yield ctx.at(path + (tag,), TAGS_VALUE.id,
                                 f"the value of tag {tag[:60]!r} has {len(value)} characters; Azure allows "
                                 f"{limits.max_value_length}", f"shorten it ({limits.source})")


def pasted_name(ctx: Context, section: str, key: str, written: str | None, what: str,
                 rule: str) -> Iterator[Diagnostic]:
    """A pasted Azure ML YAML's `name:` equals its key: one name per resource, the plan address (KIND.KEY) and
    the name in Azure ML."""
    if written is not None and written != key:
        kind = section[:-1]
        yield ctx.at((section, key, "name"), rule,
                     f"{kind} {key!r} says name: {written!r}; a pasted {what} YAML's name must equal its key under "
                     f"{section}:", f"rename the key to {written!r} or remove `name:`")
