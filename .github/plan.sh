#!/usr/bin/env bash
# action.yml's plan step (`command: plan`), also run by tests/test_action_plan_mode.py as the runner runs it, on the
# installed package. Inputs come as INFRA_* environment variables, never spliced into this text. Runs
#   infra plan STACK --detailed-exitcode --markdown --out PLANFILE [--var-file F]... [--policy P]... [--local] [--refresh-only]
# writes the Markdown plan to the job summary (GITHUB_STEP_SUMMARY) and to INFRA_MARKDOWN_FILE, sets the outputs
# exitcode (0 no changes, 2 changes, 1 error), plan (the saved plan file) and markdown, and fails the step on an error
# (a policy's deny included); changes alone do not fail it.
set -uo pipefail
stack="${INFRA_STACK:?the plan command needs a stack: set the stack input}"
plan_file="${INFRA_PLAN_FILE:-infra.plan}"
markdown="${INFRA_MARKDOWN_FILE:-infra-plan.md}"
case "$plan_file$markdown" in *$'\n'*|*$'\r'*) echo "::error::plan-file names one file, on one line"; exit 1 ;; esac
args=(plan "$stack" --detailed-exitcode --markdown --out "$plan_file")
trimmed() { local s="$1"; s="${s#"${s%%[![:space:]]*}"}"; printf '%s' "${s%"${s##*[![:space:]]}"}"; }
while IFS= read -r line; do
  line=$(trimmed "$line"); [ -n "$line" ] && args+=(--var-file "$line")
done <<< "${INFRA_VAR_FILES:-}"
while IFS= read -r line; do
  line=$(trimmed "$line"); [ -n "$line" ] && args+=(--policy "$line")
done <<< "${INFRA_POLICY:-}"
case "${INFRA_LOCAL:-false}" in true) args+=(--local) ;; false|"") ;; *) echo "::error::local must be true or false"; exit 1 ;; esac
case "${INFRA_REFRESH_ONLY:-false}" in true) args+=(--refresh-only) ;; false|"") ;; *) echo "::error::refresh-only must be true or false"; exit 1 ;; esac
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rm -f "$plan_file"
infra "${args[@]}" > "$markdown" 2> "$log"
status=$?
cat "$log" >&2      # infra's diagnostics, in the step's log
cat "$markdown"     # and the plan
if [ -n "${GITHUB_OUTPUT:-}" ]; then
  echo "exitcode=$status" >> "$GITHUB_OUTPUT"
  echo "markdown=$markdown" >> "$GITHUB_OUTPUT"
  [ "$status" != 1 ] && [ -f "$plan_file" ] && echo "plan=$plan_file" >> "$GITHUB_OUTPUT"
fi
if [ ! -s "$markdown" ]; then   # infra stopped before a plan (a stack that does not validate): what it said
  shown=$(printf '%s' "$stack" | tr -d '\140\n\r<>&|*_[]')   # no backquote, line break or Markdown in the title
  {
    printf '### infra plan: <code>%s</code> could not be planned\n\n' "$shown"
    sed 's/^/    /' "$log"   # an indented code block: what infra said is shown, never read as Markdown
  } > "$markdown"
fi
[ -n "${GITHUB_STEP_SUMMARY:-}" ] && { cat "$markdown"; echo; } >> "$GITHUB_STEP_SUMMARY"
if [ "$status" = 1 ]; then
  echo "::error::infra plan found errors (a policy's deny counts as one): see the plan above"
  exit 1
fi
exit 0
