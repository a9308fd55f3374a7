#!/bin/bash
# Sourced by nr-flows.sh and nr-iperf3.sh (bash): wait for a flow's start without forking.
#
# wait_start OUT START OFFSET_S: START is epoch seconds or "armed" (then block, without CPU,
# reading the FIFO OUT.go, which the caller made before going to the background, until the
# controller writes the trial's common start time into it: the barrier,
# netrepro.runner.barrier.release_trial); wait until START+OFFSET; write the time read just
# after to OUT.t0 (bash's $EPOCHREALTIME). The caller execs its client right after: no fork
# between reading the clock and the client's start.

usec() {  # epoch seconds with a fraction -> integer microseconds in USEC (no subshell)
  local s=${1%.*} f=${1#*.}
  [ "$s" = "$1" ] && f=0
  f=${f}000000
  USEC=$(( 10#$s * 1000000 + 10#${f:0:6} ))
}

wait_start() {
  local out=$1 start=$2 offset=$3 never tmo at wait_us
  # The pipe to wait on is made before the start is known: <(:) forks, and a fork between
  # reading the clock and waiting made every flow group start one fork late (~0.1 s on a
  # QEMU TCG micro-VM, more under load).
  exec {never}<> <(:)
  if [ "$start" = armed ]; then
    read -r start < "$out.go"
    rm -f "$out.go"
  fi
  usec "$start"; at=$USEC
  usec "$offset"; at=$(( at + USEC ))
  # A timeout runs on the monotonic clock; the start is on the wall clock. On the micro-VM
  # they drifted ~1.4 ms per second waited (a group 100 s into the trial started 141 ms
  # late), so the wait is cut in steps of at most 99 % of what is left, the wall clock read
  # again after each: a few steps, none forking.
  while usec "$EPOCHREALTIME"; wait_us=$(( at - USEC )); (( wait_us > 0 )); do
    (( wait_us > 1000000 )) && wait_us=$(( wait_us * 99 / 100 ))
    printf -v tmo '%d.%06d' $(( wait_us / 1000000 )) $(( wait_us % 1000000 ))
    read -r -t "$tmo" -u "$never" _ || true
  done
  exec {never}>&-
  printf '%s\n' "$EPOCHREALTIME" > "$out.t0"
}
