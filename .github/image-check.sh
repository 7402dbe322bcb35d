#!/usr/bin/env bash
# The command line of action.yml's check step (also run by tests/test_ci_integrations.py as the runner runs it,
# on the installed package). Inputs come as INFRA_* environment variables; GITHUB_OUTPUT / GITHUB_STEP_SUMMARY
# are used when set. The log shows infra's own verdict (each requirement, what was found, where); the JSON goes
# to the output file; the job summary names each requirement not met.
set -uo pipefail
args=(image check "${INFRA_IMAGE:?the action needs an image}")
while IFS= read -r spec; do
  spec="${spec#"${spec%%[![:space:]]*}"}"; spec="${spec%"${spec##*[![:space:]]}"}"
  [ -n "$spec" ] && args+=(--require "$spec")
done <<< "${INFRA_REQUIRE:-openmpi}"
[ -n "${INFRA_PLATFORM:-}" ] && args+=(--platform "$INFRA_PLATFORM")
[ -n "${INFRA_TIMEOUT:-}" ] && args+=(--timeout "$INFRA_TIMEOUT")
out="${INFRA_JSON_OUTPUT:-image-check.json}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
infra "${args[@]}" --json-out "$out" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[ -n "${GITHUB_OUTPUT:-}" ] && echo "json=$out" >> "$GITHUB_OUTPUT"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  case $status in
    0) verdict="all requirements met" ;;
    1) verdict="requirements NOT met" ;;
    *) verdict="the image could not be read" ;;
  esac
  {
    printf '### infra image check: %s\n`%s`\n\n' "$verdict" "$INFRA_IMAGE"
    # each requirement not met, with its fix (base images, the install command for the image's distribution,
    # infra's template), from the JSON verdict; where python3 cannot read it, infra's verdict lines
    # ("  FAIL  REQUIREMENT  REASON", infra_cli/image/report.py)
    python3 - "$out" 2>/dev/null <<'PY' ||
import json, re, sys

def md(text):
    """Plain text in Markdown: what an image holds (versions, os-release) never becomes a link, image or HTML."""
    text = re.sub(r"[\x00-\x1f\x7f]", " ", str(text))
    return re.sub(r"([\\`*_{}\[\]<>()#+!|~&])", r"\\\1", text)

def code(text):
    return "<code>" + md(text) + "</code>"

verdict, out = json.load(open(sys.argv[1], encoding="utf-8")), []
print = out.append   # all or nothing: a verdict this cannot read leaves the summary to the log's lines
for r in verdict.get("requirements") or []:
    if r.get("met"):
        continue
    print(f"- not met: `{r['requirement']}`: {md(r['reason'])}")
    fix = r.get("fix") or {}
    if fix.get("install"):
        where = "install" if fix.get("install_family") == "any" else "on " + md(fix.get("distribution") or "")
        note = f" ({md(fix['install_note'])})" if fix.get("install_note") else ""
        print(f"  - fix: {where}: {code(fix['install'])}{note}")
    else:
        for how in (fix.get("install_by_family") or {}).values():
            note = f" ({md(how['note'])})" if how.get("note") else ""
            print(f"  - fix: on {md(how['name'])}: {code(how['run'])}{note}")
    notes = fix.get("base_image_notes") or {}
    for image in fix.get("base_images") or []:
        note = f" ({md(notes[image])})" if notes.get(image) else ""
        print(f"  - fix: build FROM {code(image)}{note}")
    if fix.get("template"):
        print(f"  - fix: infra's {code(fix['template'])} template (environment `build: {{template: ...}}`)")
sys.stdout.write("".join(line + "\n" for line in out))
PY
    sed -n 's/^  FAIL  \([^ ]*\) *\(.*\)$/- not met: `\1`: \2/p' "$log"
    printf '\n```\n'; cat "$log"; printf '```\n'
  } >> "$GITHUB_STEP_SUMMARY"
fi
exit "$status"
