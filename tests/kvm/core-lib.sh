# Helpers of the VMM-core KVM tests (sourced).
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

scratch=$(mktemp -d) || die "no scratch directory"
trap 'rm -rf "$scratch"' EXIT

# run_vm TIMEOUT ARGS...: runs iovm with stdin from /dev/null; stdout in
# $scratch/out, stderr in $scratch/err, status in $rc (both echoed).
run_vm() {
	t=$1
	shift
	echo "+ iovm $*"
	# PRESERVE=1: the timeout is the planned stop (SIGTERM), not a hang.
	timeout ${PRESERVE:+--preserve-status} -k 5 "$t" "$IOVM" "$@" </dev/null \
		>"$scratch/out" 2>"$scratch/err"
	rc=$?
	sed -i 's/\r$//' "$scratch/out"	# the guest's serial line ends
	sed 's/^/out: /' "$scratch/out" | head -100
	sed 's/^/err: /' "$scratch/err"
	echo "status: $rc"
	[ "$rc" = 124 ] && die "iovm did not stop within ${t}s"
	return 0
}

expect_rc() {
	[ "$rc" = "$1" ] || die "exit status $rc, expected $1"
}

expect_line() {	# FILE REGEX
	grep -Eq -- "$2" "$scratch/$1" || die "no line matching '$2' in std$1"
}
