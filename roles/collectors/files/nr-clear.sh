#!/bin/sh
# Clear what an earlier attempt of a trial left on this node, before the trial runs again:
# stop its background collectors and flow clients still running (their pid files), then
# remove its folder and its archive. Prints what it stopped.
# Usage: nr-clear.sh TRIAL_DIR
set -u
dir=$1
# Running and not a zombie (an init that does not reap orphans leaves ended ones as zombies).
running() { s=$(sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null); [ -n "$s" ] && [ "$s" != Z ]; }
left=""
for p in "$dir"/*.pid; do
  [ -e "$p" ] || continue
  pid=$(cat "$p")
  if running "$pid"; then
    pkill -KILL -P "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; left="$left ${p##*/}"
  fi
done
rm -rf "$dir" "$dir.tar.gz"
[ -z "$left" ] && echo "cleared" || echo "STOPPED:$left"
