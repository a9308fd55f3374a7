#!/bin/sh
# Flow client: at START+OFFSET (epoch seconds) open COUNT parallel anonymous FTP downloads
# from SERVER, each stopped after DURATION s, and write one CSV row per flow:
#   flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,connect_s
# One curl process opens every flow at once (--parallel --parallel-immediate): starting 20
# processes one by one takes seconds on a slow node, which would skew the phase starts.
# A flow starts when curl starts (start_epoch_s: what the orchestration controls) and ends at
# that time plus its time_total; connect_s is its time_connect, i.e. how long the network
# took to open its control connection (curl(1) --write-out, per transfer).
# Usage: nr-flows.sh OUT_CSV SERVER START OFFSET_S DURATION_S COUNT FILES [--background]
#   FILES: comma-separated file names on the server; flow i downloads file (i mod len).
set -eu
out=$1 server=$2 start=$3 offset=$4 duration=$5 count=$6 files=$7 mode=${8:-}
mkdir -p "$(dirname "$out")"
run() {
  args=$(echo "$files" | awk -F, -v n="$count" -v s="$server" '{
    for (i = 1; i <= n; i++) printf " -o /dev/null ftp://%s/%s", s, $((i - 1) % NF + 1) }')
  at=$(awk -v s="$start" -v o="$offset" 'BEGIN { printf "%.6f", s + o }')
  sleep "$(awk -v a="$at" -v n="$(date +%s.%N)" 'BEGIN { w = a - n; printf "%.3f", (w > 0 ? w : 0) }')"
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086  # $args is a list of -o/URL words
  curl -s --no-progress-meter -Z --parallel-immediate --parallel-max "$count" --max-time "$duration" \
    -w '%{time_connect} %{time_total} %{exitcode} %{size_download} %{url}\n' $args > "$out.raw" || true
  awk -v t0="$t0" 'BEGIN { print "flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,connect_s" }
    NF >= 5 { n = split($5, u, "/"); host = u[3]; file = u[n]
              printf "%d,%s,%s,%.6f,%.6f,%s,%s,%.6f\n", NR, host, file, t0, t0 + $2, $3, $4, $1 }' "$out.raw" > "$out"
}
if [ "$mode" = --background ]; then
  # Ansible runs scripts on a pty: ignore the SIGHUP its closing sends (as nohup(1) does);
  # the ignored disposition is inherited by curl.
  (trap '' HUP; run) < /dev/null > /dev/null 2> "$out.err" &
  echo "$!" > "$out.pid"
else
  run
fi
