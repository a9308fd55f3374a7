#!/bin/sh
# Flow client: at START+OFFSET (epoch seconds) open COUNT parallel FTP downloads from SERVER
# (anonymous, files FILE01.. from the list), each stopped after DURATION s. Writes one CSV
# row per flow with its actual start and end time, curl's exit code and bytes received.
# Usage: nr-flows.sh OUT_CSV SERVER START OFFSET_S DURATION_S COUNT FILES [--background]
#   FILES: comma-separated file names on the server (flow i downloads file i mod len).
set -eu
out=$1 server=$2 start=$3 offset=$4 duration=$5 count=$6 files=$7 mode=${8:-}
mkdir -p "$(dirname "$out")"
run() {
  at=$(awk -v s="$start" -v o="$offset" 'BEGIN { printf "%.6f", s + o }')
  sleep "$(awk -v a="$at" -v n="$(date +%s.%N)" 'BEGIN { w = a - n; printf "%.3f", (w > 0 ? w : 0) }')"
  tmp=$out.parts
  mkdir -p "$tmp"
  n=$(echo "$files" | awk -F, '{ print NF }')
  i=1
  while [ "$i" -le "$count" ]; do
    f=$(echo "$files" | awk -F, -v k="$(( (i - 1) % n + 1 ))" '{ print $k }')
    (
      s=$(date +%s.%N)
      set +e
      got=$(curl -s -o /dev/null --max-time "$duration" -w '%{size_download}' "ftp://$server/$f")
      rc=$?
      e=$(date +%s.%N)
      echo "$i,$server,$f,$s,$e,$rc,${got:-0}" > "$tmp/$i"
    ) &
    i=$((i + 1))
  done
  wait
  { echo "flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes"; cat "$tmp"/* | sort -t, -k1,1n; } > "$out"
  rm -rf "$tmp"
}
if [ "$mode" = --background ]; then
  # Ansible runs scripts on a pty: ignore the SIGHUP its closing sends (as nohup(1) does);
  # the ignored disposition is inherited by ping/curl/tc.
  (trap '' HUP; run) < /dev/null > /dev/null 2> "$out.err" &
  echo "$!" > "$out.pid"
else
  run
fi
