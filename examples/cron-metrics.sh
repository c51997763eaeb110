#!/usr/bin/env bash
# cron-metrics.sh: write hermesq's queue figures for the Prometheus
# node-exporter textfile collector, e.g. from cron every minute:
#
#   * * * * *  /path/to/examples/cron-metrics.sh /var/lib/node_exporter/textfile
#
# The file is written beside its final name and renamed over it, so the
# collector never reads half a file. On a failure the old file is left in
# place (its figures grow stale: alert on node_textfile_mtime_seconds) and
# the script exits with hermesq's code.
set -uo pipefail
[ $# -eq 1 ] || { echo "usage: $0 TEXTFILE_DIR" >&2; exit 2; }
dir=$1
tmp=$(mktemp "$dir/.hermesq.prom.XXXXXX") || exit 1
trap 'rm -f "$tmp"' EXIT
hermesq stats --format prometheus >"$tmp"
code=$?
if [ "$code" -ne 0 ]; then
  echo "cron-metrics: hermesq stats failed (exit $code); keeping the previous file" >&2
  exit "$code"
fi
chmod 0644 "$tmp"
mv -f "$tmp" "$dir/hermesq.prom"
