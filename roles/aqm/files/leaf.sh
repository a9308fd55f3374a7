#!/bin/sh
# Put a qdisc under a class (the AQM under test), changing only what differs.
#
# Usage: leaf.sh DEV PARENT RESET "TC-ARGS"
#   PARENT: the class (1:10); RESET: 1 to delete the current leaf first, so the AQM starts
#   with empty state and zero counters (changed is then always reported), 0 otherwise;
#   TC-ARGS: "qdisc replace dev @dev@ parent 1:10 handle 10: pie ..." without "tc".
# `tc qdisc replace` changes a leaf of the same kind in place; the kernel refuses a
# different kind under the same handle ("Invalid qdisc name"), so then the old leaf is
# deleted first. Prints the qdiscs, and CHANGED when `tc -j qdisc show dev DEV`
# (configuration only) differs afterwards or RESET was asked.
set -u
dev=$1 parent=$2 reset=$3
set -f
args=$(printf '%s' "$4" | sed "s/@dev@/$dev/g")
before=$(tc -j qdisc show dev "$dev") || exit 1
if [ "$reset" = 1 ]; then
    tc qdisc del dev "$dev" parent "$parent" >/dev/null 2>&1
    # shellcheck disable=SC2086  # word splitting of the tc arguments is intended
    tc $args || exit 1
else
    # shellcheck disable=SC2086
    if ! tc $args 2>/dev/null; then
        tc qdisc del dev "$dev" parent "$parent" >/dev/null 2>&1
        # shellcheck disable=SC2086
        tc $args || exit 1
    fi
fi
after=$(tc -j qdisc show dev "$dev")
echo "$after"
if [ "$reset" = 1 ] || [ "$before" != "$after" ]; then echo CHANGED; fi
