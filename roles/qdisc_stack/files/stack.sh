#!/bin/sh
# Install a stack of qdiscs on one interface (netrepro.tc.stack_commands), root first.
#
# Usage: stack.sh DEV STATE_DIR RESET TC-ARGS [-- TC-ARGS ...]
#   Each TC-ARGS is one tc command's words without "tc", "@dev@" for the device; "--"
#   separates the commands. The first is "qdisc del dev @dev@ root" (its failure on a device
#   with only the kernel's default qdisc is expected and ignored); any other failing command
#   fails the script. RESET: 1 installs the stack afresh (empty queues, zero counters: a
#   trial's start), always reported as CHANGED; 0 installs it only when the device does not
#   already run these very commands' result, as recorded in STATE_DIR/qdisc-DEV after the
#   last install (the commands and `tc -j qdisc show dev DEV`).
# Prints the device's qdiscs, and CHANGED when it installed the stack.
set -u
dev=$1 state=$2 reset=$3
shift 3
args="$*"
mark="$state/qdisc-$dev"
now=$(tc -j qdisc show dev "$dev") || exit 1
if [ "$reset" != 1 ] && [ -f "$mark" ] && [ "$(cat "$mark")" = "$(printf '%s\n@\n%s' "$args" "$now")" ]; then
  echo "$now"; exit 0
fi
first=1
while [ $# -gt 0 ]; do
  cmd=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    w=$1; [ "$w" = @dev@ ] && w=$dev
    cmd="$cmd $w"; shift
  done
  [ $# -gt 0 ] && shift  # the "--"
  set -f
  # shellcheck disable=SC2086  # word splitting of the tc arguments is intended
  if [ "$first" = 1 ]; then tc $cmd >/dev/null 2>&1; first=0; else tc $cmd || exit 1; fi
  set +f
done
now=$(tc -j qdisc show dev "$dev") || exit 1
mkdir -p "$state" && printf '%s\n@\n%s' "$args" "$now" > "$mark"
echo "$now"
echo CHANGED
