#!/bin/sh
# Node metadata for run.json, as one JSON object: clock, kernel, tool versions, the sysctls
# that matter (as Flent records them), every qdisc with its statistics, the addresses and the
# offloads of every interface. Few processes: forks are slow on a QEMU TCG micro-VM.
# Usage: nr-meta.sh [OUT]   (default: standard output)
set -u
if [ $# -ge 1 ]; then mkdir -p "$(dirname "$1")"; exec > "$1"; fi
first() { IFS= read -r line || true; printf '%s' "$line" | tr -d '"\\'; }
printf '{"clock_epoch_s":%s,' "$(date +%s.%N)"
printf '"hostname":"%s","kernel":"%s",' "$(uname -n)" "$(uname -r)"
# Cumulative CPU time (proc(5): user nice system idle iowait irq softirq steal, in ticks) and
# the load average: two snapshots give how busy the node was during the trial.
printf '"cpu_ticks":"%s","loadavg":"%s",' "$(awk '/^cpu / { $1 = ""; sub(/^ /, ""); print; exit }' /proc/stat)" "$(awk '{ print; exit }' /proc/loadavg)"
printf '"iproute2":"%s",' "$(ip -V 2>&1 | first)"
# vsftpd -v prints its version on file descriptor 0 (vsftpd.c), hence 0>&1.
printf '"vsftpd":"%s",' "$( (command -v vsftpd >/dev/null && vsftpd -v 0>&1 2>&1) | first)"
printf '"openssh":"%s",' "$(ssh -V 2>&1 | first)"
printf '"curl":"%s",' "$(curl --version 2>/dev/null | first)"
# One awk reads every sysctl (the shell's read builtin gets one byte from /proc/sys files).
printf '"sysctls":{'
cd /proc/sys && awk 'BEGIN { ORS = "" } { gsub(/\t/, " "); k = FILENAME; gsub("/", ".", k); printf "%s\"%s\":\"%s\"", (n++ ? "," : ""), k, $0 }' \
  net/ipv4/tcp_congestion_control net/ipv4/tcp_sack net/ipv4/tcp_rmem net/ipv4/tcp_wmem \
  net/ipv4/tcp_ecn net/ipv4/ip_forward net/core/default_qdisc 2>/dev/null
cd / || exit 1
printf '},"qdiscs":%s,"addresses":%s,"offloads":{' "$(tc -s -j qdisc show)" "$(ip -j addr show)"
sep=""
for d in /sys/class/net/*; do
  i=${d##*/}
  case $i in lo|eth0) continue ;; esac   # eth0: the management interface
  o=$(ethtool -k "$i" 2>/dev/null | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):' | tr '\n' ';')
  printf '%s"%s":"%s"' "$sep" "$i" "$o"; sep=","
done
printf '}}\n'
