#!/bin/sh
# SCSI persistent reservations across VMs (suite 'uml'): two UML guests,
# A and B, one after the other, each with its own `iovm vhost-user-scsi`
# back-end (own socket, so its own I_T nexus) on the same image file, whose
# reservation state (IMAGE.pr) they share. With sg_persist and sg_raw on
# the guests' sg node:
#   A: registers (APTPL) and takes WRITE EXCLUSIVE; its writes succeed
#   B: its writes get RESERVATION CONFLICT, its reads succeed; it registers
#      and preempts A; now its writes succeed
#   A: its writes conflict, its reads succeed
#   both back-ends restarted: A still sees B's key and reservation (APTPL)
#      and its writes conflict; READ FULL STATUS names B's nexus
#   B re-registers without APTPL; both restarted: everything is gone
#   both guests up at once: B takes EXCLUSIVE ACCESS, A's reads and writes
#      conflict, A preempts B; B's next command gets REGISTRATIONS
#      PREEMPTED (2Ah/05h) and its reads and writes conflict
# Every step waits for the one before it (a guest run, or a file the other
# guest makes once its step is done): no timing.
# usage: uml-pr.sh IOVM   (IOVM_UML_DIR or IOVM_UML: see lib.sh)
set -u
iovm=$(realpath "${1:?usage: uml-pr.sh IOVM}")
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/backend.sh"
uml_require
command -v sg_persist >/dev/null && command -v sg_raw >/dev/null ||
	uml_skip "sg3-utils missing"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/uml-pr.XXXXXX")
pid_a= pid_b=
stop_all() {
	for p in $pid_a $pid_b; do kill -KILL "$p" 2>/dev/null; done
	pid_a= pid_b=
}
trap 'stop_all; rm -rf "$tmp"' EXIT

truncate -s 16M "$tmp/disk.img"
mkdir "$tmp/a" "$tmp/b"

# start X: the back-end of guest X on X/vhu.sock (log appended to X/iovm.log)
start() {
	"$iovm" vhost-user-scsi --socket "$tmp/$1/vhu.sock" \
		--disk "path=$tmp/disk.img,target=0" >>"$tmp/$1/iovm.log" 2>&1 &
	eval "pid_$1=\$!"
	backend_wait_sock "$tmp/$1/vhu.sock" "$!" ||
		{ cat "$tmp/$1/iovm.log"; uml_fail "iovm for $1 made no socket"; }
}

# stop X: SIGTERM, which must exit 0
stop() {
	local p st=0
	eval "p=\$pid_$1"
	kill -TERM "$p"
	wait "$p" || st=$?
	eval "pid_$1="
	[ "$st" = 0 ] || { cat "$tmp/$1/iovm.log"; uml_fail "iovm for $1 exited $st"; }
}

