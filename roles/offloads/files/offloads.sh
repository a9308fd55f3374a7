#!/bin/sh
# Set ethtool offload features on devices, changing only what differs.
#
# Usage: offloads.sh DEV... -- FEATURE=on|off...
#   FEATURE is an ethtool -K short name: tso gso gro lro sg rx tx ufo.
# Prints "ok DEV FEATURE VALUE" or "CHANGED DEV FEATURE OLD -> NEW" per feature; exits 1
# (message on stderr) when a feature is fixed by the driver or does not take the value.
set -u
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin

long_name() {  # ethtool -k's name of a -K short name
    case $1 in
        tso) echo tcp-segmentation-offload ;;
        gso) echo generic-segmentation-offload ;;
        gro) echo generic-receive-offload ;;
        lro) echo large-receive-offload ;;
        sg) echo scatter-gather ;;
        rx) echo rx-checksumming ;;
        tx) echo tx-checksumming ;;
        ufo) echo udp-fragmentation-offload ;;
        *) echo "offloads.sh: unknown feature $1" >&2; exit 2 ;;
    esac
}

state() {  # state DEV FEATURE -> "on", "off", "on [fixed]" ... ; "" when unknown
    ethtool -k "$1" 2>/dev/null | sed -n "s/^$(long_name "$2"): //p"
}

devs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do devs="$devs $1"; shift; done
[ $# -gt 0 ] && shift
status=0
for dev in $devs; do
    todo=""
    for fv in "$@"; do
        f=${fv%%=*}; want=${fv#*=}
        have=$(state "$dev" "$f")
        case $have in
            "$want"*) echo "ok $dev $f $want" ;;
            *fixed*) echo "offloads.sh: $dev: $f is '$have' (fixed by the driver), wanted $want" >&2; status=1 ;;
            "") echo "offloads.sh: $dev: ethtool -k does not show $f" >&2; status=1 ;;
            *) todo="$todo $f $want" ;;
        esac
    done
    [ -z "$todo" ] && continue
    # shellcheck disable=SC2086  # pairs "feature value" are split on purpose
    ethtool -K "$dev" $todo >/dev/null 2>&1
    for fv in "$@"; do
        f=${fv%%=*}; want=${fv#*=}
        case " $todo " in *" $f $want "*) ;; *) continue ;; esac
        have=$(state "$dev" "$f")
        case $have in
            "$want"*) echo "CHANGED $dev $f -> $want" ;;
            *) echo "offloads.sh: $dev: $f stays '$have' after ethtool -K, wanted $want" >&2; status=1 ;;
        esac
    done
done
exit $status
