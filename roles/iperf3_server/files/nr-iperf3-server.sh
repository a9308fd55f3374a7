#!/bin/sh
# One-off iperf3 servers of a trial (iperf3(1): -s -1, exit after one test), in the
# background, one per port; each one's pid in DIR/iperf3-server-PORT.pid so that the trial's
# wait and clear steps (roles/collectors: nr-wait.sh, nr-clear.sh) see and stop it, and its
# output in DIR/iperf3-server-PORT.txt. Prints the ports it listens on.
# Usage: nr-iperf3-server.sh DIR PORT...
set -eu
dir=$1
shift
mkdir -p "$dir"
for port in "$@"; do
  out="$dir/iperf3-server-$port"
  # -D: iperf3 detaches from the SSH session's terminal itself (iperf3 handles SIGHUP as the
  # end of the test, so ignoring it beforehand, as nohup(1) does, would not help) and writes
  # its pid to --pidfile; --logfile keeps its output.
  rm -f "$out.pid"
  iperf3 -s -1 -D -p "$port" --pidfile "$out.pid" --logfile "$out.txt"
done
# Listening before the controller releases the clients: wait (at most ~5 s) for each port.
for port in "$@"; do
  i=0
  until ss -Hltn "sport = :$port" | grep -q .; do
    i=$((i + 1)); [ "$i" -le 50 ] || { echo "iperf3 server on port $port did not listen" >&2; exit 1; }
    sleep 0.1
  done
done
echo "listening on $*"
