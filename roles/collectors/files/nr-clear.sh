#!/bin/bash
# Clear what an earlier attempt of a trial left on this node, before the trial runs again:
# stop its background collectors and flow clients still running (their pid files), then
# remove its folder and its archive. Prints what it stopped.
# Usage: nr-clear.sh TRIAL_DIR
set -u
dir=$1
# running: roles/collectors/files/nr-lib.sh
# shellcheck source=nr-lib.sh
here=${BASH_SOURCE[0]%/*}; [ "$here" != "${BASH_SOURCE[0]}" ] || here=.
. "$here/nr-lib.sh"
left=""
for p in "$dir"/*.pid; do
  [ -e "$p" ] || continue
  read -r pid < "$p"
  if running "$pid"; then
    pkill -KILL -P "$pid" 2>/dev/null; kill -KILL "$pid" 2>/dev/null; left="$left ${p##*/}"
  fi
done
rm -rf "$dir" "$dir.tar.gz"
[ -z "$left" ] && echo "cleared" || echo "STOPPED:$left"
