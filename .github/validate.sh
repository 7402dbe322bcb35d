#!/usr/bin/env bash
# action.yml's validate step (`command: validate`): `infra validate STACK... [--var-file F]...`, offline. Inputs come
# as INFRA_* environment variables (stack: one or more stack files, one a line). Sets the output exitcode (0 valid,
# 1 errors), writes the diagnostics to the job summary, fails the step on errors.
set -uo pipefail
args=(validate)
stacks=0
trimmed() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; printf '%s' "${s%"${s##*[![:space:]]}"}"; }
while IFS= read -r line; do
  line=$(trimmed "$line"); [ -n "$line" ] && { args+=("$line"); stacks=$((stacks + 1)); }
done <<< "${INFRA_STACK:-}"
[ "$stacks" -gt 0 ] || { echo "::error::the validate command needs a stack: set the action's stack input"; exit 1; }
while IFS= read -r line; do
  line=$(trimmed "$line"); [ -n "$line" ] && args+=(--var-file "$line")
done <<< "${INFRA_VAR_FILES:-}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
infra "${args[@]}" > "$log" 2>&1
status=$?
cat "$log"
[ -n "${GITHUB_OUTPUT:-}" ] && echo "exitcode=$status" >> "$GITHUB_OUTPUT"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  {
    if [ "$status" = 0 ]; then printf '### infra validate: valid\n\n'; else printf '### infra validate: errors\n\n'; fi
    sed 's/^/    /' "$log"   # an indented code block: what infra said is shown, never read as Markdown
    echo
  } >> "$GITHUB_STEP_SUMMARY"
fi
exit "$status"
