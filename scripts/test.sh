#!/usr/bin/env bash
# The test command: installs what the tests need when it is missing, then runs the
# checks and every test. Bounded soak runs (chaos, Redis faults) are sized by
# HERMESQ_CHAOS_INPUTS and HERMESQ_FAULT_N.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v tmux >/dev/null 2>&1 || missing+=(tmux) # hermesq top runs under tmux in a test
command -v protoc >/dev/null 2>&1 || missing+=(protobuf-compiler) # .ci/run regenerates pkg/producer's protocol
if ((${#missing[@]})); then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  else
    echo "test: ${missing[*]} missing; install with: sudo apt-get install -y ${missing[*]}" >&2
    if [ "${CI:-}" = true ]; then exit 1; fi
  fi
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi
echo "== go vet"
go vet ./...
echo "== go test -race"
go test -race -count=1 -timeout 20m ./...
echo "== fuzz: batch line parser and import reader (20s each)"
# A crash found here is written to internal/cli/testdata/fuzz/FuzzX/ (commit
# it: it becomes a seed corpus entry the plain go test runs from then on).
for target in FuzzParseBatchLine FuzzReadRecords; do
  go test -run '^$' -fuzz "^${target}\$" -fuzztime "${HERMESQ_FUZZTIME:-20s}" -fuzzminimizetime 5s -parallel 2 ./internal/cli/
done
echo "== fuzz: config, payloads, identities, bbolt codec, Redis replies, store URLs (10s each)"
# The security targets; each ran 60 s locally when written (see the README).
for pt in internal/cli:FuzzConfig pkg/admission:FuzzCanonical pkg/admission:FuzzIdentities \
  plugins/storage/bbolt:FuzzRecordCodec plugins/storage/redis:FuzzReplyDecoder plugins/storage/redis:FuzzStoreURL; do
  go test -run '^$' -fuzz "^${pt#*:}\$" -fuzztime "${HERMESQ_FUZZTIME_SHORT:-10s}" -fuzzminimizetime 5s -parallel 2 "./${pt%%:*}/"
done
echo "== soak: chaos (drainers killed; Redis writes paused and connections dropped) and Redis faults (bounded)"
# -v for the figures the soak reports (kills survived, admits re-run): on
# success only the results and those lines are shown, on failure everything.
soak_log=$(mktemp)
trap 'rm -f "$soak_log"' EXIT
if ! HERMESQ_CHAOS=1 HERMESQ_CHAOS_INPUTS="${HERMESQ_CHAOS_INPUTS:-2000}" HERMESQ_FAULT_N="${HERMESQ_FAULT_N:-5000}" \
  go test -count=1 -v -timeout 20m -run 'Chaos|ChaosStoreFaults|Fault' ./acceptance/ >"$soak_log" 2>&1; then
  cat "$soak_log"
  exit 1
fi
grep -E '^(--- |ok)|inputs across|killed with SIGKILL|store faults|turns ran again|failed with 75' "$soak_log"
echo "== bench -quick (checks that every figure runs; speed is not judged here)"
# The bench is its own module (it measures asynq beside hermesq); the README's
# "Performance" section has the full run and its figures.
bench_json=$(mktemp)
trap 'rm -f "$soak_log" "$bench_json"' EXIT
(cd bench && GOFLAGS=-mod=mod go vet . && GOFLAGS=-mod=mod go run . -quick -json "$bench_json")
