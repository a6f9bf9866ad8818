#!/usr/bin/env bash
# Prints the time of each top-level test, slowest first, and of each package,
# from the verbose go test logs given (make test calls it at the end), so that
# a suite that grows past CI's budget shows where.
set -euo pipefail
printf '\ntest times, slowest first (from %s):\n' "$(printf '%s ' "${@##*/}")"
for log in "$@"; do
  [ -f "$log" ] || continue
  suite=$(basename "$log" .log)
  # Top-level tests only: go test indents subtests.
  sed -nE 's/^--- (PASS|FAIL|SKIP): ([^ ]+) \(([0-9.]+)s\)$/\3 \1 \2/p' "$log" | awk -v s="$suite" '{printf "%10.1fs  %-4s %-17s %s\n", $1, $2, s, $3}'
done | sort -rn | head -40
printf '\npackage times:\n'
for log in "$@"; do
  [ -f "$log" ] || continue
  sed -nE 's/^(ok|FAIL)[[:space:]]+([^[:space:]]+)[[:space:]]+([0-9.]+)s.*/\3 \1 \2/p' "$log" | awk '{printf "%10.1fs  %-4s %s\n", $1, $2, $3}'
done | sort -rn
