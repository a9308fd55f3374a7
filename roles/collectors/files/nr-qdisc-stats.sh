#!/bin/bash
# Queue statistics collector: every INTERVAL s from START until END (epoch seconds), one
# JSON line {"t", "dev", "tx_bytes", "tx_packets", "qdisc": <tc -s -j qdisc show dev DEV>}.
#
# One long-lived `tc -s -j -batch -` answers every query (a coprocess), the counters are
# read with the `read` builtin and the pauses are `read -t` timeouts: nothing is forked per
# sample. A fork costs ~0.1 s on slow nodes (a QEMU TCG micro-VM), as much as the interval.
# Deadline-based pauses keep the sampling from drifting. bash >= 5 for $EPOCHREALTIME.
# Armed (START and END given as "armed<+|-seconds>", e.g. armed-1 and armed+26): the
# background process makes the FIFO OUT.go and blocks reading it until the controller writes
# the trial's common start time there (netrepro.runner.barrier.release_trial); START and END are
# that time plus their offsets.
# --classes: each line also has "classes": the text of `tc -s class show dev DEV` (tc 6.1
# prints classes as text even with -j), a class per block; fq_codel lists there each bucket
# that holds packets, with its backlog (tc-fq_codel(8)). In the batch, `class show` is
# followed by `qdisc show`, whose one JSON line ends the class text.
# Usage: nr-qdisc-stats.sh OUT DEV START END INTERVAL_S [--background] [--classes]
set -eu
out=$1 dev=$2 start=$3 end=$4 interval=$5
shift 5
mode='' classes=''
for a in "$@"; do
  case $a in
    --background) mode=$a ;;
    --classes) classes=1 ;;
    *) echo "nr-qdisc-stats.sh: unknown option $a" >&2; exit 2 ;;
  esac
done
mkdir -p "$(dirname "$out")"
case $start in armed*) rm -f "$out.go"; mkfifo "$out.go" ;; esac
stats=/sys/class/net/$dev/statistics

usec() {  # epoch seconds with a fraction (or $EPOCHREALTIME) -> integer microseconds in USEC
  # (a global, not $(usec ...): a command substitution forks a subshell).
  local s=${1%.*} f=${1#*.}
  [ "$s" = "$1" ] && f=0
  f=${f}000000
  USEC=$(( 10#$s * 1000000 + 10#${f:0:6} ))
}

run() {
  local next end_us step t tx txp q wait_us never tcw tmo o go cls line
  case $start in
    armed*)
      read -r go < "$out.go"
      rm -f "$out.go"
      start=$(awk -v g="$go" -v o="${start#armed}" 'BEGIN { printf "%.6f", g + o }')
      end=$(awk -v g="$go" -v o="${end#armed}" 'BEGIN { printf "%.6f", g + o }') ;;
  esac
  usec "$start"; next=$USEC
  usec "$end"; end_us=$USEC
  usec "$interval"; step=$USEC
  exec {never}<> <(:)   # a pipe nobody writes to: `read -t` on it is a fork-free sleep
  coproc TC { exec tc -s -j -batch -; }
  : > "$out"
  exec {o}>> "$out"
  # Stop at END even when late samples pushed the schedule back (a slow node).
  while usec "$EPOCHREALTIME"; (( next <= end_us && USEC <= end_us )); do
    wait_us=$(( next - USEC ))
    if (( wait_us > 0 )); then
      printf -v tmo '%d.%06d' $(( wait_us / 1000000 )) $(( wait_us % 1000000 ))
      read -r -t "$tmo" -u "$never" _ || true
    fi
    t=$EPOCHREALTIME
    read -r tx < "$stats/tx_bytes"
    read -r txp < "$stats/tx_packets"
    if [ -n "$classes" ]; then
      printf 'class show dev %s\nqdisc show dev %s\n' "$dev" "$dev" >&"${TC[1]}"
      cls=
      while IFS= read -r line <&"${TC[0]}"; do
        case $line in "["*) q=$line; break ;; esac
        line=${line//\\/\\\\}
        cls+=${line//\"/\\\"}'\n'
      done
      printf '{"t":%s,"dev":"%s","tx_bytes":%s,"tx_packets":%s,"qdisc":%s,"classes":"%s"}\n' \
        "$t" "$dev" "$tx" "$txp" "$q" "$cls" >&"$o"
    else
      echo "qdisc show dev $dev" >&"${TC[1]}"
      read -r q <&"${TC[0]}"
      printf '{"t":%s,"dev":"%s","tx_bytes":%s,"tx_packets":%s,"qdisc":%s}\n' "$t" "$dev" "$tx" "$txp" "$q" >&"$o"
    fi
    next=$(( next + step ))
  done
  exec {o}>&-
  tcw=${TC[1]}
  exec {tcw}>&-       # EOF ends tc's batch
  wait "$TC_PID" 2>/dev/null || true
}
if [ "$mode" = --background ]; then
  # Ansible runs commands on a pty: ignore the SIGHUP its closing sends (as nohup(1) does),
  # before the fork, so that no SIGHUP comes between it and the child's start; the ignored
  # disposition is inherited by tc.
  trap '' HUP
  (run) < /dev/null > /dev/null 2> "$out.err" &
  echo "$!" > "$out.pid"
else
  run
fi
