#!/usr/bin/env bash
# Prints, for each top-level test that failed in the verbose go test log
# given, the last lines its own code logged (file:line messages and what
# follows them, without klog's lines) and its FAIL line. Then, so that the
# tail of a long output still shows why, each failed test that has no
# failed subtest of its own (where the failure is) with the last lines it
# logged, the last its own code said (file_test.go:line messages, among
# them a t.Fatal's), its assertions' messages, and the log's FAIL and panic
# lines.
set -euo pipefail
log=$1
lines=${2:-60}
awk -v n="$lines" -v why=12 -v said=40 '
  /^=== (RUN|CONT|PAUSE|NAME) +/ { full = $3; split(full, part, "/"); test = part[1]; next }
  /^ *[EIW][0-9][0-9][0-9][0-9] / { next }
  /^ *--- FAIL: / {
    name = $3
    failed[++nfailed] = name
    result[name] = $0
    sub(/^ +/, "", result[name])
    if ($0 !~ /^--- /) next
    printf "\n=== what %s logged last (up to %d lines):\n", name, n
    start = count[name] > n ? count[name] - n : 0
    for (i = start; i < count[name]; i++) print buf[name, i % n]
    print
    next
  }
  /^ *--- (PASS|SKIP): / { next }
  test != "" {
    buf[test, count[test] % n] = $0; count[test]++
    # A testify assertion: its Error, Test and Messages lines and what
    # continues them (up to 20 lines), without the trace.
    if ($0 ~ /\tError Trace:\t/) { block[full] = "trace"; next }
    if (block[full] == "trace" && $0 ~ /\tError:/) block[full] = "error"
    if (block[full] != "" && $0 ~ /^ +\t/) {
      if (block[full] == "error" && asserted[full]++ < 20) assertion[full] = assertion[full] "\n" $0
      next
    }
    block[full] = ""
    own[full, owncount[full] % why] = $0; owncount[full]++
    # What the test said itself (t.Log, t.Fatal), apart: the logs of the
    # code under test, interleaved, must not push it out.
    if ($0 ~ /^ +[A-Za-z0-9_]+_test\.go:[0-9]+: /) { told[full, saidcount[full] % said] = substr($0, 1, 3000); saidcount[full]++ }
  }
  END {
    if (nfailed == 0) exit
    print "\n=== where it failed: each failed test without a failed subtest, its last lines and assertions"
    for (i = 1; i <= nfailed; i++) {
      name = failed[i]; leaf = 1
      for (j = 1; j <= nfailed; j++) if (index(failed[j], name "/") == 1) leaf = 0
      if (!leaf) continue
      print "\n" result[name]
      start = owncount[name] > why ? owncount[name] - why : 0
      for (k = start; k < owncount[name]; k++) print own[name, k % why]
      if (saidcount[name] > 0) print "  what the test said last:"
      start = saidcount[name] > said ? saidcount[name] - said : 0
      for (k = start; k < saidcount[name]; k++) print told[name, k % said]
      if (assertion[name] != "") print "  assertions:" assertion[name]
    }
  }
' "$log"
grep -E '^(FAIL|panic:)' "$log" || true
