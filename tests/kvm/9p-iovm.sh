#!/bin/bash
# The probe's 9P2000.L client against iovm's virtio-9p device on a real
# folder: reads a file the host wrote, writes one in msize-sized chunks that
# the host then checks byte for byte, readdir, walks that must fail, a
# hostile walk; at msize 8 KiB, 512000 and 4 MiB, and with a share capped
# at 64 KiB (the client must get the cap). The created file's mode: in
# user.virtfs.mode with the host file at 0600 under the default
# security=mapped-xattr, on the host file itself under security=none.
# Usage: 9p-iovm.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
make_scratch
share=$scratch/share
mkdir -p "$share/sub"
printf 'hello from the host\n' >"$share/hello.txt"
for i in $(seq 0 99); do : >"$share/sub/f$i"; done

check_file() {
	python3 - "$1" "$2" <<'PY' || die "host file does not hold what the probe wrote"
import sys
path, n = sys.argv[1], int(sys.argv[2])
data = open(path, 'rb').read()
if len(data) != n:
    sys.exit("size %d, expected %d" % (len(data), n))
want = bytes(((i * 31 + (i >> 12) + 7) & 0xff) for i in range(n))
if data != want:
    sys.exit("content differs")
PY
}

n=0
for cfg in "msize=8192" "msize=512000 none" "msize=4194304" "msize=4194304 cap=65536"; do
	n=$((n + 1))
	set -- $cfg
	spec="path=$share,tag=probe9p"
	sec=mapped-xattr
	if [ "${2:-}" = none ]; then
		spec="$spec,security=none"
		sec=none
		set -- "$1"
	fi
	expect=${1#msize=}
	if [ $# = 2 ]; then
		spec="$spec,msize=${2#cap=}"
		expect=${2#cap=}
	fi
	rm -f "$share/from-probe"
	run_probe "$scratch/log$n" 120 "$iovm" run --kernel "$probe" \
		--memory 256M --share "$spec" --append "test=9p $1"
	expect_pass "$scratch/log$n"
	got=$(field "$scratch/log$n" "probe: 9p version" msize)
	[ "$got" = "$expect" ] || die "negotiated msize $got, expected $expect ($cfg)"
	len=$(field "$scratch/log$n" "probe: 9p pattern" len)
	[ -n "$len" ] || die "no pattern line"
	check_file "$share/from-probe" "$len"
	if [ $sec = none ]; then
		[ "$(stat -c %a "$share/from-probe")" = 640 ] || die "mode of the created file"
	else
		[ "$(stat -c %a "$share/from-probe")" = 600 ] || die "host mode of the created file"
		mode=$(python3 -c 'import os, sys; print(oct(int.from_bytes(os.getxattr(sys.argv[1], "user.virtfs.mode"), "little")))' "$share/from-probe")
		[ "$mode" = 0o100640 ] || die "stored mode of the created file: $mode"
	fi
	[ ! -e "$share/scratch" ] || die "unlinked file still there"
done
echo "PASS"
