#!/bin/sh
# Wait until every background collector or flow client of a trial has ended (their pid files
# under DIR), at most TIMEOUT_S seconds; then stop any left (SIGTERM) and say which.
# Usage: nr-wait.sh DIR TIMEOUT_S
set -u
dir=$1 timeout=$2
t=0
alive() { for p in "$dir"/*.pid; do [ -e "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null && return 0; done; return 1; }
while alive && [ "$t" -lt "$timeout" ]; do sleep 1; t=$((t + 1)); done
left=""
for p in "$dir"/*.pid; do
  [ -e "$p" ] || continue
  if kill -0 "$(cat "$p")" 2>/dev/null; then
    pkill -TERM -P "$(cat "$p")" 2>/dev/null; kill -TERM "$(cat "$p")" 2>/dev/null; left="$left ${p##*/}"
  fi
done
[ -z "$left" ] && echo "all ended after ${t} s" || echo "STOPPED after ${t} s:$left"
