#!/bin/sh
# Install a stack of qdiscs on one interface (netrepro.tc.stack_commands), root first.
#
# Usage: stack.sh DEV STATE_DIR RESET [N WORD1 ... WORDN]...
#   Each tc command is the number N of its words, then its words (without "tc"), each a
#   separate argument of this script, "@dev@" for the device; tc gets exactly those words,
#   none split, globbed or read as anything but one argument. The first command is
#   "qdisc del dev @dev@ root" (its failure on a device with only the kernel's default qdisc
#   is expected and ignored); any other failing command fails the script. RESET: 1 installs
#   the stack afresh (empty queues, zero counters: a trial's start), always reported as
#   CHANGED; 0 installs it only when the device does not already run these very commands'
#   result, as recorded in STATE_DIR/qdisc-DEV after the last install (the commands and
#   `tc -j qdisc show dev DEV`).
# Prints the device's qdiscs, and CHANGED when it installed the stack; exits 2 with a message
# on stderr when the arguments are malformed.
set -u
dev=$1 state=$2 reset=$3
shift 3
# The record of the commands: each word on a line of its own, a command's count before it.
args=$(printf '%s\n' "$@")
mark="$state/qdisc-$dev"

run_tc() {  # run tc with the first $1 of the remaining arguments, @dev@ replaced by $dev
    k=$1; shift
    # Move each of the first k words to the end, then shift away the others.
    rest=$(($# - k)) i=0
    while [ "$i" -lt "$k" ]; do
        w=$1; shift
        [ "$w" = @dev@ ] && w=$dev
        set -- "$@" "$w"
        i=$((i + 1))
    done
    shift "$rest"
    tc "$@"
}

now=$(tc -j qdisc show dev "$dev") || exit 1
if [ "$reset" != 1 ] && [ -f "$mark" ] && [ "$(cat "$mark")" = "$(printf '%s\n@\n%s' "$args" "$now")" ]; then
  echo "$now"; exit 0
fi
first=1
while [ $# -gt 0 ]; do
  n=$1; shift
  case $n in
  '' | *[!0-9]* | 0) echo "stack.sh: '$n' is not a word count (N WORD1 ... WORDN)" >&2; exit 2 ;;
  esac
  if [ "$n" -gt $# ]; then echo "stack.sh: a command announces $n words, $# are left" >&2; exit 2; fi
  if [ "$first" = 1 ]; then run_tc "$n" "$@" >/dev/null 2>&1; first=0; else run_tc "$n" "$@" || exit 1; fi
  shift "$n"
done
now=$(tc -j qdisc show dev "$dev") || exit 1
mkdir -p "$state" && printf '%s\n@\n%s' "$args" "$now" > "$mark"
echo "$now"
echo CHANGED
