#!/bin/sh
# Prepare an FTP source's folders and its large sparse files.
#
# Usage: files.sh DIR SIZE_BYTES NAME...
#   DIR/root   the anonymous FTP root (root-owned, 0755: vsftpd refuses a writable one),
#   DIR/empty  vsftpd's secure_chroot_dir (empty, root-owned, 0755),
#   DIR/root/NAME  SIZE_BYTES each, sparse (truncate -s): no disk is used, reads give zeros.
# Creates or resizes only what differs; prints CHANGED when it did anything.
set -eu
dir=$1 size=$2
shift 2
changed=0
for d in "$dir" "$dir/root" "$dir/empty"; do
    if [ ! -d "$d" ]; then mkdir -p "$d"; changed=1; fi
    if [ "$(stat -c '%u %a' "$d")" != "0 755" ]; then chown 0:0 "$d"; chmod 0755 "$d"; changed=1; fi
done
for name in "$@"; do
    f=$dir/root/$name
    if [ ! -f "$f" ] || [ "$(stat -c %s "$f")" != "$size" ]; then
        truncate -s "$size" "$f"; changed=1
    fi
    if [ "$(stat -c '%u %a' "$f")" != "0 644" ]; then chown 0:0 "$f"; chmod 0644 "$f"; changed=1; fi
done
if [ $changed = 1 ]; then echo CHANGED; fi
