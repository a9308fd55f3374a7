#!/bin/bash
# Set sysctls through /proc/sys in the current network namespace, writing only what differs.
#
# Usage: sysctl.sh KEY=VALUE...     (KEY in dotted form: net.ipv4.tcp_sack)
# Prints "ok KEY VALUE" or "CHANGED KEY OLD -> NEW"; exits 1 (message on stderr) when a key
# does not exist here, cannot be written (a read-only /proc/sys in a container), or does
# not read back as written (e.g. a congestion control the kernel lacks). Whitespace runs
# are compared as one space (tcp_rmem reads back tab-separated).
# net.* keys are per network namespace for the settings we use (ip_forward, tcp_sack,
# tcp_congestion_control since Linux 4.15), so namespace nodes do not see each other's.
# bash, and builtins only where nothing changes (every trial sets the experiment's sysctls
# again): a fork costs ~80 ms on a QEMU TCG micro-VM, where seven nodes set theirs at once.
# bash's read takes a /proc/sys file whole (it reads a seekable file in blocks; dash reads
# one byte per call, and a sysctl file gives nothing at an offset past 0).
set -u
status=0
# norm VALUE sets n to VALUE's words (unglobbed) joined by one space.
norm() { local -a w; set -f; read -r -a w <<< "$1"; set +f; n="${w[*]}"; }
for kv in "$@"; do
    key=${kv%%=*}
    norm "${kv#*=}"; want=$n
    path=/proc/sys/${key//.//}
    if [ ! -f "$path" ]; then
        echo "sysctl.sh: $key: no such sysctl here ($path)" >&2; status=1; continue
    fi
    IFS= read -r have < "$path"; norm "$have"; have=$n
    if [ "$have" = "$want" ]; then echo "ok $key $have"; continue; fi
    if ! err=$( (printf '%s\n' "$want" > "$path") 2>&1); then
        echo "sysctl.sh: $key: cannot write '$want' (now '$have'): $err" >&2; status=1; continue
    fi
    IFS= read -r now < "$path"; norm "$now"; now=$n
    if [ "$now" != "$want" ]; then
        echo "sysctl.sh: $key: wrote '$want' but it reads '$now'" >&2; status=1; continue
    fi
    echo "CHANGED $key $have -> $want"
done
exit $status
