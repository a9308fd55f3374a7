#!/bin/bash
# iperf3 client of one traffic item: at START+OFFSET (epoch seconds) run
# `iperf3 -c ... -J ARGS` and keep its JSON report (iperf3(1): -J; per-interval
# throughput, retransmits, cwnd and RTT of every stream) in OUT, the start as read just before
# iperf3 is exec'd in OUT.t0 (bash's $EPOCHREALTIME: no fork between), its stderr in OUT.err.
#
# START "armed": as nr-flows.sh, the waiting process makes the FIFO OUT.go and blocks on it
# (no CPU) until the controller writes the trial's common start time into every FIFO of the
# trial (netrepro.runner.barrier.release_trial); the wait until START+OFFSET is in fork-free steps
# of the wall clock.
# Usage: nr-iperf3.sh OUT START OFFSET_S --background|--foreground IPERF3-ARGS...
#   IPERF3-ARGS: what netrepro.experiment.rolevars.iperf3_argv built (-c ADDRESS -p PORT -t ... -J ...).
set -eu
out=$1 start=$2 offset=$3 mode=$4
shift 4
mkdir -p "$(dirname "$out")"
[ "$start" != armed ] || { rm -f "$out.go"; mkfifo "$out.go"; }

# shellcheck source=nr-start.sh
case $0 in */*) . "${0%/*}/nr-start.sh" ;; *) . ./nr-start.sh ;; esac

launch() {
  wait_start "$out" "$start" "$offset"
  exec iperf3 "$@" > "$out"
}
if [ "$mode" = --background ]; then
  trap '' HUP  # as nr-flows.sh: Ansible's pty sends SIGHUP when it closes
  (launch "$@") < /dev/null > /dev/null 2> "$out.err" &
  echo "$!" > "$out.pid"
else
  launch "$@" 2> "$out.err"
fi
