# Shared by the vhost-user guest tests (vhost-user.sh, vhost-user-crash.sh),
# sourced once $guest (the guest image folder) is set: their skip and fail
# exits, the wait for a back-end's socket, the QEMU TCG harness beside them,
# and the skips for a missing guest image or QEMU. Not a command.

skip() { echo "SKIPPED: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

# wait_sock SOCK LOG WHO: waits up to 5 s for a back-end's socket; without
# it, shows the back-end's LOG and fails naming WHO.
wait_sock() {
	for _ in $(seq 50); do
		[ -S "$1" ] && return 0
		sleep 0.1
	done
	cat "$2"
	die "$3 did not create its socket"
}

harness=$(dirname "$(realpath "$0")")/qemu-tcg.sh
[ -r "$guest/vmlinux" ] && [ -r "$guest/initramfs.cpio.gz" ] ||
	skip "no guest image in $guest (run tools/mkguest.sh $guest)"
command -v qemu-system-x86_64 >/dev/null || skip "qemu-system-x86_64 missing"
