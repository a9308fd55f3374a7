#!/bin/sh
# Apply one tc command to a device and tell whether the device's qdiscs changed.
#
# Usage: netem.sh DEV "TC-ARGS"     (TC-ARGS: a tc command line without "tc", @dev@ for DEV)
# Used with "qdisc replace dev @dev@ root netem ...": the kernel changes a netem root in
# place and replaces any other root qdisc. Prints CHANGED when `tc -j qdisc show dev DEV`
# (configuration only, no statistics) differs afterwards; exits with tc's status.
set -u
dev=$1
set -f
args=$(printf '%s' "$2" | sed "s/@dev@/$dev/g")
before=$(tc -j qdisc show dev "$dev") || exit 1
# shellcheck disable=SC2086  # word splitting of args is intended
tc $args || exit 1
after=$(tc -j qdisc show dev "$dev")
echo "$after"
[ "$before" = "$after" ] || echo CHANGED
