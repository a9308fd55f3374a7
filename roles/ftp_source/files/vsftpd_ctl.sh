#!/bin/sh
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
set -u
PATH=/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin
action=$1 bin=$2 conf=$3 addr=$4 port=$5
pidfile=$(dirname "$conf")/vsftpd.pid
# pgrep -f -x matches the whole command line as an extended regex: escape the dots.
pattern=$(printf '%s %s' "$bin" "$conf" | sed 's/[.[\*^$+?(){}|]/\\&/g')

pids() { pgrep -f -x "$pattern"; }

stop() {
    p=$(pids) || return 0
    # shellcheck disable=SC2086  # one pid per word
    kill $p 2>/dev/null
    i=0
    while pids >/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
    p=$(pids) && kill -9 $p 2>/dev/null
    rm -f "$pidfile"
    echo CHANGED
}

listening() { ss -Hltn "sport = :$port" | grep -q "$addr:$port"; }

start() {
    if pids >/dev/null; then return 0; fi
    if ! out=$("$bin" "$conf" 2>&1); then
        echo "vsftpd_ctl.sh: $bin $conf failed: $out" >&2; exit 1
    fi
    i=0
    while ! listening && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    if ! listening || ! pids >/dev/null; then
        echo "vsftpd_ctl.sh: $bin $conf is not listening on $addr:$port. $out" >&2
        log=$(sed -n 's/^vsftpd_log_file=//p' "$conf")
        [ -n "$log" ] && [ -f "$log" ] && tail -n 5 "$log" >&2
        stop >/dev/null
        exit 1
    fi
    pgrep -o -f -x "$pattern" > "$pidfile"
    echo CHANGED
}

case $action in
    start) start ;;
    restart) stop >/dev/null; start ;;
    stop) stop ;;
    *) echo "usage: $0 start|restart|stop BINARY CONF ADDRESS PORT" >&2; exit 2 ;;
esac
