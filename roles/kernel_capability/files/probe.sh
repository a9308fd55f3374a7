#!/bin/sh
# Probe which qdiscs this node's kernel and tc accept, in the current network namespace.
#
# Usage: probe.sh [LABEL N ARG1 ... ARGN]...
#   Each probe is its label, the number N of its arguments, then its N arguments: one tc
#   command's argv (without "tc"), each word a separate argument of this script, "@dev@"
#   where the device goes, e.g. pie 9 qdisc add dev @dev@ root pie limit 134 target 20ms.
#   tc gets exactly those words: none is split, globbed or read as anything but one argument.
#   Each is run on a throwaway veth pair (nrprobe0/nrprobe1; veth is built into every kernel
#   we meet, dummy is not), which is deleted afterwards. Loading a missing sch_* module is
#   left to the kernel (request_module through modprobe).
#   "LABEL 2 tcp_congestion NAME" checks instead that TCP congestion control NAME (bbr, reno,
#   ...) is in /proc/sys/net/ipv4/tcp_available_congestion_control, after loading tcp_NAME
#   as the kernel would when the sysctl or TCP_CONGESTION asks for it (tcp(7)).
# Prints one JSON object: {"kernel": uname -r, "iproute2": version, "os_id": ID from
# /etc/os-release, "probes": {LABEL: {"ok": bool, "error": "tc's message"}}}; exits 2 with a
# message on stderr when the arguments are malformed or the probe device cannot be made.
set -u
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
dev=nrprobe0
peer=nrprobe1

# json_str STRING: sets js to a JSON string literal of STRING (quotes, backslashes and control
# characters dropped, newlines and tabs made spaces). A variable, not its output: a command
# substitution forks, ~80 ms on a QEMU TCG node, and a plain string (a label, a version, no
# error) needs none.
json_str() {
    case $1 in
        *[\"\\]* | *[![:print:]]*) js=\"$(printf '%s' "$1" | tr '\n\t' '  ' | tr -d '"\\\000-\037')\" ;;
        *) js=\"$1\" ;;
    esac
}

probe() {  # probe with the first $1 of the remaining arguments; sets ok and err
    k=$1; shift
    if [ "$k" = 2 ] && [ "$1" = tcp_congestion ]; then
        cc=$2
        avail=/proc/sys/net/ipv4/tcp_available_congestion_control
        grep -qwF -- "$cc" "$avail" 2>/dev/null || modprobe -q -- "tcp_$cc" >/dev/null 2>&1
        if grep -qwF -- "$cc" "$avail" 2>/dev/null; then ok=true err=""
        else ok=false err="no TCP congestion control $cc (available: $(cat "$avail" 2>/dev/null))"; fi
        return
    fi
    # Keep the first k arguments (with @dev@ replaced) and drop the rest: move each of the
    # first k to the end, then shift away the others.
    rest=$(($# - k)) i=0
    while [ "$i" -lt "$k" ]; do
        a=$1; shift
        [ "$a" = @dev@ ] && a=$dev
        set -- "$@" "$a"
        i=$((i + 1))
    done
    shift "$rest"
    if err=$(tc "$@" 2>&1); then ok=true; else ok=false; fi
    tc qdisc del dev "$dev" root >/dev/null 2>&1
}

kernel=$(uname -r)
iproute2=$(tc -V 2>&1 | sed -n 's/.*iproute2-\([^ ,]*\).*/\1/p' | head -n 1)
os_id=$( (. /etc/os-release 2>/dev/null && printf '%s' "${ID:-unknown}") || printf unknown)

cleanup() { ip link del "$dev" >/dev/null 2>&1; }
trap cleanup EXIT
probes=""
if [ $# -gt 0 ]; then
    cleanup
    if ! err=$(ip link add "$dev" type veth peer name "$peer" 2>&1); then
        echo "probe.sh: cannot create the probe device $dev: $err" >&2
        exit 2
    fi
    while [ $# -gt 0 ]; do
        label=$1 n=${2-}
        case $n in
        '' | *[!0-9]* | 0) echo "probe.sh: probe '$label' has no argument count (LABEL N ARG1 ... ARGN)" >&2; exit 2 ;;
        esac
        shift 2
        if [ "$n" -gt $# ]; then
            echo "probe.sh: probe '$label' announces $n arguments, $# are left" >&2; exit 2
        fi
        probe "$n" "$@"
        shift "$n"
        json_str "$label"; l=$js
        json_str "$err"
        probes="$probes${probes:+, }$l: {\"ok\": $ok, \"error\": $js}"
    done
fi
json_str "$kernel"; kernel_js=$js
json_str "$iproute2"; iproute2_js=$js
json_str "$os_id"
printf '{"kernel": %s, "iproute2": %s, "os_id": %s, "probes": {%s}}\n' "$kernel_js" "$iproute2_js" "$js" "$probes"
