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
    # infra's verdict lines read "  FAIL  REQUIREMENT  REASON" (infra_cli/image/report.py)
    sed -n 's/^  FAIL  \([^ ]*\) *\(.*\)$/- not met: `\1`: \2/p' "$log"
    printf '\n```\n'; cat "$log"; printf '```\n'
  } >> "$GITHUB_STEP_SUMMARY"
fi
exit "$status"
