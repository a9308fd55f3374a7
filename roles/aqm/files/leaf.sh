#!/bin/sh
# Put a qdisc under a class (the AQM under test), changing only what differs.
#
# Usage: leaf.sh DEV PARENT RESET WORD...
#   PARENT: the class (1:10); RESET: 1 to delete the current leaf first, so the AQM starts
#   with empty state and zero counters (changed is then always reported), 0 otherwise;
#   WORDs: one tc command's words without "tc", each a separate argument, @dev@ for DEV
#   (qdisc replace dev @dev@ parent 1:10 handle 10: pie ...); tc gets exactly these words.
# `tc qdisc replace` changes a leaf of the same kind in place; the kernel refuses a
# different kind under the same handle ("Invalid qdisc name"), so then the old leaf is
# deleted first. Prints the qdiscs, and CHANGED when `tc -j qdisc show dev DEV`
# (configuration only) differs afterwards or RESET was asked.
set -u
dev=$1 parent=$2 reset=$3
shift 3
# The tc words, with @dev@ replaced by the device: each word moved to the end in turn.
n=$# i=0
while [ "$i" -lt "$n" ]; do
    w=$1; shift
    [ "$w" = @dev@ ] && w=$dev
    set -- "$@" "$w"
    i=$((i + 1))
done
before=$(tc -j qdisc show dev "$dev") || exit 1
if [ "$reset" = 1 ]; then
    tc qdisc del dev "$dev" parent "$parent" >/dev/null 2>&1
    tc "$@" || exit 1
else
    if ! tc "$@" 2>/dev/null; then
        tc qdisc del dev "$dev" parent "$parent" >/dev/null 2>&1
        tc "$@" || exit 1
    fi
fi
after=$(tc -j qdisc show dev "$dev")
echo "$after"
if [ "$reset" = 1 ] || [ "$before" != "$after" ]; then echo CHANGED; fi