# guest X NAME: boots guest X on its back-end to run the steps in $steps
guest() {
	{
		cat <<'EOS'
set -u
modprobe -d "$UML_MODULES" virtio_scsi
dev=/sys/bus/scsi/devices/0:0:0:0
n=0
while ! ls $dev/scsi_generic/* >/dev/null 2>&1 || ! ls $dev/block/* >/dev/null 2>&1; do
	n=$((n + 1))
	[ $n -le 600 ] || { echo "no SCSI disk 0:0:0:0"; exit 10; }
	sleep 0.1
done
sg=/dev/$(ls $dev/scsi_generic)
n=0
while [ ! -c $sg ]; do
	n=$((n + 1))
	[ $n -le 600 ] || { echo "no $sg"; exit 10; }
	sleep 0.1
done
head -c 512 /dev/zero >blk.bin
fail() { echo "FAIL($me): $*"; exit 1; }
# A unit attention the guest may have pending comes out on a TEST UNIT
# READY; returns the first TUR's sg3_utils status (6: unit attention).
tur() { local st=0; sg_turs $sg >/dev/null 2>&1 || st=$?; sg_turs $sg >/dev/null 2>&1 || fail "TUR"; echo $st; }
# sg3_utils exit status: 0 good, 24 reservation conflict
wr() { sg_raw -s 512 -i blk.bin $sg 2a 00 00 00 00 00 00 00 01 00 >/dev/null 2>&1; echo $?; }
rd() { sg_raw -r 512 $sg 28 00 00 00 00 00 00 00 01 00 >/dev/null 2>&1; echo $?; }
expect() { [ "$2" = "$3" ] || fail "$1: status $2, expected $3"; echo "ok($me): $1: status $2"; }
out() { sg_persist --out "$@" $sg >po.out 2>&1 || { cat po.out; fail "sg_persist --out $*"; }; }
keys() { sg_persist --in -k $sg >pk.out 2>&1 || { cat pk.out; fail "read keys"; }; grep -E '^ +0x' pk.out | tr -d ' ' | tr '\n' ' '; }
EOS
		echo "me=$2"
		echo "$steps"
	} >"$tmp/$1/script.sh"
	backend_uml "$tmp/$1" 8
}

# guest_at_once X NAME: guest X in the background (its pid $bg_uml, its
# output in X/uml.out)
guest_at_once() {
	guest "$@" >"$tmp/$1/uml.out" 2>&1 &
	bg_uml=$!
}

start a
start b

steps='
tur >/dev/null
out --register --param-sark=0xa1 --param-aptpl
out --reserve --param-rk=0xa1 --prout-type=1
sg_persist --in -r $sg >pr.out 2>&1; grep -q "Key=0xa1" pr.out && grep -qi "Write Exclusive" pr.out ||
	{ cat pr.out; fail "READ RESERVATION"; }
echo "ok($me): registered 0xa1 (APTPL), reserved WRITE EXCLUSIVE"
expect "write as holder" "$(wr)" 0
'
guest a A1

steps='
tur >/dev/null
expect "write under A'"'"'s reservation" "$(wr)" 24
expect "read under A'"'"'s reservation" "$(rd)" 0
out --register --param-sark=0xb2 --param-aptpl
expect "write, registered, not holder" "$(wr)" 24
out --preempt --param-rk=0xb2 --param-sark=0xa1 --prout-type=1
[ "$(keys)" = "0xb2 " ] || { cat pk.out; fail "keys after preempt"; }
echo "ok($me): preempted A: keys 0xb2"
expect "write as the new holder" "$(wr)" 0
'
guest b B1

steps='
# the REGISTRATIONS PREEMPTED unit attention goes to the first command
# after the preemption, the kernel'"'"'s scan here (the unit tests check it)
echo "ok($me): first TEST UNIT READY: status $(tur)"
expect "write, preempted" "$(wr)" 24
expect "read, preempted" "$(rd)" 0
'
guest a A2

stop a
stop b
start a
start b

steps='
tur >/dev/null
[ "$(keys)" = "0xb2 " ] || { cat pk.out; fail "keys after the restart"; }
sg_persist --in -r $sg >pr.out 2>&1; grep -q "Key=0xb2" pr.out || { cat pr.out; fail "reservation after the restart"; }
echo "ok($me): both back-ends restarted: key 0xb2 and its reservation kept (APTPL)"
sg_persist --in -s $sg >ps.out 2>&1 || { cat ps.out; fail "READ FULL STATUS"; }
grep -q "b/vhu.sock" ps.out || { cat ps.out; fail "READ FULL STATUS names B"; }
echo "ok($me): READ FULL STATUS: $(grep -o "iSCSI name.*" ps.out | head -1)"
expect "write after the restart" "$(wr)" 24
'
guest a A3

steps='
tur >/dev/null
expect "write as holder after the restart" "$(wr)" 0
out --register --param-rk=0xb2 --param-sark=0xb3
echo "ok($me): re-registered as 0xb3 without APTPL"
'
guest b B3

stop a
stop b
start a
start b

steps='
tur >/dev/null
[ -z "$(keys)" ] || { cat pk.out; fail "keys after a restart without APTPL"; }
echo "ok($me): both back-ends restarted: no APTPL, no registrations"
expect "write, nothing reserved" "$(wr)" 0
'
guest a A4

# Both guests up at once: what a running back-end notices when the other
# changes the state under it. They take turns through files in $tmp
# (hostfs), each waiting for the other's step to be done: no timing.
steps='
tur >/dev/null
until [ -e "$UML_DIR/../b.reserved" ]; do sleep 0.1; done
expect "live: write under B'"'"'s EXCLUSIVE ACCESS" "$(wr)" 24
expect "live: read under B'"'"'s EXCLUSIVE ACCESS" "$(rd)" 24
out --register --param-sark=0xa5
out --preempt --param-rk=0xa5 --param-sark=0xb5 --prout-type=3
expect "live: write as the preemptor" "$(wr)" 0
touch "$UML_DIR/../a.preempted"
'
guest_at_once a A5
steps='
tur >/dev/null
out --register --param-sark=0xb5
out --reserve --param-rk=0xb5 --prout-type=3
touch "$UML_DIR/../b.reserved"
until [ -e "$UML_DIR/../a.preempted" ]; do sleep 0.1; done
st=0; sg_turs $sg >ua.out 2>&1 || st=$?
expect "live: first command after A preempted us" "$st" 6
grep -qi "registrations preempted" ua.out || { cat ua.out; fail "not REGISTRATIONS PREEMPTED"; }
echo "ok($me): live: the sense says $(grep -io "registrations preempted" ua.out | head -1)"
expect "live: write, preempted" "$(wr)" 24
expect "live: read, preempted under EXCLUSIVE ACCESS" "$(rd)" 24
'
guest b B5
wait "$bg_uml" || { cat "$tmp/a/uml.out"; uml_fail "guest A5 failed (above)"; }
cat "$tmp/a/uml.out"

stop a
stop b
for x in a b; do
	if grep -E "refused|dropping|error|warning" "$tmp/$x/iovm.log"; then
		uml_fail "iovm for $x logged a problem (above)"
	fi
done
[ -f "$tmp/disk.img.pr" ] || uml_fail "no state file beside the image"
echo "ok: two nexuses on one image through disk.img.pr, 8 guest runs (2 at once), 3 back-end lives each"
