#!/bin/bash
# Start, restart or stop one standalone vsftpd instance, known by its config file.
#
# Usage: vsftpd_ctl.sh start|restart|stop BINARY CONF ADDRESS PORT
#   Several instances may run on one machine (one per network namespace of the local
#   site) and PIDs are not namespaced, so an instance is identified by its exact command
#   line "BINARY CONF" (vsftpd has no pid file option; its session processes share that
#   command line and are stopped with it). `start` does nothing when the instance runs.
#   After starting, waits up to 10 s for ADDRESS:PORT to listen in this namespace and
#   writes the listener's pid to CONF's folder, vsftpd.pid.
# Prints CHANGED when it started or stopped anything; exits 1 with vsftpd's log tail when
# the instance does not come up.
#
# In bash, and with its builtins wherever a loop looks at something (a process's state in
# /proc/PID/cmdline, the listening sockets in /proc/net/tcp, waits with `read -t`): a process
# costs ~80 ms to start on a QEMU TCG micro-VM, and a trial restarts vsftpd on every server
# when its rate differs from the last trial's. A restart starts two pgrep and vsftpd.
set -u
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
action=$1 bin=$2 conf=$3 addr=$4 port=$5
pidfile=${conf%/*}/vsftpd.pid
# pgrep -f -x matches the whole command line as an extended regex: escape its specials.
pattern="$bin $conf"
for c in "\\" . '[' '*' '^' '$' + '?' '(' ')' '{' '}' '|'; do pattern=${pattern//"$c"/\\$c}; done
exec {never}<> <(:)

pids() { pgrep -f -x "$pattern"; }
nap() { read -r -t 0.05 -u "$never" _ || true; }

# alive PID: whether PID runs; an ended process whose parent has not reaped it (a zombie,
# under an init that does not reap, as in the local micro-VM) has an empty cmdline (proc(5)).
alive() {
    local c=
    { IFS= read -r -d '' c < "/proc/$1/cmdline"; } 2>/dev/null
    [ -n "$c" ]
}

# stop [keep]: stops the instance; removes its pid file unless "keep" (a restart rewrites it).
stop() {
    local p q i=0 left
    p=$(pids) || { [ "${1:-}" = keep ] || rm -f "$pidfile"; return 0; }
    # shellcheck disable=SC2086  # one pid per word
    kill $p 2>/dev/null
    while :; do
        left=
        for q in $p; do alive "$q" && left="$left $q"; done
        [ -z "$left" ] || [ $i -ge 100 ] && break
        nap; i=$((i + 1))
    done
    # shellcheck disable=SC2086  # one pid per word
    [ -n "$left" ] && kill -9 $left 2>/dev/null
    [ "${1:-}" = keep ] || rm -f "$pidfile"
    echo CHANGED
}

# listening: whether ADDRESS:PORT is a listening socket (state 0A) in this namespace's
# /proc/net/tcp, whose local address is the IPv4 address as the kernel's 32-bit word in hex
# (little-endian on x86 and arm64, so either byte order is accepted) and the port in hex.
listening() {
    local a b c d le be want_port laddr st
    IFS=. read -r a b c d <<< "$addr"
    printf -v le '%02X%02X%02X%02X' "$d" "$c" "$b" "$a"
    printf -v be '%02X%02X%02X%02X' "$a" "$b" "$c" "$d"
    printf -v want_port '%04X' "$port"
    while read -r _ laddr _ st _; do
        [ "$st" = 0A ] || continue
        [ "$laddr" = "$le:$want_port" ] || [ "$laddr" = "$be:$want_port" ] && return 0
    done < /proc/net/tcp
    return 1
}

start() {
    local out i=0 log
    if [ "${1:-}" != fresh ] && pids >/dev/null; then return 0; fi
    if ! out=$("$bin" "$conf" 2>&1); then
        echo "vsftpd_ctl.sh: $bin $conf failed: $out" >&2; exit 1
    fi
    while ! listening && [ $i -lt 200 ]; do nap; i=$((i + 1)); done
    # The listener is the oldest process of the instance (its sessions fork from it).
    if ! listening || ! pgrep -o -f -x "$pattern" > "$pidfile"; then
        echo "vsftpd_ctl.sh: $bin $conf is not listening on $addr:$port. $out" >&2
        log=$(sed -n 's/^vsftpd_log_file=//p' "$conf")
        [ -n "$log" ] && [ -f "$log" ] && tail -n 5 "$log" >&2
        stop >/dev/null
        exit 1
    fi
    echo CHANGED
}

case $action in
    start) start ;;
    restart) stop keep >/dev/null; start fresh ;;
    stop) stop ;;
    *) echo "usage: $0 start|restart|stop BINARY CONF ADDRESS PORT" >&2; exit 2 ;;
esac
