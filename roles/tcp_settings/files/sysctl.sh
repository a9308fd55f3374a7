#!/bin/sh
# Set sysctls through /proc/sys in the current network namespace, writing only what differs.
#
# Usage: sysctl.sh KEY=VALUE...     (KEY in dotted form: net.ipv4.tcp_sack)
# Prints "ok KEY VALUE" or "CHANGED KEY OLD -> NEW"; exits 1 (message on stderr) when a key
# does not exist here, cannot be written (a read-only /proc/sys in a container), or does
# not read back as written (e.g. a congestion control the kernel lacks). Whitespace runs
# are compared as one space (tcp_rmem reads back tab-separated).
# net.* keys are per network namespace for the settings we use (ip_forward, tcp_sack,
# tcp_congestion_control since Linux 4.15), so namespace nodes do not see each other's.
set -u
status=0
norm() { printf '%s' "$1" | tr -s ' \t' '  '; }
for kv in "$@"; do
    key=${kv%%=*}; want=$(norm "${kv#*=}")
    path=/proc/sys/$(printf '%s' "$key" | tr . /)
    if [ ! -f "$path" ]; then
        echo "sysctl.sh: $key: no such sysctl here ($path)" >&2; status=1; continue
    fi
    have=$(norm "$(cat "$path")")
    if [ "$have" = "$want" ]; then echo "ok $key $have"; continue; fi
    if ! err=$( (printf '%s\n' "$want" > "$path") 2>&1); then
        echo "sysctl.sh: $key: cannot write '$want' (now '$have'): $err" >&2; status=1; continue
    fi
    now=$(norm "$(cat "$path")")
    if [ "$now" != "$want" ]; then
        echo "sysctl.sh: $key: wrote '$want' but it reads '$now'" >&2; status=1; continue
    fi
    echo "CHANGED $key $have -> $want"
done
exit $status
