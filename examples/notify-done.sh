#!/usr/bin/env bash
# notify-done.sh: run a command and admit its completion to a hermesq session,
# the way the process producer does, from a plain shell script or cron job.
#
#   examples/notify-done.sh SESSION [TARGET] -- COMMAND [ARGS…]
#
# The completion's identity is ["completion","<pid>","<started_at>"], so
# running this script's admit again (say, after a lost acknowledgement)
# resolves to the same admission instead of queueing a second one. TARGET is
# the transcript the work was started from (default: the session's current
# transcript). The command's exit code is passed through; an admit failure is
# reported on stderr and exits with hermesq's code.
set -uo pipefail

usage() { echo "usage: $0 SESSION [TARGET] -- COMMAND [ARGS…]" >&2; exit 2; }
[ $# -ge 3 ] || usage
session=$1; shift
target=
if [ "$1" != "--" ]; then target=$1; shift; fi
[ "${1:-}" = "--" ] || usage
shift
[ $# -ge 1 ] || usage

started=$(date -u +%s.%N)
out=$("$@" 2>&1)
code=$?
identity="[\"completion\",\"$$\",\"$started\"]"
text="[finished] $* (exit $code)"
if [ -n "$out" ]; then
  text="$text
$(printf '%s\n' "$out" | tail -n 20)"
fi

args=(admit "$session" --producer process --identity "$identity" --text "$text")
[ -n "$target" ] && args+=(--target "$target")
hermesq "${args[@]}" >&2
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "notify-done: could not admit the completion of: $*" >&2
  exit "$rc"
fi
exit "$code"
