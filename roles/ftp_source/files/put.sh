#!/bin/sh
# Write a file whose content is given base64-encoded, only when it differs (the template
# module's behaviour, in one shell command: no Python on the node).
#
# Usage: put.sh PATH MODE BASE64
#   PATH is written through PATH.tmp and a rename, so it is never seen half written; owner
#   root, mode MODE. Prints CHANGED when PATH was created or changed.
set -eu
path=$1 mode=$2 b64=$3
mkdir -p "$(dirname "$path")"
printf '%s' "$b64" | base64 -d > "$path.tmp"
chmod "$mode" "$path.tmp"
if [ -f "$path" ] && cmp -s "$path.tmp" "$path" && [ "$(stat -c '%u %a' "$path")" = "0 ${mode#0}" ]; then
    rm -f "$path.tmp"
else
    mv -f "$path.tmp" "$path"
    echo CHANGED
fi
