#!/bin/sh
# Ping collector: ping TARGET every INTERVAL s for DURATION s, from START (epoch seconds;
# "now" for at once; "armed" to wait for the trial's release, see below), timestamps on (-D).
# Output: iputils ping(8) text, one reply per line.
#
# Armed: the background process makes the FIFO OUT.go and blocks reading it (no CPU) until
# the controller writes the common start time into every FIFO of the trial (the barrier,
# netrepro.controller.release_trial); it then sleeps until that time.
# Usage: nr-ping.sh OUT TARGET START DURATION_S INTERVAL_S [--background]
set -eu
out=$1 target=$2 start=$3 duration=$4 interval=$5 mode=${6:-}
mkdir -p "$(dirname "$out")"
count=$(awk -v d="$duration" -v i="$interval" 'BEGIN { printf "%d", d / i + 0.5 }')
deadline=$(awk -v d="$duration" 'BEGIN { printf "%d", d + 5 }')
[ "$start" != armed ] || { rm -f "$out.go"; mkfifo "$out.go"; }
run() {
  if [ "$start" = armed ]; then
    read -r start < "$out.go"
    rm -f "$out.go"
  fi
  if [ "$start" != now ]; then
    wait_s=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { w = s - n; printf "%.3f", (w > 0 ? w : 0) }')
    sleep "$wait_s"
  fi
  # -n numeric, -O report missing replies, -W 2: wait 2 s at most for a late reply.
  exec ping -n -D -O -W 2 -i "$interval" -c "$count" -w "$deadline" "$target" > "$out" 2> "$out.err"
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
