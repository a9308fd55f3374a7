#!/bin/bash
# Flow client: at START+OFFSET (epoch seconds) open COUNT parallel anonymous FTP downloads
# from SERVER, each stopped after DURATION s, and write one CSV row per flow:
#   flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,connect_s,data_start_s
# One curl process opens every flow at once (--parallel --parallel-immediate): starting 20
# processes one by one takes seconds on a slow node, which would skew the phase starts.
# A flow starts when curl starts (start_epoch_s: what the orchestration controls, read from
# bash's $EPOCHREALTIME just before curl is exec'd in place of the waiting shell: no fork
# between the two) and ends at that time plus its time_total; connect_s is its time_connect,
# i.e. how long the network took to open its control connection, and data_start_s its
# time_starttransfer, when its first byte of data arrived, after the login, PASV and the data
# connection (curl(1) --write-out).
#
# START "armed": the waiting process makes the FIFO OUT.go and blocks reading it (no CPU)
# until the controller writes the trial's common start time into every FIFO of the trial
# (the barrier, netrepro.runner.barrier.release_trial). The wait until START+OFFSET is a
# fork-free `read -t` on a pipe nobody writes to, so a slow node loses no time forking
# (nr-start.sh, shared with nr-iperf3.sh).
# Usage: nr-flows.sh OUT_CSV SERVER START OFFSET_S DURATION_S COUNT FILES [--background]
#   FILES: comma-separated file names on the server; flow i downloads file (i mod len).
set -eu
out=$1 server=$2 start=$3 offset=$4 duration=$5 count=$6 files=$7 mode=${8:-}
mkdir -p "$(dirname "$out")"
[ "$start" != armed ] || { rm -f "$out.go"; mkfifo "$out.go"; }
IFS=, read -r -a names <<< "$files"
args=()
for ((i = 0; i < count; i++)); do args+=(-o /dev/null "ftp://$server/${names[i % ${#names[@]}]}"); done

# shellcheck source=nr-start.sh
case $0 in */*) . "${0%/*}/nr-start.sh" ;; *) . ./nr-start.sh ;; esac

launch() {  # wait for the start, record it, become curl
  wait_start "$out" "$start" "$offset"
  exec curl -s --no-progress-meter -Z --parallel-immediate --parallel-max "$count" --max-time "$duration" \
    -w '%{time_connect} %{time_total} %{exitcode} %{size_download} %{url} %{time_starttransfer}\n' "${args[@]}" > "$out.raw"
}

run() {
  ( launch ) || true
  awk -v t0="$(cat "$out.t0")" 'BEGIN { print "flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,connect_s,data_start_s" }
    NF >= 6 { n = split($5, u, "/"); host = u[3]; file = u[n]
              printf "%d,%s,%s,%.6f,%.6f,%s,%s,%.6f,%.6f\n", NR, host, file, t0, t0 + $2, $3, $4, $1, $6 }' "$out.raw" > "$out"
}
if [ "$mode" = --background ]; then
  # Ansible runs commands on a pty: ignore the SIGHUP its closing sends (as nohup(1) does),
  # before the fork, so that no SIGHUP comes between it and the child's start; the ignored
  # disposition is inherited by curl.
  trap '' HUP
  (run) < /dev/null > /dev/null 2> "$out.err" &
  echo "$!" > "$out.pid"
else
  run
fi
