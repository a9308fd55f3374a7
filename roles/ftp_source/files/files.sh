#!/bin/sh
# Prepare an FTP source's folders and its large sparse files.
#
# Usage: files.sh DIR SIZE_BYTES NAME...
#   DIR/root   the anonymous FTP root (root-owned, 0755: vsftpd refuses a writable one),
#   DIR/empty  vsftpd's secure_chroot_dir (empty, root-owned, 0755),
#   DIR/root/NAME  SIZE_BYTES each, sparse (truncate -s): no disk is used, reads give zeros.
# Changes nothing when every folder and file is as wanted; prints CHANGED when it did anything.
# One stat reads every folder and one every file, and the files are fixed by one truncate,
# chown and chmod: a fork costs ~80 ms on a QEMU TCG node, and a source has a file per flow
# (50 for pie-vs-red's), which took 6.2 s for its three sources file by file.
set -eu
dir=$1 size=$2
shift 2
changed=0
for d in "$dir" "$dir/root" "$dir/empty"; do
    if [ ! -d "$d" ]; then mkdir -p "$d"; changed=1; fi
done
if [ "$(stat -c '%u %a' -- "$dir" "$dir/root" "$dir/empty")" != "$(printf '0 755\n0 755\n0 755')" ]; then
    chown 0:0 -- "$dir" "$dir/root" "$dir/empty"
    chmod 0755 -- "$dir" "$dir/root" "$dir/empty"
    changed=1
fi
cd "$dir/root"
if [ $# -gt 0 ]; then
    # stat prints one line per file in the order given, and nothing for a missing one
    present=1
    for name in "$@"; do [ -f "$name" ] || present=0; done
    want="" n=0
    while [ "$n" -lt $# ]; do want="$want${want:+
}$size 0 644"; n=$((n + 1)); done
    if [ $present = 0 ] || [ "$(stat -c '%s %u %a' -- "$@")" != "$want" ]; then
        truncate -s "$size" -- "$@"
        chown 0:0 -- "$@"
        chmod 0644 -- "$@"
        changed=1
    fi
fi
if [ $changed = 1 ]; then echo CHANGED; fi
