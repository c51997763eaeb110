#!/usr/bin/env bash
# cron-drain.sh: drain every session with work, for cron, e.g.
#
#   */5 * * * *  /path/to/examples/cron-drain.sh /path/to/agent --fast
#
# Exit codes worth a look (hermesq help exit-codes): 5 another drainer holds a
# session (fine: it will drain it); 6 a queue needs an operator (paused on an
# unknown admission, or a turn failed: see `hermesq queue S --status unknown`
# and `hermesq queue S --outcome failed`); 75 the store is busy or down (the
# next run retries).
#
# Who drains: the principal this runs as (on Redis with ACL users, the ACL
# user of HERMESQ_STORE; on bbolt, the OS user) drains only the sessions it
# owns or is granted drainer (or owner) on; it leaves the others out and says
# how many on stderr. Give the service principal the right per session,
#
#   hermesq session grant SESSION svc-drain --role drainer   # run by the owner
#
# or store-wide, as an admin (who drains every session as its owner):
#
#   hermesq admin grant svc-drain                            # run by the store's administrator
#
# A drainer grant lets it read the session and run its queue (read every queued
# input, run the handler, write the replies and notes), nothing more: it cannot
# admit, close, grant or replay.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: $0 HANDLER [ARGS…]" >&2; exit 2; }

hermesq drain --all --on-unknown pause -- "$@"
code=$?
case $code in
  0|5) exit 0 ;;
  75) echo "cron-drain: store unavailable, retrying next run" >&2; exit 0 ;;
  6) echo "cron-drain: a queue needs attention (exit 6)" >&2; exit 6 ;;
  *) exit "$code" ;;
esac
