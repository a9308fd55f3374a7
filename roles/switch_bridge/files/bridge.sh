#!/bin/sh
# Make this node an L2 switch: one Linux bridge over the given ports, changing only what differs.
#
# Usage: bridge.sh BRIDGE DEV...
# Creates BRIDGE (`ip link add BRIDGE type bridge`: STP off, the kernel's default, so a port
# forwards at once; ip-link(8)) when it is missing; for each DEV removes its IPv4 addresses
# (a testbed may have given the port one: a bridge port carries none), makes it a port of
# BRIDGE and sets it up; sets BRIDGE up. Prints "ok ..." or "CHANGED ..." per item; exits 1
# (message on stderr) when a device is missing, ip fails, or the result is not what was asked.
# Reads /sys/class/net (no fork per check): nodes may be a QEMU TCG micro-VM.
set -uf
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
br=$1
shift
status=0
sys=/sys/class/net

# is_up DEV: IFF_UP (0x1) is set in the device's flags.
is_up() {
    flags=$(cat "$sys/$1/flags") || return 1
    [ $((flags & 1)) -eq 1 ]
}

# master_of DEV: the name of the device DEV is a port of, or nothing.
master_of() {
    m=$(readlink "$sys/$1/master" 2>/dev/null) || return 0
    echo "${m##*/}"
}

if [ ! -d "$sys/$br/bridge" ]; then
    if [ -e "$sys/$br" ]; then
        echo "bridge.sh: $br exists and is not a bridge" >&2; exit 1
    fi
    ip link add "$br" type bridge || exit 1
    echo "CHANGED bridge $br created"
else
    echo "ok bridge $br"
fi

for dev in "$@"; do
    if [ ! -e "$sys/$dev" ]; then
        echo "bridge.sh: no device $dev" >&2; status=1; continue
    fi
    if [ -n "$(ip -4 -o addr show dev "$dev")" ]; then
        ip -4 addr flush dev "$dev" || { status=1; continue; }
        echo "CHANGED $dev: IPv4 addresses removed"
    fi
    if [ "$(master_of "$dev")" != "$br" ]; then
        ip link set dev "$dev" master "$br" || { status=1; continue; }
        if [ "$(master_of "$dev")" = "$br" ]; then
            echo "CHANGED $dev: port of $br"
        else
            echo "bridge.sh: $dev is not a port of $br after ip link set master" >&2; status=1
        fi
    else
        echo "ok $dev: port of $br"
    fi
    if ! is_up "$dev"; then
        ip link set dev "$dev" up || { status=1; continue; }
        echo "CHANGED $dev: up"
    fi
done

if ! is_up "$br"; then
    ip link set dev "$br" up || exit 1
    echo "CHANGED bridge $br: up"
fi
exit $status
