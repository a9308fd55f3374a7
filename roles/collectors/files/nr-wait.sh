#!/bin/bash
# Wait until every background collector or flow client of a trial has ended (their pid files
# under DIR): sleep until the schedule's END (epoch s) without polling, so the wait costs the
# node nothing during the trial, then look every 0.1 s for at most GRACE_S seconds; stop any
# left (SIGTERM) and say which.
# Forks only to stop what is left: the clock is bash's $EPOCHREALTIME, the waits `read -t` on a
# pipe nobody writes to (as nr-window.sh), the pid files and /proc read with `read`. A fork
# costs ~80 ms on a QEMU TCG micro-VM, where seven nodes finish at once: the earlier sh script
# (date, awk, sleep, then cat and sed per pid file per look, 1-s looks) took 2-3.7 s per node
# when every process had already ended.
# Usage: nr-wait.sh DIR END_EPOCH_S GRACE_S
set -u
dir=$1 end=$2 timeout=$3
exec {never}<> <(:)

# until_us, running: roles/collectors/files/nr-lib.sh
# shellcheck source=nr-lib.sh
here=${BASH_SOURCE[0]%/*}; [ "$here" != "${BASH_SOURCE[0]}" ] || here=.
. "$here/nr-lib.sh"

# END as written by Ansible (a float: digits, a point, up to 17 decimals) -> microseconds.
frac=${end#*.}
[ "$frac" = "$end" ] && frac=""
frac=${frac}000000
until_us $(( 10#${end%%.*} * 1000000 + 10#${frac:0:6} ))

alive() {
  local p pid
  for p in "$dir"/*.pid; do
    [ -e "$p" ] && read -r pid < "$p" && running "$pid" && return 0
  done
  return 1
}
t=0
while alive && (( t < timeout * 10 )); do
  read -r -t 0.1 -u "$never" _ || true
  t=$(( t + 1 ))
done
left=""
for p in "$dir"/*.pid; do
  [ -e "$p" ] || continue
  read -r pid < "$p"
  if running "$pid"; then
    pkill -TERM -P "$pid" 2>/dev/null; kill -TERM "$pid" 2>/dev/null; left="$left ${p##*/}"
  fi
done
after="$(( t / 10 )).$(( t % 10 ))"
if [ -z "$left" ]; then echo "all ended after $after s"; else echo "STOPPED after $after s:$left"; fi
