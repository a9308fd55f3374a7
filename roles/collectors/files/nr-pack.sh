#!/bin/sh
# Pack a trial's raw data on this node into TRIAL_DIR.tar.gz and print the archive's path.
# Usage: nr-pack.sh TRIAL_DIR
set -eu
dir=$1
mkdir -p "$dir"
rm -f "$dir"/*.pid
tar -C "$dir" -czf "$dir.tar.gz" .
echo "$dir.tar.gz"
