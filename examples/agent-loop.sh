#!/usr/bin/env bash
# agent-loop.sh: a minimal interactive agent in the shell. It attaches to a
# session as a viewer (so completions that arrive while you are here run as
# turns, not as notes), keeps a drainer following the queue, and admits each
# line you type. The transcript streams to stdout as it grows.
#
#   examples/agent-loop.sh SESSION -- HANDLER [ARGS…]
#
# End with Ctrl-D: the loop waits until what you typed has run and the
# viewer has printed it, then stops the drainer, ends the viewer (its lease
# is removed) and exits 0.
set -uo pipefail
usage() { echo "usage: $0 SESSION -- HANDLER [ARGS…]" >&2; exit 2; }
[ $# -ge 3 ] || usage
session=$1; shift
[ "$1" = "--" ] || usage
shift

hermesq session open "$session" >/dev/null || exit $?
work=$(mktemp -d) || exit 1
mkfifo "$work/hold"
# attach stops at the end of its stdin: it reads a pipe this script holds
# open (fd 3) and closes to let the viewer go. tee shows each line before
# it writes it to the file the loop counts, so a line counted is a line
# shown.
hermesq attach "$session" <"$work/hold" | tee "$work/transcript" &
attach_pid=$! # tee's: it ends when attach does
exec 3>"$work/hold"
hermesq drain "$session" --follow --wait -- "$@" >/dev/null 3>&- &
drain_pid=$!
stop() {
  kill -TERM "$drain_pid" 2>/dev/null
  exec 3>&-
  wait "$drain_pid" "$attach_pid" 2>/dev/null
  rm -rf "$work"
}
trap 'stop; exit 130' INT TERM

while IFS= read -r line; do
  [ -n "$line" ] || continue
  hermesq admit "$session" --text "$line" >/dev/null 3>&- || echo "agent-loop: could not admit that line" >&2
done

# End of input: wait until nothing of the session is queued or running, and
# the viewer has printed every message.
while [ -n "$(hermesq queue "$session" --status queued,running -o jsonl)" ] ||
  [ "$(wc -l <"$work/transcript")" -lt "$(hermesq transcript --session "$session" -o jsonl | wc -l)" ]; do
  if ! kill -0 "$drain_pid" 2>/dev/null || ! kill -0 "$attach_pid" 2>/dev/null; then
    echo "agent-loop: the drainer or the viewer stopped; see hermesq queue $session" >&2
    stop
    exit 1
  fi
  sleep 0.2
done
stop
exit 0
