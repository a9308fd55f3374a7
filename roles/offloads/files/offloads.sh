#!/bin/sh
# Set ethtool offload features on devices, changing only what differs.
#
# Usage: offloads.sh DEV... -- FEATURE=on|off...
#   FEATURE is an ethtool -K short name: tso gso gro lro sg rx tx ufo.
# Prints "ok DEV FEATURE VALUE" or "CHANGED DEV FEATURE OLD -> NEW" per feature; exits 1
# (message on stderr) when a feature is fixed by the driver or does not take the value.
set -u
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin

# ethtool -k runs once per device and once more after a change; the features are read from
# its output in the shell (a fork costs ~80 ms on a QEMU TCG node: one ethtool and one sed
# per feature made this step 5.5 s for pie-vs-red's seven nodes).
long_name() {  # sets ln to ethtool -k's name of a -K short name
    case $1 in
        tso) ln=tcp-segmentation-offload ;;
        gso) ln=generic-segmentation-offload ;;
        gro) ln=generic-receive-offload ;;
        lro) ln=large-receive-offload ;;
        sg) ln=scatter-gather ;;
        rx) ln=rx-checksumming ;;
        tx) ln=tx-checksumming ;;
        ufo) ln=udp-fragmentation-offload ;;
        *) echo "offloads.sh: unknown feature $1" >&2; exit 2 ;;
    esac
}

# state FEATURE: sets have to FEATURE's state in $k, ethtool -k DEV's output ("on", "off",
# "on [fixed]" ...; "" when it is not shown)
state() {
    long_name "$1"
    have=""
    while IFS= read -r line; do
        case $line in "$ln: "*) have=${line#"$ln: "}; break ;; esac
    done <<EOF
$k
EOF
}

devs=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do devs="$devs $1"; shift; done
[ $# -gt 0 ] && shift
status=0
for dev in $devs; do
    todo=""
    k=$(ethtool -k "$dev" 2>/dev/null)
    for fv in "$@"; do
        f=${fv%%=*}; want=${fv#*=}
        state "$f"
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
    k=$(ethtool -k "$dev" 2>/dev/null)
    for fv in "$@"; do
        f=${fv%%=*}; want=${fv#*=}
        case " $todo " in *" $f $want "*) ;; *) continue ;; esac
        state "$f"
        case $have in
            "$want"*) echo "CHANGED $dev $f -> $want" ;;
            *) echo "offloads.sh: $dev: $f stays '$have' after ethtool -K, wanted $want" >&2; status=1 ;;
        esac
    done
done
exit $status
