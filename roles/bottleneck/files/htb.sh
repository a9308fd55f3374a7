#!/bin/sh
# Make DEV's root an HTB qdisc with one shaped default class; change only what differs.
#
# Usage: htb.sh DEV HANDLE DEFAULT "QDISC-ARGS" "CLASS-ARGS"
#   HANDLE: the root handle (1:); DEFAULT: the default class minor (10), as in QDISC-ARGS;
#   QDISC-ARGS / CLASS-ARGS: tc command lines without "tc", @dev@ for the device
#   (netrepro.tc.HtbRoot). An HTB root cannot be changed in place ("Change operation not
#   supported"), so a root that is not already "htb HANDLE ... default DEFAULT" is deleted
#   (with whatever hangs below it) and created anew; the class is replaced in place.
# Prints the resulting qdiscs and classes, and CHANGED when anything changed.
set -u
dev=$1 handle=$2 default=$3
set -f
qdisc=$(printf '%s' "$4" | sed "s/@dev@/$dev/g")
class=$(printf '%s' "$5" | sed "s/@dev@/$dev/g")
changed=0
root=$(tc qdisc show dev "$dev" root) || exit 1
# iproute2 prints the default class in hex, "default 0x10" (older: "default 10").
if ! printf '%s\n' "$root" | grep -Eq "^qdisc htb $handle root .*default (0x)?$default( |\$)"; then
    tc qdisc del dev "$dev" root >/dev/null 2>&1  # fails harmlessly on a default root
    # shellcheck disable=SC2086  # word splitting of the tc arguments is intended
    tc $qdisc || exit 1
    changed=1
fi
before=$(tc class show dev "$dev")
# shellcheck disable=SC2086
tc $class || exit 1
after=$(tc class show dev "$dev")
tc qdisc show dev "$dev"
echo "$after"
if [ $changed = 1 ] || [ "$before" != "$after" ]; then echo CHANGED; fi
