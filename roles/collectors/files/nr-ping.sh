#!/bin/sh
# Ping collector: ping TARGET every INTERVAL s for DURATION s, from START (epoch seconds;
# "now" for at once; "armed" to wait for the trial's release, see below), timestamps on (-D).
# Output: iputils ping(8) text, one reply per line.
#
# Armed: ping starts at once, and the background process makes the FIFO OUT.go and blocks
# reading it (no CPU) until the controller writes the common start time into every FIFO of
# the trial (the barrier, netrepro.runner.barrier.release_trial); it then stops ping (SIGINT, so
# that it prints its statistics) at START + DURATION. Started at the release instead, the
# first probe left ~1 s after the start on the micro-VM, whatever the barrier's lead: ping
# running before the start costs a few probes, which the analysis leaves out (it keeps the
# probes sent within the schedule).
# Usage: nr-ping.sh OUT TARGET START DURATION_S INTERVAL_S [--background]
set -eu
out=$1 target=$2 start=$3 duration=$4 interval=$5 mode=${6:-}
mkdir -p "$(dirname "$out")"
count=$(awk -v d="$duration" -v i="$interval" 'BEGIN { printf "%d", d / i + 0.5 }')
deadline=$(awk -v d="$duration" 'BEGIN { printf "%d", (d == int(d) ? d : int(d) + 1) }')
[ "$start" != armed ] || { rm -f "$out.go"; mkfifo "$out.go"; }
run() {
  if [ "$start" = armed ]; then
    # -w: a bound in case nothing stops it (a trial abandoned before its release is cleared
    # by the next attempt's clear step, nr-clear.sh, which kills this shell's children).
    ping -n -D -O -W 2 -i "$interval" -w "$(awk -v d="$duration" 'BEGIN { printf "%d", d + 600 }')" \
      "$target" > "$out" 2> "$out.err" &
    pid=$!
    trap 'kill "$pid" 2>/dev/null; exit 143' TERM
    read -r start < "$out.go"
    rm -f "$out.go"
    sleep "$(awk -v e="$start" -v d="$duration" -v n="$(date +%s.%N)" 'BEGIN { w = e + d - n; printf "%.3f", (w > 0 ? w : 0) }')"
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" || true
    return
  fi
  if [ "$start" != now ]; then
    wait_s=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { w = s - n; printf "%.3f", (w > 0 ? w : 0) }')
    sleep "$wait_s"
  fi
  # -n numeric, -O report missing replies, -W 2: wait 2 s at most for a late reply; -w: stop
  # at the schedule's end even when probes are lost (-c alone waits for COUNT replies).
  # Exit status 1 is "replies missing at the deadline" (ping(8)): data, not a failure.
  rc=0
  ping -n -D -O -W 2 -i "$interval" -c "$count" -w "$deadline" "$target" > "$out" 2> "$out.err" || rc=$?
  [ "$rc" -le 1 ] || exit "$rc"
}
if [ "$mode" = --background ]; then
  # Ansible runs commands on a pty: ignore the SIGHUP its closing sends (as nohup(1) does),
  # before the fork, so that no SIGHUP comes between it and the child's start; the ignored
  # disposition is inherited by ping.
  trap '' HUP
  (run) < /dev/null > /dev/null 2>&1 &
  echo "$!" > "$out.pid"
else
  run
fi
