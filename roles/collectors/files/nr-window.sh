#!/bin/sh
# The schedule's CPU window of a node: the cpu line of its /proc/stat (proc(5)) read at the
# trial's START and at START + DURATION into DIR/cpu-window.txt ("start TICKS", "end TICKS").
# analysis/health.py's nodes_cpu_busy judges that window, not the barrier's lead before it or
# the processes' ending and packing after it, which weigh 4-5 s against a 6-s schedule at a
# short TIME_SCALE. Read by the shell's own `read` (no process at the start, where it would
# compete with the collectors and flow clients released then); a START already past is read
# at once (the window is then shorter).
#
# Armed (START "armed"), with the trial's other processes (playbooks/trial.yml): the
# background process makes the FIFO DIR/window.go and blocks reading it (no CPU) until the
# barrier writes the trial's common start time into it (netrepro.runner.barrier); it works out
# both waits then, in the barrier's lead, so that from the start to the end it forks one sleep.
# No command from the controller is then needed on the node until the schedule has ended
# (trial-end.yml; netrepro.runner.trial).
# Usage: nr-window.sh DIR START DURATION_S [--background]
set -eu
dir=$1 start=$2 duration=$3 mode=${4:-}
mkdir -p "$dir"
[ "$start" != armed ] || { rm -f "$dir/window.go"; mkfifo "$dir/window.go"; }
run() {
  if [ "$start" = armed ]; then
    read -r start < "$dir/window.go"
    rm -f "$dir/window.go"
  fi
  # the wait until the start, then the one from there to the end (what is left of it)
  waits=$(awk -v s="$start" -v d="$duration" -v n="$(date +%s.%N)" \
    'BEGIN { w = s - n; e = s + d - n; printf "%.3f %.3f", (w > 0 ? w : 0), (e <= 0 ? 0 : w > 0 ? d : e) }')
  sleep "${waits% *}"
  read -r _ t0 < /proc/stat
  sleep "${waits#* }"
  read -r _ t1 < /proc/stat
  printf 'start %s\nend %s\n' "$t0" "$t1" > "$dir/cpu-window.txt"
}
if [ "$mode" = --background ]; then
  # Ansible runs commands on a pty: ignore the SIGHUP its closing sends (as nohup(1) does).
  trap '' HUP
  (run) < /dev/null > /dev/null 2> "$dir/window.err" &
  echo "$!" > "$dir/window.pid"
else
  run
fi
