#!/bin/bash
# Sourced by the collectors' bash scripts (nr-window.sh, nr-wait.sh), never run: waiting on
# the wall clock without starting a process (a fork costs ~80 ms on a QEMU TCG micro-VM).
# The caller opens the descriptor $never on a pipe nobody writes to first:
#   exec {never}<> <(:)

# until_us EPOCH_US: wait until epoch microsecond EPOCH_US on the wall clock ($EPOCHREALTIME,
# bash >= 5), with `read -t` on $never. A timeout runs on the monotonic clock, which drifted
# ~1.4 ms per second from the wall clock on the micro-VM (roles/flow_clients/files/nr-start.sh):
# each step waits at most 99 % of what is left, the wall clock read again after it.
until_us() {
  local w tmo
  while w=$(( $1 - ${EPOCHREALTIME/./} )); (( w > 0 )); do
    (( w > 1000000 )) && w=$(( w * 99 / 100 ))
    printf -v tmo '%d.%06d' $(( w / 1000000 )) $(( w % 1000000 ))
    read -r -t "$tmo" -u "$never" _ || true
  done
}
