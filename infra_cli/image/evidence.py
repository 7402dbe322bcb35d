"""Evidence profiles (validators/image_evidence.yaml, compiled by knowledge/image_evidence.py) judged against
a merged view.

A profile (openmpi, mpi, ibverbs, ...) is met when one of its variants is: every `all` rule FOUND, no
`none` rule FOUND. Versions come from ranked sources; a version is final once every higher-ranked source is
closed (its fixed path decided, or every layer read), so early exit never reports a version a lower layer
would have overruled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from infra_cli.image.layers import Candidate, LayerIndex, Matcher
from infra_cli.image.merged_filesystem import MergedView, State
from infra_cli.knowledge.image_evidence import Extractor, Profile, Rule, Variant, VersionSource, compiled, glob_regex

def build_matcher(profiles: Iterable[Profile], extra: Iterable[tuple[str, Extractor]] = ()) -> Matcher:
    """One function the layer walker calls per entry: which extractors (if any) apply to a path.

    `extra`: (GLOB, extractor) pairs read beside the profiles' (the image's os-release, image/fix.py).
    Called for every entry of every layer, so it rejects most paths with one regex over the basename
    (every glob ends in a basename pattern); only the few that pass are matched against whole globs.
    """
    globs: list[str] = []
    content: list[tuple[re.Pattern, Extractor]] = []
    content_globs: list[str] = []
    for p in profiles:
        for v in p.variants:
            globs.extend(g for r in (*v.all, *v.none, *v.optional) for g in r.globs)
            for s in v.versions:
                if s.extractor:
                    content.append((s.regex, s.extractor))
                    content_globs.append(s.glob)
                else:
                    globs.append(s.glob)
    for glob, extractor in extra:
        content.append((compiled(glob_regex(glob)), extractor))
        content_globs.append(glob)
    full = [compiled(glob_regex(g)) for g in globs] + [rx for rx, _ in content]
    basenames = {glob_regex("/" + g.rsplit("/", 1)[-1])[1:] for g in globs + content_globs}
    prefilter = re.compile("|".join(f"(?:{b})" for b in sorted(basenames)) or "(?!)")
    whole = re.compile("|".join(f"(?:{r.pattern})" for r in full) or "(?!)")

    def match(path: str):
        if not prefilter.fullmatch(path, path.rfind("/") + 1) or not whole.match(path):
            return None
        return tuple({e.id: e for rx, e in content if rx.match(path)}.values())

    return match


# ---- judging -------------------------------------------------------------------------------------------

@dataclass
class RuleFinding:
    rule: str
    state: State
    evidence: list[dict] = field(default_factory=list)   # {path, layer, kind, via}

    def to_json(self) -> dict:
        return {"rule": self.rule, "state": self.state.value, "evidence": self.evidence}


@dataclass
class VariantFinding:
    profile: str
    variant: str
    state: State
    rules: list[RuleFinding]
    version: str | None = None
    version_source: dict | None = None
    version_decided: bool = True
    optional: list[RuleFinding] = field(default_factory=list)

    @property
    def decided(self) -> bool:
        return self.state is State.ABSENT or (self.state is State.FOUND and self.version_decided)

    def to_json(self) -> dict:
        return {"profile": self.profile, "variant": self.variant, "state": self.state.value,
                "version": self.version, "version_source": self.version_source,
                "rules": [r.to_json() for r in self.rules], "optional": [r.to_json() for r in self.optional]}


@dataclass(frozen=True)
class ImageEnv:
    path: tuple[str, ...]
    library_path: tuple[str, ...]


def _candidates(view: MergedView, regex: "re.Pattern[str]") -> Iterable[tuple[LayerIndex, Candidate]]:
    for layer in view.layers:
        for path, cand in layer.candidates.items():
            if regex.match(path):
                yield layer, cand


def _judge_files(view: MergedView, rule: Rule, env: ImageEnv) -> RuleFinding:
    found: list[dict[str, Any]] = []
    unknown = False
    for layer, cand in _candidates(view, rule.regex):
        if view.visible(layer, cand.path) is not State.FOUND:
            continue
        via = None
        if cand.kind == "symlink":               # a dangling link proves nothing
            hit, chain = view.resolve(cand.path)
            if hit.state is State.UNKNOWN:
                unknown = True
            if hit.state is not State.FOUND or hit.kind == "dir":
                continue
            via = chain
        item: dict[str, Any] = {"rule": rule.label, "path": cand.path, "layer": layer.number, "kind": cand.kind}
        if via:
            item["via"] = via
        if rule.on_library_path:
            item["on_library_path"] = cand.path.rpartition("/")[0] in env.library_path
        found.append(item)
    state = State.FOUND if found else State.UNKNOWN if (unknown or not view.complete) else State.ABSENT
    # real files before the links to them, upper layers first
    return RuleFinding(rule.label, state, sorted(found, key=lambda e: (e["kind"] == "symlink", -e["layer"], e["path"]))[:8])


def _judge_on_path(view: MergedView, rule: Rule, env: ImageEnv) -> RuleFinding:
    unknown = False
    for name in rule.on_path:
        for directory in env.path:
            hit, chain = view.resolve(f"{directory.rstrip('/')}/{name}")
            if hit.state is State.FOUND and hit.kind != "dir":
                item: dict[str, Any] = {"rule": rule.label, "path": chain[0],
                                        "layer": hit.layer.number if hit.layer else None, "kind": hit.kind}
                if len(chain) > 1:
                    item["via"] = chain
                return RuleFinding(rule.label, State.FOUND, [item])
            unknown |= hit.state is State.UNKNOWN
    return RuleFinding(rule.label, State.UNKNOWN if unknown else State.ABSENT)


def judge_rule(view: MergedView, rule: Rule, env: ImageEnv) -> RuleFinding:
    return (_judge_on_path if rule.on_path else _judge_files)(view, rule, env)


def _version_from(view: MergedView, source: VersionSource) -> tuple[str, str] | None:
    for layer, cand in sorted(_candidates(view, source.regex), key=lambda lc: lc[1].path):
        if view.visible(layer, cand.path) is not State.FOUND:
            continue
        text = None
        if source.extractor is not None:
            text = cand.captures.get(source.extractor.id)
        else:
            assert source.path_pattern is not None   # knowledge/image_evidence.py: exactly one of the two is set
            for subject in (cand.path, cand.link or ""):
                m = source.path_pattern.search(subject)
                if m:
                    text = ".".join(g for g in m.groups() if g)
                    break
            if text is not None and source.mapping:
                text = dict(source.mapping).get(text)
        if text:
            return text, cand.path
    return None


def _closed(view: MergedView, source: VersionSource) -> bool:
    if view.complete:
        return True
    return source.fixed_path is not None and view.entry(source.fixed_path).state is not State.UNKNOWN


def judge_version(view: MergedView, variant: Variant) -> tuple[str | None, dict | None, bool]:
    """(version, {source, path}, decided)."""
    all_closed_above = True
    for source in variant.versions:
        got = _version_from(view, source)
        if got:
            return got[0], {"source": source.id, "path": got[1]}, all_closed_above
        all_closed_above = all_closed_above and _closed(view, source)
    return None, None, all_closed_above


def _combine_all(states: list[State]) -> State:
    if any(s is State.ABSENT for s in states):
        return State.ABSENT
    return State.UNKNOWN if any(s is State.UNKNOWN for s in states) else State.FOUND


def judge_variant(view: MergedView, profile: Profile, variant: Variant, env: ImageEnv) -> VariantFinding:
    rules = [judge_rule(view, r, env) for r in variant.all]
    excluded = [judge_rule(view, r, env) for r in variant.none]
    negated = [{State.FOUND: State.ABSENT, State.ABSENT: State.FOUND}.get(r.state, State.UNKNOWN) for r in excluded]
    state = _combine_all([r.state for r in rules] + negated)
    finding = VariantFinding(profile.name, variant.name, state, rules + [r for r in excluded if r.state is State.FOUND])
    if state is not State.ABSENT:
        finding.version, finding.version_source, finding.version_decided = judge_version(view, variant)
        finding.optional = [judge_rule(view, r, env) for r in variant.optional]
    return finding


def judge_profile(view: MergedView, profile: Profile, env: ImageEnv) -> list[VariantFinding]:
    return [judge_variant(view, profile, v, env) for v in profile.variants]
