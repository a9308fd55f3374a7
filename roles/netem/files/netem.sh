#!/bin/sh
# Apply one tc command to a device and tell whether the device's qdiscs changed.
#
# Usage: netem.sh DEV WORD...    (WORDs: one tc command's words without "tc", @dev@ for DEV;
#   tc gets exactly these words, none split, globbed or read as anything but one argument)
# Used with "qdisc replace dev @dev@ root netem ...": the kernel changes a netem root in
# place and replaces any other root qdisc. Prints CHANGED when `tc -j qdisc show dev DEV`
# (configuration only, no statistics) differs afterwards; exits with tc's status.
set -u
dev=$1
shift
# The tc words, with @dev@ replaced by the device: each word moved to the end in turn.
n=$# i=0
while [ "$i" -lt "$n" ]; do
    w=$1; shift
    [ "$w" = @dev@ ] && w=$dev
    set -- "$@" "$w"
    i=$((i + 1))
done
before=$(tc -j qdisc show dev "$dev") || exit 1
tc "$@" || exit 1
after=$(tc -j qdisc show dev "$dev")
echo "$after"
[ "$before" = "$after" ] || echo CHANGED
