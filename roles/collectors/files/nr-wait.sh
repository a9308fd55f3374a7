#!/bin/sh
# Wait until every background collector or flow client of a trial has ended (their pid files
# under DIR): sleep until the schedule's END (epoch s) without polling, so the wait costs the
# node nothing during the trial, then poll at most GRACE_S seconds; stop any left (SIGTERM)
# and say which.
# Usage: nr-wait.sh DIR END_EPOCH_S GRACE_S
set -u
dir=$1 end=$2 timeout=$3
until_epoch() { sleep "$(awk -v e="$1" -v n="$(date +%s.%N)" 'BEGIN { w = e - n; printf "%.3f", (w > 0 ? w : 0) }')"; }
until_epoch "$end"
t=0
# A process is running when /proc says so and it is not a zombie: an init that does not reap
# orphans (virtme-ng's, in the local micro-VM) leaves ended collectors as zombies.
running() { s=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]; }
alive() { for p in "$dir"/*.pid; do [ -e "$p" ] && running "$(cat "$p")" && return 0; done; return 1; }
while alive && [ "$t" -lt "$timeout" ]; do sleep 1; t=$((t + 1)); done
left=""
for p in "$dir"/*.pid; do
  [ -e "$p" ] || continue
  if running "$(cat "$p")"; then
    pkill -TERM -P "$(cat "$p")" 2>/dev/null; kill -TERM "$(cat "$p")" 2>/dev/null; left="$left ${p##*/}"
  fi
done
[ -z "$left" ] && echo "all ended after ${t} s" || echo "STOPPED after ${t} s:$left"
