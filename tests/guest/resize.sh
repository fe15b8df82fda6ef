#!/bin/sh
# Online resize through the control socket, seen by Linux's own drivers:
# `iovm vhost-user-blk` or `iovm vhost-user-scsi` with --api-socket serves a
# 64 MiB file to the default guest image under QEMU TCG. Once the guest has
# checked the old size and says so on its console, the host asks `resize`
# through `iovm ctl` to shrink the disk (refused: the file and the guest's
# disk keep their size), then to grow it to 128 MiB (its reply as a
# table), then again without a size (--json: nothing changed). The guest, polling with a bound, sees
# the new size without a reboot:
#   blk:  /sys/block/vda/size goes to 262144 (virtio-blk's config change:
#         CONFIG_CHANGE_MSG to QEMU, which re-reads config space and
#         interrupts the guest; the reply says the front-end acknowledged);
#   scsi: a TEST UNIT READY (or the READ CAPACITY after it) meets the
#         CAPACITY DATA HAS CHANGED unit attention, which the kernel logs,
#         then sg_readcap reports 262144 blocks; a rescan gives
#         /sys/block/sda/size the same;
# then it writes and reads back data past the old 64 MiB (dd and a fio
# verify up to the last block), and the host finds that data in its file.
# Usage: resize.sh blk|scsi IOVM_BINARY GUEST_DIR
set -eu

usage="usage: resize.sh blk|scsi IOVM GUEST_DIR"
type=${1:?$usage}
iovm=$(realpath "${2:?$usage}")
guest=$(realpath "${3:?$usage}")
case "$type" in blk|scsi) ;; *) echo "$usage" >&2; exit 2 ;; esac

. "$(dirname "$(realpath "$0")")/lib.sh"
ctl() { "$iovm" ctl --socket "$work/api.sock" "$@"; }

make_work "iovm-resize-$type"
MiB=1048576

truncate -s 64M "$work/rw.img"
extra=
[ "$type" = blk ] || extra=",target=0"
"$iovm" "vhost-user-$type" --socket "$work/be.sock" --api-socket "$work/api.sock" \
	--disk "path=$work/rw.img$extra" --once >"$work/be.log" 2>&1 &
be_pid=$!
pids="$pids $be_pid"
wait_sock "$work/be.sock" "$work/be.log" "the back-end"
wait_sock "$work/api.sock" "$work/be.log" "the back-end's control socket"
[ "$(stat -c %a "$work/api.sock")" = 600 ] || die "control socket mode $(stat -c %a "$work/api.sock")"

# The guest's side. $D: the disk; new_size: whether the guest sees 128 MiB.
if [ "$type" = blk ]; then
	cat >"$work/guest.sh" <<'EOF'
D=vda
new_size() { [ "$(cat /sys/block/$D/size)" = 262144 ]; }
EOF
else
	cat >"$work/guest.sh" <<'EOF'
D=$(ls /sys/bus/scsi/devices/0:0:0:0/block/ 2>/dev/null)
# TEST UNIT READY first: it takes the unit attention (and fails with it),
# then READ CAPACITY answers. (A READ CAPACITY sent just after the resize
# may take it instead; the kernel logs it whichever command met it.)
new_size() {
	sg_turs /dev/$D >/dev/null 2>&1 || true
	sg_readcap /dev/$D 2>/dev/null | grep -q "Number of logical blocks=262144"
}
EOF
fi
cat >>"$work/guest.sh" <<EOF
set -e
fail() { echo "GUEST FAIL: \$*"; exit 1; }
[ -n "\$D" ] || fail "no disk"
[ "\$(cat /sys/block/\$D/size)" = 131072 ] || fail "size at start: \$(cat /sys/block/\$D/size)"
if [ $type = scsi ]; then
	sg_readcap /dev/\$D | grep -q "Number of logical blocks=131072" || fail "sg_readcap at start"
fi
echo "RESIZE-READY"
i=0
until new_size; do
	i=\$((i + 1))
	[ \$i -le 6000 ] || fail "the new size never came (\$(cat /sys/block/\$D/size))"
	sleep 0.1
done
echo "NEW SIZE SEEN after \$i polls"
if [ $type = scsi ]; then
	dmesg | grep -q "Capacity data has changed" && echo "UNIT ATTENTION SEEN"
	echo 1 >/sys/block/\$D/device/rescan
	[ "\$(cat /sys/block/\$D/size)" = 262144 ] || fail "size after rescan: \$(cat /sys/block/\$D/size)"
