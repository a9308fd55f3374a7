#!/bin/sh
# Make DEV's root an HTB qdisc with one shaped default class; change only what differs.
#
# Usage: htb.sh DEV HANDLE DEFAULT N QDISC-WORD1 ... QDISC-WORDN CLASS-WORD...
#   HANDLE: the root handle (1:); DEFAULT: the default class minor (10), as in the qdisc's
#   words; then the number N of the qdisc command's words, its words, and the class
#   command's words: tc commands without "tc", each word a separate argument, @dev@ for the
#   device (netrepro.tc.HtbRoot); tc gets exactly these words. An HTB root cannot be changed in place ("Change operation not
#   supported"), so a root that is not already "htb HANDLE ... default DEFAULT" is deleted
#   (with whatever hangs below it) and created anew; the class is replaced in place.
# Prints the resulting qdiscs and classes, and CHANGED when anything changed.
set -u
dev=$1 handle=$2 default=$3 nq=$4
shift 4
case $nq in
'' | *[!0-9]* | 0) echo "htb.sh: '$nq' is not a word count" >&2; exit 2 ;;
esac
if [ "$nq" -ge $# ]; then echo "htb.sh: the qdisc announces $nq words, $# are left for it and the class" >&2; exit 2; fi
# The tc words, with @dev@ replaced by the device: each word moved to the end in turn.
n=$# i=0
while [ "$i" -lt "$n" ]; do
    w=$1; shift
    [ "$w" = @dev@ ] && w=$dev
    set -- "$@" "$w"
    i=$((i + 1))
done

tc_qdisc() {  # tc with the qdisc's words: the first $nq arguments
    rest=$(($# - nq)) i=0
    while [ "$i" -lt "$nq" ]; do w=$1; shift; set -- "$@" "$w"; i=$((i + 1)); done
    shift "$rest"
    tc "$@"
}

changed=0
root=$(tc qdisc show dev "$dev" root) || exit 1
# iproute2 prints the default class in hex, "default 0x10" (older: "default 10").
if ! printf '%s\n' "$root" | grep -Eq "^qdisc htb $handle root .*default (0x)?$default( |\$)"; then
    tc qdisc del dev "$dev" root >/dev/null 2>&1  # fails harmlessly on a default root
    tc_qdisc "$@" || exit 1
    changed=1
fi
shift "$nq"  # the class's words are left
before=$(tc class show dev "$dev")
tc "$@" || exit 1
after=$(tc class show dev "$dev")
tc qdisc show dev "$dev"
echo "$after"
if [ $changed = 1 ] || [ "$before" != "$after" ]; then echo CHANGED; fi
