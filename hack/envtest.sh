#!/usr/bin/env bash
# Runs the envtest packages as make envtest does: test/envtest in two lanes at
# once, each a process with an API server, cert-manager and controller of its
# own (ENVTEST_LANE, test/envtest/suite_test.go), the serial tests in one and
# the parallel ones in the other, and the other packages beside them. In one
# process the serial tests ran first, one at a time, while the CPUs were about
# half idle, and the parallel ones waited for them all.
#
# Usage: hack/envtest.sh BIN-DIR. Writes BIN-DIR/envtest.log (the parallel
# lane and the other packages) and BIN-DIR/envtest-serial.log, shows their
# top-level test and package results as they come, and ends with each failed test's
# last lines (hack/failures.sh).
set -euo pipefail
bin=$1
cd "$(dirname "$0")/.."
hack=$PWD/hack
pkgs=$(go list ./test/envtest/... | grep -v /bench)

# Compiled once here, so that the lanes do not both compile the package.
built=$(mktemp)
trap 'rm -f "$built"' EXIT
go test -c -o "$built" ./test/envtest/

# lane NAME LOG ARGS... runs go test with ENVTEST_LANE=NAME, its whole output
# in LOG, its results on the terminal marked with the lane.
lane() {
  local name=$1 log=$2
  shift 2
  ENVTEST_LANE=$name go test -count=1 -v -timeout 40m "$@" > "$log" 2>&1 &
  local pid=$! status=0
  tail -n +1 --pid="$pid" -f "$log" | grep --line-buffered -E '^(--- (PASS|FAIL)|PASS|FAIL|ok|panic)' | sed -u "s/^/[$name] /" &
  wait "$pid" || status=$?
  wait # what is left to show
  return "$status"
}

status=0
lane serial "$bin/envtest-serial.log" ./test/envtest/ & serial=$!
# shellcheck disable=SC2086 # the package list splits into packages
lane parallel "$bin/envtest.log" -parallel 8 $pkgs & parallel=$!
wait "$serial" || status=1
wait "$parallel" || status=1
if [ "$status" -ne 0 ]; then
  for log in "$bin/envtest-serial.log" "$bin/envtest.log"; do "$hack/failures.sh" "$log" 80; done
fi
exit "$status"
