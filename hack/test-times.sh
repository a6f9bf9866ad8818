#!/usr/bin/env bash
# Prints the time of each top-level test, slowest first, and of each package,
# from the verbose go test logs given (make test calls it at the end), so that
# a suite that grows past CI's budget shows where.
set -euo pipefail
printf '\ntest times, slowest first (from %s):\n' "$(printf '%s ' "${@##*/}")"
for log in "$@"; do
  [ -f "$log" ] || continue
  suite=$(basename "$log" .log)
  # Top-level tests only: go test indents subtests. A test that waited for a
  # slot (test/slots: every end-to-end test, and the envtests that run hosted
  # API servers) counts the wait in its time: it is taken off.
  {
    sed -nE 's/.*slots\.go:[0-9]+: ([^ ]+) waited ([0-9]+) s for .*/wait \1 \2/p' "$log"
    sed -nE 's/^--- (PASS|FAIL|SKIP): ([^ ]+) \(([0-9.]+)s\)$/\3 \1 \2/p' "$log"
  } | awk -v s="$suite" '$1 == "wait" { wait[$2] = $3; next } {printf "%10.1fs  %-4s %-17s %s\n", $1 - wait[$3], $2, s, $3}'
done | sort -rn | awk 'NR <= 40' # not head: its early exit fails the pipeline (SIGPIPE, exit 141) under pipefail
printf '\npackage times:\n'
for log in "$@"; do
  [ -f "$log" ] || continue
  sed -nE 's/^(ok|FAIL)[[:space:]]+([^[:space:]]+)[[:space:]]+([0-9.]+)s.*/\3 \1 \2/p' "$log" | awk '{printf "%10.1fs  %-4s %s\n", $1, $2, $3}'
done | sort -rn
