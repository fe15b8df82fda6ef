#!/bin/sh
# User-Mode Linux boots with the host's / as its root (hostfs) and runs a host
# script as PID 1 (suite 'uml'): uname -r is the UML kernel's, a file it
# writes through hostfs reads back on the host, host tools (fio) run inside,
# its modules load, and both a zero and a non-zero exit status come back.
# usage: uml-boot.sh   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
. "$(dirname "$0")/lib.sh"
uml_require

tmp=$(mktemp -d "${TMPDIR:-/tmp}/uml-boot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
fail=0

cat >"$tmp/script.sh" <<EOS
set -e
uname -r >"$tmp/release"
echo "$token" >"$tmp/written"
grep -q '^[^ ]* / hostfs ' /proc/mounts || { cat /proc/mounts; exit 10; }
[ -c /dev/null ] || exit 11
fio --version | grep -q '^fio-' || exit 12
modprobe -d "\$UML_MODULES" virtio_blk || exit 13
grep -q '^virtio_blk ' /proc/modules || exit 14
modprobe -d "\$UML_MODULES" -r virtio_blk || exit 15
echo "uml script done"
EOS
uml_run "$tmp" "$tmp/script.sh"
st=$?
if [ "$st" != 0 ]; then
	echo "FAIL: the boot script exited $st"
	cat "$tmp/output.log"
	tail -n 40 "$tmp/console.log"
	exit 1
fi
echo "ok: booted and ran the script in $UML_SECONDS s"
want=$(cat "$(dirname "$UML_KERNEL")/kernel-version")
got=$(cat "$tmp/release")
if [ "$got" = "$want" ] && [ "$got" != "$(uname -r)" ]; then
	echo "ok: uname -r inside UML is $got (host: $(uname -r))"
else
	echo "FAIL: uname -r inside UML is '$got', expected '$want'"
	fail=1
fi
if [ "$(cat "$tmp/written")" = "$token" ]; then
	echo "ok: a file written through hostfs reads back on the host"
else
	echo "FAIL: the file written through hostfs does not read back"
	fail=1
fi

# A non-zero status comes back as it is.
printf 'exit 7\n' >"$tmp/fail.sh"
uml_run "$tmp" "$tmp/fail.sh"
st=$?
if [ "$st" = 7 ]; then
	echo "ok: exit status 7 came back ($UML_SECONDS s)"
else
	echo "FAIL: a script's exit 7 came back as $st"
	fail=1
fi
exit $fail
