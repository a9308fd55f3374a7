#!/bin/sh
# Set the MTU of devices and install static routes, changing only what differs.
#
# Usage: routes.sh MTU DEV... -- [TO VIA]...
#   MTU: bytes for every DEV, or 0 to leave the MTUs alone.
#   TO: a destination prefix a.b.c.d/len; VIA: the gateway's IPv4 address.
# Reads each DEV's MTU and `ip -j route show` (the main table) first; runs
# `ip link set dev DEV mtu MTU` and `ip route replace TO via VIA` only where they differ.
# Prints "ok ..." or "CHANGED ..." per item; exits 1 (message on stderr) when ip fails or
# the result is not what was asked. Few forks: nodes may be a QEMU TCG micro-VM.
set -uf
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
mtu=$1
shift
devs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do devs="$devs $1"; shift; done
[ $# -gt 0 ] && shift
status=0

if [ "$mtu" != 0 ]; then
    for dev in $devs; do
        if ! have=$(cat "/sys/class/net/$dev/mtu" 2>/dev/null); then
            echo "routes.sh: no device $dev" >&2; status=1; continue
        fi
        if [ "$have" = "$mtu" ]; then echo "ok mtu $dev $mtu"; continue; fi
        ip link set dev "$dev" mtu "$mtu" || { status=1; continue; }
        now=$(cat "/sys/class/net/$dev/mtu")
        if [ "$now" = "$mtu" ]; then
            echo "CHANGED mtu $dev $have -> $mtu"
        else
            echo "routes.sh: $dev: mtu is $now after ip link set, wanted $mtu" >&2; status=1
        fi
    done
fi

# has_route TABLE TO VIA: TABLE (ip -j route show) has a unicast route TO via VIA. iproute2
# prints "dst" then "gateway" first in each route object, and a /32 without its length.
has_route() {
    case $1 in
        *"{\"dst\":\"${2%/32}\",\"gateway\":\"$3\","*) return 0 ;;
        *) return 1 ;;
    esac
}

if [ $# -gt 0 ]; then
    table=$(ip -j route show) || exit 1
    while [ $# -ge 2 ]; do
        to=$1 via=$2
        shift 2
        if has_route "$table" "$to" "$via"; then echo "ok route $to via $via"; continue; fi
        ip route replace "$to" via "$via" || { status=1; continue; }
        table=$(ip -j route show) || exit 1
        if has_route "$table" "$to" "$via"; then
            echo "CHANGED route $to via $via"
        else
            echo "routes.sh: route $to via $via not in the table after ip route replace" >&2; status=1
        fi
    done
    [ $# -eq 0 ] || { echo "routes.sh: odd number of route arguments" >&2; status=1; }
fi
exit $status
