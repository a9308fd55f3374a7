#!/bin/sh
# Node metadata for run.json, as one JSON object: clock, kernel, tool versions, the sysctls
# that matter (as Flent records them), every qdisc with its statistics, the addresses and the
# offloads of every interface. With --counters, only what changes during a trial: the clock,
# the CPU ticks, the load average and the qdiscs' statistics (the snapshot after a trial).
# Few processes: a fork costs ~80 ms on a QEMU TCG micro-VM, and seven nodes snapshot at once
# (about 6 + one per interface in full, 6 more when the tools' versions are computed rather
# read back, 3 with --counters).
# Usage: nr-meta.sh [OUT] [--counters] [--versions FILE] [--sysctl net/ipv4/KEY ...]
#        nr-meta.sh --record-versions FILE
# (default OUT: standard output). Each --sysctl adds a file under /proc/sys to the fixed list:
# the experiment's own sysctls on this node, so that the record shows what the node had, not
# what was asked. The tools' versions cost most of a full snapshot (curl --version alone loads
# a dozen libraries): provisioning records them once with --record-versions (after the
# packages; it rewrites FILE and prints CHANGED only when they differ), and each trial's
# snapshot reads them back with --versions FILE (computed afresh when FILE is missing).
set -u
counters="" out="" extra="" versions="" record=""
while [ $# -gt 0 ]; do
  case $1 in
    --counters) counters=1 ;;
    --versions) versions=${2:?--versions needs a file}; shift ;;
    --record-versions) record=${2:?--record-versions needs a file}; shift ;;
    --sysctl) extra="$extra ${2:?--sysctl needs a key}"; shift ;;
    *) out=$1 ;;
  esac
  shift
done
# First line of each tool's version as JSON members, each followed by a comma, on one line
# (vsftpd -v prints on file descriptor 0, vsftpd.c, hence 0>&1).
tool_versions() {
  { echo "@iproute2"; ip -V; echo "@vsftpd"; command -v vsftpd >/dev/null && vsftpd -v 0>&1
    echo "@openssh"; ssh -V; echo "@curl"; curl --version; } 2>&1 |
    awk '/^@/ { k = substr($0, 2); next } k != "" { gsub(/["\\]/, ""); printf "\"%s\":\"%s\",", k, $0; k = "" }'
}
if [ -n "$record" ]; then
  now=$(tool_versions)
  was=""
  [ -r "$record" ] && IFS= read -r was < "$record"
  if [ "$now" = "$was" ]; then echo unchanged; exit 0; fi
  mkdir -p "${record%/*}" && printf '%s\n' "$now" > "$record.new" && mv -f "$record.new" "$record" && echo CHANGED
  exit
fi
if [ -n "$out" ]; then mkdir -p "${out%/*}"; exec > "$out"; fi
date +'{"clock_epoch_s":%s.%N,'
# Cumulative CPU time (proc(5): user nice system idle iowait irq softirq steal, in ticks) and
# the load average: two snapshots give how busy the node was during the trial. Without
# --counters the same awk reads the kernel, the host name and the sysctls that matter (the
# shell's read builtin gets /proc/sys files one byte at a time).
cd /proc/sys || exit 1
# The files to read, those that exist (net.core.default_qdisc is the initial network
# namespace's only): a file awk cannot open would end it before its END.
set -- /proc/stat /proc/loadavg
[ -n "$counters" ] || for f in kernel/hostname kernel/osrelease net/ipv4/tcp_congestion_control net/ipv4/tcp_sack \
    net/ipv4/tcp_rmem net/ipv4/tcp_wmem net/ipv4/tcp_ecn net/ipv4/ip_forward net/core/default_qdisc $extra; do
  case " $* " in *" $f "*) continue ;; esac
  [ -r "$f" ] && set -- "$@" "$f"
done
awk -v full="${counters:+0}" '
  function esc(s) { gsub(/\\/, "", s); gsub(/"/, "", s); gsub(/\t/, " ", s); return s }
  FILENAME == "/proc/stat" && /^cpu / { $1 = ""; sub(/^ /, ""); printf "\"cpu_ticks\":\"%s\",", $0; nextfile }
  FILENAME == "/proc/loadavg" { printf "\"loadavg\":\"%s\",", $0; nextfile }
  FILENAME == "kernel/hostname" { printf "\"hostname\":\"%s\",", esc($0); nextfile }
  FILENAME == "kernel/osrelease" { printf "\"kernel\":\"%s\",\"sysctls\":{", esc($0); nextfile }
  FILENAME ~ /^net\// { k = FILENAME; gsub("/", ".", k); printf "%s\"%s\":\"%s\"", (n++ ? "," : ""), k, esc($0); nextfile }
  END { if (full != "0") printf "},"; print "" }' "$@"
cd / || exit 1
if [ -z "$counters" ]; then
  # The tools' versions as provisioning recorded them (read without a fork), else afresh.
  v=""
  [ -n "$versions" ] && [ -r "$versions" ] && IFS= read -r v < "$versions"
  if [ -n "$v" ]; then printf '%s' "$v"; else tool_versions; fi
  printf '"addresses":%s,"offloads":{' "$(ip -j addr show)"
  # eth0: the management interface.
  for d in /sys/class/net/*; do i=${d##*/}; case $i in lo|eth0) ;; *) echo "@$i"; ethtool -k "$i" 2>/dev/null ;; esac; done |
    awk '/^@/ { if (i != "") printf "%s\"%s\":\"%s\"", (n++ ? "," : ""), i, o; i = substr($0, 2); o = ""; next }
         /^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):/ { o = o $0 ";" }
         END { if (i != "") printf "%s\"%s\":\"%s\"", (n++ ? "," : ""), i, o }'
  printf '},'
fi
printf '"qdiscs":%s}\n' "$(tc -s -j qdisc show)"
