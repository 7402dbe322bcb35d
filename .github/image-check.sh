#!/usr/bin/env bash
# The command line of action.yml's check step (also run by tests/test_ci_integrations.py as the action runs it).
# Inputs come as INFRA_* environment variables; GITHUB_OUTPUT / GITHUB_STEP_SUMMARY are used when set.
set -uo pipefail
args=(image check "${INFRA_IMAGE:?the action needs an image}" --json)
while IFS= read -r spec; do
  spec="${spec#"${spec%%[![:space:]]*}"}"; spec="${spec%"${spec##*[![:space:]]}"}"
  [ -n "$spec" ] && args+=(--require "$spec")
done <<< "${INFRA_REQUIRE:-openmpi}"
[ -n "${INFRA_PLATFORM:-}" ] && args+=(--platform "$INFRA_PLATFORM")
[ -n "${INFRA_TIMEOUT:-}" ] && args+=(--timeout "$INFRA_TIMEOUT")
out="${INFRA_JSON_OUTPUT:-image-check.json}"
infra "${args[@]}" > "$out"
status=$?
[ -n "${GITHUB_OUTPUT:-}" ] && echo "json=$out" >> "$GITHUB_OUTPUT"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  case $status in
    0) verdict="all requirements met" ;;
    1) verdict="requirements NOT met" ;;
    *) verdict="the image could not be read" ;;
  esac
  printf '### infra image check: %s\n`%s`\n' "$verdict" "$INFRA_IMAGE" >> "$GITHUB_STEP_SUMMARY"
fi
exit $status
