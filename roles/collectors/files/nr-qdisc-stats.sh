#!/bin/bash
# Queue statistics collector: every INTERVAL s from START until END (epoch seconds), one
# JSON line {"t", "dev", "tx_bytes", "tx_packets", "qdisc": <tc -s -j qdisc show dev DEV>}.
# Deadline-based sleeps so that the sampling does not drift. bash for $EPOCHREALTIME.
# Usage: nr-qdisc-stats.sh OUT DEV START END INTERVAL_S [--background]
set -eu
out=$1 dev=$2 start=$3 end=$4 interval=$5 mode=${6:-}
mkdir -p "$(dirname "$out")"
stats=/sys/class/net/$dev/statistics
run() {
  local now next t tx txp q
  now=$EPOCHREALTIME
  sleep "$(awk -v s="$start" -v n="$now" 'BEGIN { w = s - n; printf "%.3f", (w > 0 ? w : 0) }')"
  next=$start
  : > "$out"
  while :; do
    t=$EPOCHREALTIME
    read -r tx < "$stats/tx_bytes"
    read -r txp < "$stats/tx_packets"
    q=$(tc -s -j qdisc show dev "$dev")
    printf '{"t":%s,"dev":"%s","tx_bytes":%s,"tx_packets":%s,"qdisc":%s}\n' "$t" "$dev" "$tx" "$txp" "$q" >> "$out"
    next=$(awk -v x="$next" -v i="$interval" 'BEGIN { printf "%.6f", x + i }')
    if awk -v x="$next" -v e="$end" 'BEGIN { exit !(x > e) }'; then break; fi
    sleep "$(awk -v x="$next" -v n="$EPOCHREALTIME" 'BEGIN { w = x - n; printf "%.4f", (w > 0 ? w : 0) }')"
  done
}
if [ "$mode" = --background ]; then
  (run) < /dev/null > /dev/null 2> "$out.err" &
  echo "$!" > "$out.pid"
else
  run
fi