fi
dd if=/dev/urandom of=/tmp/pat bs=1M count=4 2>/dev/null
dd if=/tmp/pat of=/dev/\$D bs=1M seek=100 oflag=direct conv=fsync 2>/dev/null || fail "write at 100M"
dd if=/dev/\$D of=/tmp/back bs=1M skip=100 count=4 iflag=direct 2>/dev/null || fail "read at 100M"
cmp /tmp/pat /tmp/back || fail "read back differs"
fio --name=grown --filename=/dev/\$D --direct=1 --ioengine=libaio --rw=randwrite \\
	--bs=4k --iodepth=16 --offset=120M --size=8M --verify=crc32c --do_verify=1 \\
	--verify_fatal=1 --minimal >/tmp/fio.out 2>&1 || { cat /tmp/fio.out; fail "fio verify past 64M"; }
dd if=/dev/\$D of=/dev/null bs=512 skip=262143 count=1 iflag=direct 2>/dev/null || fail "last block"
echo "PAT \$(sha256sum </tmp/pat | cut -d' ' -f1)"
echo "NEW SPACE OK"
EOF

if [ "$type" = blk ]; then
	dev="-device vhost-user-blk-pci,chardev=c0,num-queues=1"
else
	dev="-device vhost-user-scsi-pci,chardev=c0,num_queues=1"
fi
# shellcheck disable=SC2086
"$harness" -g "$guest" -s "$work/guest.sh" -m 512M -t 900 -- \
	-object memory-backend-memfd,id=mem,size=512M,share=on -numa node,memdev=mem \
	-chardev "socket,id=c0,path=$work/be.sock" $dev >"$work/console" 2>&1 &
qemu_pid=$!
pids="$pids $qemu_pid"

# The guest says when it has checked the old size (bounded: a boot under a
# loaded TCG takes a minute or two).
n=0
until grep -q "RESIZE-READY" "$work/console"; do
	n=$((n + 1))
	if [ $n -gt 900 ] || ! kill -0 "$qemu_pid" 2>/dev/null; then
		cat "$work/console"
		die "the guest never got ready for the resize"
	fi
	sleep 1
done

# A shrink is refused and changes nothing.
rc=0
out=$(ctl resize disk=disk0 size=32M 2>&1) || rc=$?
echo "shrink: $out"
[ "$rc" = 1 ] || die "a shrink to 32 MiB: iovm ctl exited $rc"
echo "$out" | grep -q "GenericError: disk0: .*shrinking is refused" || die "shrink: unexpected answer"
[ "$(stat -c %s "$work/rw.img")" = $((64 * MiB)) ] || die "the refused shrink changed the file"

# Growing to 128 MiB.
out=$(ctl resize disk=disk0 size=128M) || die "resize to 128 MiB failed: $out"
echo "grow: $out"
for want in "disk: disk0" "old-size: $((64 * MiB))" "new-size: $((128 * MiB))" \
	"changed: yes" "guest-notified: yes"; do
	echo "$out" | grep -qx "$want" || die "grow: no '$want' in the reply"
done
[ "$(stat -c %s "$work/rw.img")" = $((128 * MiB)) ] || die "the file did not grow"
# Without a size: the file's size, which the disk has already.
out=$(ctl --json resize disk=disk0) || die "resize without a size failed: $out"
echo "again: $out"
echo "$out" | grep -q '"new-size":134217728,"changed":false' || die "again: $out"

if ! wait "$qemu_pid"; then
	cat "$work/console"
	die "the guest failed"
fi
grep -q "NEW SPACE OK" "$work/console" || { cat "$work/console"; die "no NEW SPACE OK"; }
grep "NEW SIZE SEEN" "$work/console" | tr -d '\r'
if [ "$type" = scsi ]; then
	grep -q "UNIT ATTENTION SEEN" "$work/console" ||
		{ cat "$work/console"; die "the guest's kernel met no CAPACITY DATA HAS CHANGED"; }
fi
pat=$(sed -n 's/^PAT \([0-9a-f]*\).*/\1/p' "$work/console" | tr -d '\r')
[ -n "$pat" ] || die "the guest printed no checksum"
[ "$(dd if="$work/rw.img" bs=1M skip=100 count=4 2>/dev/null | sha256sum | cut -d' ' -f1)" = "$pat" ] ||
	die "the host file does not hold what the guest wrote past 64 MiB"
wait "$be_pid" || { cat "$work/be.log"; die "the back-end exited with an error"; }
echo "PASS: resize $type"
