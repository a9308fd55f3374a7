#!/bin/bash
# Sourced by the collectors' bash scripts (nr-window.sh, nr-wait.sh, nr-clear.sh), never run:
# what they share, without starting a process (a fork costs ~80 ms on a QEMU TCG micro-VM).

# until_us EPOCH_US: wait until epoch microsecond EPOCH_US on the wall clock ($EPOCHREALTIME,
# bash >= 5), with `read -t` on the descriptor $never, which the caller opens first on a pipe
# nobody writes to (exec {never}<> <(:)). A timeout runs on the monotonic clock, which drifted
# ~1.4 ms per second from the wall clock on the micro-VM (roles/flow_clients/files/nr-start.sh):
# each step waits at most 99 % of what is left, the wall clock read again after it.
until_us() {
  local w tmo
  while w=$(( $1 - ${EPOCHREALTIME/./} )); (( w > 0 )); do
    (( w > 1000000 )) && w=$(( w * 99 / 100 ))
    printf -v tmo '%d.%06d' $(( w / 1000000 )) $(( w % 1000000 ))
    read -r -t "$tmo" -u "${never:?until_us: the caller opens the descriptor never first}" _ || true
  done
}

# running PID: whether process PID runs and is not a zombie (an init that does not reap orphans,
# virtme-ng's in the local micro-VM, leaves ended collectors as zombies). The state is the field
# after the command's closing parenthesis (proc(5), /proc/pid/stat).
running() {
  local s
  { read -r s < "/proc/$1/stat"; } 2>/dev/null || return 1
  s=${s##*) }
  [ "${s%% *}" != Z ]
}
