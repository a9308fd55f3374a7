#!/bin/sh
# Probe which qdiscs this node's kernel and tc accept, in the current network namespace.
#
# Usage: probe.sh [LABEL:TC-ARGS]...
#   TC-ARGS is a tc command line (without "tc") with @dev@ where the device goes, e.g.
#   "pie:qdisc add dev @dev@ root pie limit 134 target 20ms". Each is run on a throwaway
#   veth pair (nrprobe0/nrprobe1; veth is built into every kernel we meet, dummy is not),
#   which is deleted afterwards. Loading a missing sch_* module is left to the kernel
#   (request_module through modprobe).
#   "LABEL:tcp_congestion NAME" checks instead that TCP congestion control NAME (bbr, reno,
#   ...) is in /proc/sys/net/ipv4/tcp_available_congestion_control, after loading tcp_NAME
#   as the kernel would when the sysctl or TCP_CONGESTION asks for it (tcp(7)).
# Prints one JSON object: {"kernel": uname -r, "iproute2": version, "os_id": ID from
# /etc/os-release, "probes": {LABEL: {"ok": bool, "error": "tc's message"}}}.
set -u
PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
dev=nrprobe0
peer=nrprobe1

json_str() {  # a JSON string literal of $1 (quotes and backslashes dropped, newlines folded)
    printf '"%s"' "$(printf '%s' "$1" | tr -d '"\\' | tr '\n\t' '  ')"
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
    set -f  # tc arguments are split on spaces, never globbed
    for p in "$@"; do
        label=${p%%:*}
        args=$(printf '%s' "${p#*:}" | sed "s/@dev@/$dev/g")
        case $args in
        "tcp_congestion "*)
            cc=${args#tcp_congestion }
            avail=/proc/sys/net/ipv4/tcp_available_congestion_control
            grep -qw -- "$cc" "$avail" 2>/dev/null || modprobe -q "tcp_$cc" >/dev/null 2>&1
            if grep -qw -- "$cc" "$avail" 2>/dev/null; then ok=true err=""
            else ok=false err="no TCP congestion control $cc (available: $(cat "$avail" 2>/dev/null))"; fi ;;
        *)
            # shellcheck disable=SC2086  # word splitting of args is intended
            if err=$(tc $args 2>&1); then ok=true; else ok=false; fi
            tc qdisc del dev "$dev" root >/dev/null 2>&1 ;;
        esac
        probes="$probes${probes:+, }$(json_str "$label"): {\"ok\": $ok, \"error\": $(json_str "$err")}"
    done
fi
printf '{"kernel": %s, "iproute2": %s, "os_id": %s, "probes": {%s}}\n' \
    "$(json_str "$kernel")" "$(json_str "$iproute2")" "$(json_str "$os_id")" "$probes"
