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
echo "== staticcheck"
# Pinned, from the module proxy; it never becomes a dependency of the module.
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== go test -race"
go test -race -count=1 -timeout 20m ./...
# fuzz PKG TARGET TIME runs one fuzz target for TIME. A crash is written to
# PKG/testdata/fuzz/TARGET/ (commit it: it becomes a seed corpus entry the
# plain go test runs from then on) and fails the run. Go 1.26's fuzz
# coordinator can also fail a clean run at the end of -fuzztime with a bare
# "context deadline exceeded" when a worker answers late on a loaded
# machine (golang/go#75804, fixed in Go 1.27): with no crasher written and
# that message alone, the run counts as passed, and says so.
fuzz() {
  local pkg=$1 target=$2 time=$3 log before after
  log=$(mktemp)
  before=$(ls "$pkg/testdata/fuzz/$target" 2>/dev/null | sort || true) # a target may have no corpus yet
  if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$time" -fuzzminimizetime 5s -parallel 2 "./$pkg/" >"$log" 2>&1; then
    tail -n 1 "$log"; rm -f "$log"; return 0
  fi
  after=$(ls "$pkg/testdata/fuzz/$target" 2>/dev/null | sort || true)
  if [ "$before" = "$after" ] && grep -q '^    context deadline exceeded$' "$log" &&
    [ "$(grep -c -e '--- FAIL' -e 'panic:' -e 'Failing input' "$log")" = 1 ]; then
    echo "fuzz $target: the Go fuzz coordinator's end-of-run deadline race (golang/go#75804), no crasher: passed"
    rm -f "$log"; return 0
  fi
  cat "$log"; rm -f "$log"; return 1
}
echo "== fuzz: batch line parser and import reader (20s each)"
for target in FuzzParseBatchLine FuzzReadRecords; do
  fuzz internal/cli "$target" "${HERMESQ_FUZZTIME:-20s}"
done
echo "== fuzz: config, payloads, identities, bbolt codec and admission and session records, Redis replies and messages, store URLs, batch output, batch strings, admission JSON, JSON strings, Prometheus text, strict object members, outbox entries, raw JSON values (10s each)"
# The security targets, the fast JSON codecs checked against encoding/json,
# the Prometheus writer checked against expfmt, and the strict object
# reader's members checked against encoding/json;
# each ran 60 s locally when written (see docs/security.md, "Fuzzing").
for pt in internal/cli:FuzzConfig pkg/admission:FuzzCanonical pkg/admission:FuzzIdentities \
  plugins/storage/bbolt:FuzzRecordCodec plugins/storage/bbolt:FuzzAdmRecJSON plugins/storage/bbolt:FuzzSessionRecJSON plugins/storage/redis:FuzzReplyDecoder plugins/storage/redis:FuzzStoreURL \
  plugins/storage/redis:FuzzMessageEncode internal/cli:FuzzBatchEmit internal/cli:FuzzDecodeStrings pkg/backend:FuzzAdmissionJSON \
  pkg/backend:FuzzAppendQuoted pkg/stats:FuzzPromGaugesAsExpfmt pkg/backend:FuzzStrictObject pkg/producer:FuzzEntryCodec pkg/recjson:FuzzRaw; do
  fuzz "${pt%%:*}" "${pt#*:}" "${HERMESQ_FUZZTIME_SHORT:-10s}"
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
echo "== batch memory: 200,000 lines through admit --batch on each store, under 64 MiB peak RSS"
if ! HERMESQ_BATCH_RSS=1 HERMESQ_BATCH_LINES="${HERMESQ_BATCH_LINES:-200000}" \
  go test -count=1 -v -timeout 20m -run '^TestBatchPeakRSS$' ./acceptance/ >"$soak_log" 2>&1; then
  cat "$soak_log"
  exit 1
fi
grep -E '^(--- |ok)|peak RSS' "$soak_log"
echo "== bench -quick (checks that every figure runs; speed is not judged here)"
# The bench is its own module (it measures asynq beside hermesq);
# docs/performance.md has the full run and its figures.
bench_json=$(mktemp)
trap 'rm -f "$soak_log" "$bench_json"' EXIT
(cd bench && GOFLAGS=-mod=mod go vet ./... && GOFLAGS=-mod=mod go run . -quick -json "$bench_json")
