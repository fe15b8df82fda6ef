# Shared by the guest tests that run QEMU TCG against iovm's back-ends
# (vhost-user.sh, vhost-user-crash.sh, netdisk-tcg.sh), sourced once $guest
# (the guest image folder) is set: their skip and fail exits, the work
# folder and its cleanup, the wait for a back-end's socket, the QEMU TCG
# harness beside them, and the skips for a missing guest image or QEMU. Not
# a command.

skip() { echo "SKIPPED: $*"; exit 77; }
die() { echo "FAIL: $*"; exit 1; }

# make_work NAME: a fresh $work folder /tmp/NAME.XXXXXX, and cleanup at
# exit: QEMU, which runs under the harness (found by this run's unique
# folder in its command line), the processes in $pids and those whose pid
# a daemon wrote to $work/*.pid are SIGKILLed, the test's own
# cleanup_more runs (define it after sourcing this), then $work goes.
make_work() {
	work=$(mktemp -d "/tmp/$1.XXXXXX")
	pids=""
	trap cleanup EXIT INT TERM
}
cleanup_more() { :; }
cleanup() {
	for q in $(pgrep -f "qemu-system-x86_64 .*$work/" || true); do
		kill -9 "$q" 2>/dev/null || true
	done
	for p in $pids; do kill -9 "$p" 2>/dev/null || true; done
	cleanup_more
	for f in "$work"/*.pid; do
		[ -f "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
	done
	wait 2>/dev/null || true
	rm -rf "$work"
}

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
