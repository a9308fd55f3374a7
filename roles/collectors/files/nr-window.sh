#!/bin/bash
# The schedule's CPU window of a node: the cpu line of its /proc/stat (proc(5)) read just
# before the trial's START (EARLY_US, 0.1 s) and at START + DURATION into DIR/cpu-window.txt
# ("start TICKS", "end TICKS"). Read at START itself, the micro-VM's seven readers woke with
# the first phase's flow clients, which then started 33 ms behind the schedule in the median
# trial (20 trials at TIME_SCALE 0.5, docs/runs/quick-pie-vs-red-ts0.5-2026-11-26), against
# 16 ms before the readers were armed (24 at 0.25) and 13 ms for the later phases' clients.
# The window's extra 0.1 s is 0.2 % of a 62.5-s schedule.
# analysis/health.py's nodes_cpu_busy judges that window, not the barrier's lead before it or
# the processes' ending and packing after it, which weigh 4-5 s against a 6-s schedule at a
# short TIME_SCALE.
#
# START: epoch seconds with six decimals (a START already past is read at once, and the window
# is then shorter), or "armed", with the trial's other processes (playbooks/trial.yml): the
# background process makes the FIFO DIR/window.go and blocks reading it (no CPU) until the
# barrier writes the trial's common start time into it (netrepro.runner.barrier, "%.6f").
# From then on it forks nothing: it waits with bash's `read -t` on a pipe nobody writes to and
# reads the clock and /proc/stat with the shell's own means. Forking at the release slowed every
# node's acknowledgement of it on the micro-VM, all nodes sharing its two CPUs (least margin
# 1.3-2.1 s before, 0.6 s and late with three forks per node). Nothing then needs the
# controller on the node until the schedule has ended (trial-end.yml; netrepro.runner.trial).
# DURATION_US: the schedule's length in integer microseconds.
# Usage: nr-window.sh DIR START DURATION_US [--background]
set -eu
dir=$1 start=$2 duration_us=$3 mode=${4:-}
EARLY_US=100000
mkdir -p "$dir"
[ "$start" != armed ] || { rm -f "$dir/window.go"; mkfifo "$dir/window.go"; }

# until_us: roles/collectors/files/nr-lib.sh
# shellcheck source=nr-lib.sh
here=${BASH_SOURCE[0]%/*}; [ "$here" != "${BASH_SOURCE[0]}" ] || here=.
. "$here/nr-lib.sh"

run() {
  exec {never}<> <(:)  # made before the release: <(:) forks
  [ "$start" != armed ] || read -r start < "$dir/window.go"  # removed after the end (rm forks)
  # "%.6f" seconds and $EPOCHREALTIME (six decimals) -> microseconds, dropping the point
  local at=$(( 10#${start/./} )) t0 t1
  until_us $(( at - EARLY_US ))
  read -r _ t0 < /proc/stat
  until_us $(( at + duration_us ))
  read -r _ t1 < /proc/stat
  printf 'start %s\nend %s\n' "$t0" "$t1" > "$dir/cpu-window.txt"
  rm -f "$dir/window.go"
}

if [ "$mode" = --background ]; then
  # Ansible runs commands on a pty: ignore the SIGHUP its closing sends (as nohup(1) does).
  trap '' HUP
  (run) < /dev/null > /dev/null 2> "$dir/window.err" &
  echo "$!" > "$dir/window.pid"
else
  run
fi
