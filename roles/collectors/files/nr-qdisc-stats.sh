#!/bin/bash
# Queue statistics collector: every INTERVAL s from START until END (epoch seconds), one
# JSON line {"t", "dev", "tx_bytes", "tx_packets", "qdisc": <tc -s -j qdisc show dev DEV>}.
#
# One long-lived `tc -s -j -batch -` answers every query (a coprocess), the counters are
# read with the `read` builtin and the pauses are `read -t` timeouts: nothing is forked per
# sample. A fork costs ~0.1 s on slow nodes (a QEMU TCG micro-VM), as much as the interval.
# Deadline-based pauses keep the sampling from drifting. bash >= 5 for $EPOCHREALTIME.
# Usage: nr-qdisc-stats.sh OUT DEV START END INTERVAL_S [--background]
set -eu
out=$1 dev=$2 start=$3 end=$4 interval=$5 mode=${6:-}
mkdir -p "$(dirname "$out")"
stats=/sys/class/net/$dev/statistics

usec() {  # epoch seconds with a fraction (or $EPOCHREALTIME) -> integer microseconds
  local s=${1%.*} f=${1#*.}
  [ "$s" = "$1" ] && f=0
  f=${f}000000
  echo $(( 10#$s * 1000000 + 10#${f:0:6} ))
}

run() {
  local next end_us step t tx txp q wait_us never tcw
  next=$(usec "$start") end_us=$(usec "$end") step=$(usec "$interval")
  exec {never}<> <(:)   # a pipe nobody writes to: `read -t` on it is a fork-free sleep
  coproc TC { exec tc -s -j -batch -; }
  : > "$out"
  # Stop at END even when late samples pushed the schedule back (a slow node).
  while (( next <= end_us && $(usec "$EPOCHREALTIME") <= end_us )); do
    wait_us=$(( next - $(usec "$EPOCHREALTIME") ))
    if (( wait_us > 0 )); then
      read -r -t "$(printf '%d.%06d' $(( wait_us / 1000000 )) $(( wait_us % 1000000 )))" -u "$never" _ || true
    fi
    t=$EPOCHREALTIME
    read -r tx < "$stats/tx_bytes"
    read -r txp < "$stats/tx_packets"
    echo "qdisc show dev $dev" >&"${TC[1]}"
    read -r q <&"${TC[0]}"
    printf '{"t":%s,"dev":"%s","tx_bytes":%s,"tx_packets":%s,"qdisc":%s}\n' "$t" "$dev" "$tx" "$txp" "$q" >> "$out"
    next=$(( next + step ))
  done
  tcw=${TC[1]}
  exec {tcw}>&-       # EOF ends tc's batch
  wait "$TC_PID" 2>/dev/null || true
}
if [ "$mode" = --background ]; then
  # Ansible runs scripts on a pty: ignore the SIGHUP its closing sends (as nohup(1) does);
  # the ignored disposition is inherited by tc.
  (trap '' HUP; run) < /dev/null > /dev/null 2> "$out.err" &
  echo "$!" > "$out.pid"
else
  run
fi
