# Helpers shared by the probe-side KVM tests (sourced, not run).
# Probe exit convention: the probe writes 0 to port 0xf4 on PASS, so the VMM
# exits with status 1; FAIL gives 3, a guest exception 5.

die() {
	echo "FAIL: $*" >&2
	exit 1
}

# KVM tests never pass silently without KVM. The -c test comes first:
# "<>" opens with O_CREAT, so on a host without KVM it alone would make
# /dev/kvm a regular file and every later test would fail instead of skip.
need_kvm() {
	if ! [ -c /dev/kvm ]; then
		echo "SKIPPED: no /dev/kvm character device on this host"
		exit 77
	fi
	if ! (: <>/dev/kvm) 2>/dev/null; then
		echo "SKIPPED: cannot open /dev/kvm"
		exit 77
	fi
}

# Sets qemu and bios for a QEMU run of the probe under KVM (qboot), or
# skips the test when either is missing.
need_qemu() {
	qemu=$(command -v qemu-system-x86_64) || {
		echo "SKIPPED: qemu-system-x86_64 not installed"
		exit 77
	}
	bios=/usr/share/qemu/qboot.rom
	[ -r "$bios" ] || { echo "SKIPPED: $bios missing"; exit 77; }
}

# Scratch directory on a filesystem with O_DIRECT (not tmpfs); removed on
# exit.
make_scratch() {
	scratch=$(mktemp -d "${MESON_BUILD_ROOT:-$PWD}/probe-test.XXXXXX") ||
		die "cannot create a scratch directory"
	trap 'rm -rf "$scratch"' EXIT
}

# make_scratch, and the VMM whose pid the test keeps in $pid (empty while
# none runs) SIGKILLed on exit.
make_scratch_vm() {
	make_scratch
	pid=
	trap '[ -z "$pid" ] || kill -9 "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT
}

# The control socket of a VMM started with --api-socket "$api": ctl runs
# `iovm ctl` on it ($iovm), ok runs it and fails the test on an error (its
# output in $scratch/out), has LINE checks that output for a whole line.
ctl() { "$iovm" ctl --socket "$api" "$@"; }
ok() { ctl "$@" >"$scratch/out" 2>&1 || die "iovm ctl $*: $(cat "$scratch/out")"; }
has() { grep -qxF -- "$1" "$scratch/out" || die "no line '$1' in: $(cat "$scratch/out")"; }

# wait_api LOG: waits until the VMM $pid has made its socket $api; fails
# (LOG shown) if it exits first.
wait_api() {
	for _ in $(seq 400); do
		[ -S "$api" ] && return 0
		kill -0 "$pid" 2>/dev/null || { cat "$1"; die "iovm exited before its API socket appeared"; }
		sleep 0.05
	done
	die "no API socket"
}

# run_probe LOG TIMEOUT VMM-COMMAND...: runs a VMM with the probe, output
# to LOG (and echoed), sets $rc.
run_probe() {
	log=$1
	t=$2
	shift 2
	echo "+ $*"
	timeout -k 5 "$t" "$@" >"$log" 2>&1
	rc=$?
	cat "$log"
	[ "$rc" = 124 ] && die "timed out after ${t}s"
	return 0
}

# expect_pass LOG: status 1 and a PASS line.
expect_pass() {
	[ "$rc" = 1 ] || die "VMM exit status $rc, expected 1 (probe PASS)"
	grep -q '^probe: PASS' "$1" || die "no 'probe: PASS' line"
}

# field LOG PREFIX KEY: value of KEY=... on the first line starting with
# PREFIX.
field() {
	grep -m1 "^$2" "$1" | tr ' ' '\n' | sed -n "s/^$3=//p"
}

# check_pattern LOG WHAT FILE: whether the host FILE holds the pattern that
# the probe's "probe: WHAT pattern offset=.. len=.. seed=.." line in LOG says
# it wrote (checked by $check, blk-check); no such line fails the test.
check_pattern() {
	off=$(field "$1" "probe: $2 pattern" offset)
	len=$(field "$1" "probe: $2 pattern" len)
	seed=$(field "$1" "probe: $2 pattern" seed)
	[ -n "$seed" ] || die "no pattern line"
	"$check" "$3" "$off" "$len" "$seed"
}

# Until iovm's disk devices are wired in, its run refuses --disk with "not
# supported by this build": report that as a skip with the reason, never as
# a pass.
skip_if_no_disks() {
	if grep -q 'not supported by this build' "$1"; then
		echo "SKIPPED: $(grep -m1 'not supported by this build' "$1")"
		exit 77
	fi
}
