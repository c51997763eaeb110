#!/usr/bin/env bash
# The README demo: a real session on the default (bbolt) store in a fresh,
# throw-away $XDG_STATE_HOME. It builds hermesq and the example handler
# (examples/handler), admits a human message and an automation completion,
# drains them (a turn, then a note), shows the queue and the transcript, and
# shows a viewer turning the next completion into a turn.
#
#   bash examples/demo.sh        (needs only Go)
set -euo pipefail
cd "$(dirname "$0")/.."

work=$(mktemp -d "${TMPDIR:-/tmp}/hermesq-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin" "$work/state"

echo "# building hermesq and the example handler into $work/bin"
go build -o "$work/bin/hermesq" ./cmd/hermesq
go build -o "$work/bin/handler" ./examples/handler

# A fresh default store: $XDG_STATE_HOME/hermesq/hermesq.db.
export XDG_STATE_HOME="$work/state"
export XDG_CONFIG_HOME="$work/config"
unset HERMESQ_STORE HERMESQ_CONFIG HERMESQ_OUTPUT
export PATH="$work/bin:$PATH"

run() {
  printf '\n$ %s\n' "${*@Q}"
  "$@"
}

run hermesq session open demo
run hermesq admit demo --text 'hello: is the build green?'
# A background process finished while nobody was looking: an automation
# completion (producer "process", one identity), admitted behind the message.
run hermesq admit demo --producer process \
  --identity '["completion","proc-1","1700000000.0"]' \
  --text '[finished] make test (exit 0)'
run hermesq queue demo --status queued

# The human message runs as a turn (the handler replies); the completion,
# with no viewer watching, becomes a note with no handler call.
run hermesq drain demo -- handler
run hermesq queue demo --status queued,running,unknown,done
run hermesq transcript --session demo

# Someone is watching now: the next completion runs as a turn instead.
printf '\n$ viewer=$(hermesq viewer add demo --ttl 5m)\n'
viewer=$(hermesq viewer add demo --ttl 5m)
echo "viewer $viewer"
run hermesq admit demo --producer process \
  --identity '["completion","proc-2","1700000100.0"]' \
  --text '[finished] make lint (exit 0)'
run hermesq drain demo -- handler
run hermesq viewer rm demo "$viewer"
run hermesq transcript --session demo
# The same completion offered again (a lost acknowledgement) is a duplicate:
# it is not admitted, nor run, a second time.
run hermesq admit demo --producer process \
  --identity '["completion","proc-2","1700000100.0"]' \
  --text '[finished] make lint (exit 0)'
printf '\n# demo done (store: %s/hermesq/hermesq.db, removed on exit)\n' "$XDG_STATE_HOME"
