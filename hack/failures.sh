#!/usr/bin/env bash
# Prints, for each top-level test that failed in the verbose go test log
# given, the last lines its own code logged (file:line messages and what
# follows them, without klog's lines) and its FAIL line, then the log's FAIL
# and panic lines, so that the tail of a long output still shows why.
set -euo pipefail
log=$1
lines=${2:-60}
awk -v n="$lines" '
  /^=== (RUN|CONT|PAUSE|NAME) +/ { split($3, part, "/"); test = part[1]; next }
  /^ *[EIW][0-9][0-9][0-9][0-9] / { next }
  /^--- FAIL: / {
    name = $3
    printf "\n=== what %s logged last (up to %d lines):\n", name, n
    start = count[name] > n ? count[name] - n : 0
    for (i = start; i < count[name]; i++) print buf[name, i % n]
    print
    next
  }
  test != "" { buf[test, count[test] % n] = $0; count[test]++ }
' "$log"
grep -E '^(FAIL|panic:)' "$log" || true
