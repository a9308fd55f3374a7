#!/bin/bash
# Install a stack of qdiscs on one interface (netrepro.core.tc.stack_commands), root first.
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
# on stderr when the arguments are malformed, before running anything.
#
# The commands after the first go to one `tc -batch -` (tc(8): one command per line, stopping
# at the first that fails), so a stack costs three tc processes whatever its depth (a process
# costs ~80 ms to start on a QEMU TCG micro-VM). tc's batch reader splits a line at blanks and
# reads quotes and '#' (iproute2 lib/utils.c, makeargs): a stack with a word that holds one of
# those (none of netrepro's builders makes one) runs one tc per command instead.
set -u
dev=$1 state=$2 reset=$3
shift 3
# The record of the commands: each word on a line of its own, a command's count before it.
printf -v args '%s\n' "$@"
args=${args%$'\n'}
mark="$state/qdisc-$dev"

# Check every command's word count and build the batch (the commands after the first, @dev@
# replaced by $dev) before anything runs.
batch="" one_by_one="" i=1
while [ "$i" -le $# ]; do
  n=${!i}
  case $n in
    '' | *[!0-9]* | 0) echo "stack.sh: '$n' is not a word count (N WORD1 ... WORDN)" >&2; exit 2 ;;
  esac
  if [ "$n" -gt $(($# - i)) ]; then echo "stack.sh: a command announces $n words, $(($# - i)) are left" >&2; exit 2; fi
  line=""
  for w in "${@:i+1:n}"; do
    [ "$w" = @dev@ ] && w=$dev
    case $w in '' | *[[:space:]\"\'\#\\]*) one_by_one=1 ;; esac
    line+="$w "
  done
  [ "$i" = 1 ] || batch+="$line"$'\n'
  i=$((i + n + 1))
done

# tc_each FIRST [N WORD1 ... WORDN]...: one tc per command, the words exactly as given, from
# the FIRST-th command on (0: all of them); stops at the first that fails.
tc_each() {
  local from=$1 c=0 n i cmd
  shift
  while [ $# -gt 0 ]; do
    n=$1; shift
    cmd=()
    for ((i = 0; i < n; i++)); do
      if [ "$1" = @dev@ ]; then cmd+=("$dev"); else cmd+=("$1"); fi
      shift
    done
    if [ "$c" -ge "$from" ]; then tc "${cmd[@]}" || return 1; fi
    c=$((c + 1))
  done
}

if [ "$reset" != 1 ] && [ -f "$mark" ]; then
  now=$(tc -j qdisc show dev "$dev") || exit 1
  IFS= read -r -d '' was < "$mark"
  if [ "$was" = "$args"$'\n@\n'"$now" ]; then echo "$now"; exit 0; fi
fi
if [ $# -gt 0 ]; then
  tc_each 0 "${@:1:$1 + 1}" >/dev/null 2>&1
  if [ -n "$one_by_one" ]; then
    tc_each 1 "$@" || exit 1
  elif [ -n "$batch" ]; then
    tc -batch - <<< "$batch" || exit 1
  fi
fi
now=$(tc -j qdisc show dev "$dev") || exit 1
[ -d "$state" ] || mkdir -p "$state"
printf '%s\n@\n%s' "$args" "$now" > "$mark"
echo "$now"
echo CHANGED
