#!/bin/sh
# Node metadata for run.json, as one JSON object on stdout: clock, kernel, tool versions,
# the sysctls that matter (as Flent records them), the qdiscs and offloads of every interface.
# Usage: nr-meta.sh [OUT]   (default: standard output)
set -u
[ $# -ge 1 ] && exec > "$1"
js() { printf '"%s"' "$(printf '%s' "$1" | tr -d '\r' | tr '\n' ' ' | sed 's/\\/\\\\/g; s/"/\\"/g')"; }
sysctl_get() { cat "/proc/sys/$(echo "$1" | tr . /)" 2>/dev/null | tr '\t' ' '; }
printf '{"clock_epoch_s":%s,' "$(date +%s.%N)"
printf '"hostname":%s,"kernel":%s,' "$(js "$(uname -n)")" "$(js "$(uname -r)")"
printf '"iproute2":%s,' "$(js "$(ip -V 2>&1)")"
# vsftpd -v prints its version on file descriptor 0 (vsftpd.c), hence 0>&1.
printf '"vsftpd":%s,' "$(js "$(command -v vsftpd >/dev/null && (vsftpd -v 0>&1 2>&1 | head -1) || echo absent)")"
printf '"openssh":%s,' "$(js "$(ssh -V 2>&1)")"
printf '"curl":%s,' "$(js "$(curl --version 2>/dev/null | head -1)")"
printf '"sysctls":{'
sep=""
for k in net.ipv4.tcp_congestion_control net.ipv4.tcp_sack net.ipv4.tcp_rmem net.ipv4.tcp_wmem \
         net.ipv4.tcp_ecn net.ipv4.ip_forward net.core.default_qdisc; do
  printf '%s"%s":%s' "$sep" "$k" "$(js "$(sysctl_get "$k")")"; sep=","
done
printf '},"interfaces":{'
sep=""
for d in /sys/class/net/*; do
  i=${d##*/}
  [ "$i" = lo ] && continue
  q=$(tc -s -j qdisc show dev "$i" 2>/dev/null); [ -n "$q" ] || q=null
  a=$(ip -j addr show dev "$i" 2>/dev/null); [ -n "$a" ] || a=null
  o=$(ethtool -k "$i" 2>/dev/null | grep -E '^(tcp-segmentation-offload|generic-segmentation-offload|generic-receive-offload):' | tr '\n' ';')
  printf '%s"%s":{"qdisc":%s,"addr":%s,"offloads":%s}' "$sep" "$i" "$q" "$a" "$(js "$o")"; sep=","
done
printf '}}\n'
