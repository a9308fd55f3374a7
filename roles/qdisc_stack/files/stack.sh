#!/bin/sh
# Install a stack of qdiscs on one interface (netrepro.tc.stack_commands), root first.
#
# Usage: stack.sh DEV STATE_DIR RESET "TC-LINES"
#   TC-LINES: one tc command per line, without "tc", "@dev@" for the device; the first is
#   "qdisc del dev @dev@ root" (its failure on a device with only the kernel's default
#   qdisc is expected and ignored). RESET: 1 installs the stack afresh (empty queues, zero
#   counters: a trial's start), always reported as CHANGED; 0 installs it only when the
#   device does not already run these very commands' result, as recorded in
#   STATE_DIR/qdisc-DEV after the last install (the commands and `tc -j qdisc show dev DEV`).
# Prints the device's qdiscs, and CHANGED when it installed the stack.
set -u
dev=$1 state=$2 reset=$3 lines=$4
mark="$state/qdisc-$dev"
now=$(tc -j qdisc show dev "$dev") || exit 1
want=$(printf '%s\n@\n%s\n' "$lines" "$now")
if [ "$reset" != 1 ] && [ -f "$mark" ] && [ "$(cat "$mark")" = "$want" ]; then echo "$now"; exit 0; fi
set -f
first=1
printf '%s\n' "$lines" | sed "s/@dev@/$dev/g" | while IFS= read -r cmd; do
    [ -n "$cmd" ] || continue
    # shellcheck disable=SC2086  # word splitting of the tc arguments is intended
    if [ "$first" = 1 ]; then tc $cmd >/dev/null 2>&1; first=0; else tc $cmd || exit 1; fi
done || exit 1
now=$(tc -j qdisc show dev "$dev") || exit 1
mkdir -p "$state" && printf '%s\n@\n%s\n' "$lines" "$now" > "$mark"
echo "$now"
echo CHANGED
