#!/usr/bin/env bash
# producers.sh: automation events reaching a session through producer plugins,
# end to end. A supervised command's completion (process producer) and a
# delegated sub-task's result (delegation producer) are recorded in the
# plugins' outboxes, 'producers run --once' admits them, and a drain with
# nobody watching writes them to the transcript as notes.
#
#   examples/producers.sh SESSION
#
# Needs hermesq on PATH and hermesq-producer-process and
# hermesq-producer-delegation in the plugin folder ('make install' puts them
# in $XDG_DATA_HOME/hermesq/plugins; or set HERMESQ_PLUGIN_DIR). Running it
# twice records nothing twice: the delegation result is identified by its id,
# and an offer whose acknowledgement was lost resolves to its admission.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 SESSION" >&2; exit 2; }
session=$1
target=$(hermesq -o json session show "$session" | sed -n 's/.*"current_transcript":"\([^"]*\)".*/\1/p')

# A command run under supervision; its completion names it, its exit code
# and the tail of its output.
hermesq proc run --session "$session" --target "$target" -- sh -c 'echo "tests: 42 passed"; exit 0'

# A delegated sub-task returned its result.
hermesq delegate done --session "$session" --target "$target" --id review-1 --result "LGTM, two nits in parse.go"

# Admit what the plugins offer, then execute the queue: no viewer, so notes.
hermesq producers run --once
hermesq drain "$session"
hermesq transcript --session "$session"
