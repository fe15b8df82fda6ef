#!/bin/bash
# query-stats under `iovm run` against the probe's own count: the probe's
# blk test (every request type, then 4k/16k/64k random writes and verified
# reads at depths 1 and 32) on a virtio-blk disk with two request queues,
# holding after its PASS. The probe prints what completed by kind (OK
# requests and their bytes, failed ones). iovm's counters, read through
# `iovm ctl --json stats` while the guest holds (idle, so final), must
# equal them exactly: reads, writes, flushes, discards and write-zeroes,
# ops and bytes; no errors (the probe's out-of-range reads are refused by
# the device before they reach the disk, so they are not disk errors);
# nothing in flight; each histogram sums to its op count; the queues' sum
# is the total, and both queues carried requests. Then `shutdown`.
# Usage: stats-run.sh IOVM PROBE_ELF
set -u
. "$(dirname "$0")/probe-lib.sh"
iovm=$1 probe=$2
need_kvm
command -v python3 >/dev/null || { echo "SKIPPED: python3 missing"; exit 77; }
make_scratch_vm
disk=$scratch/disk.img
api=$scratch/api.sock
fallocate -l 32M "$disk" || die "cannot create $disk"

"$iovm" run --kernel "$probe" --memory 128M \
	--disk "path=$disk,cache=writeback,queues=2" \
	--append "test=blk seed=11 queues=2 hold_ms=600000" --api-socket "$api" \
	>"$scratch/log" 2>&1 &
pid=$!
for _ in $(seq 6000); do
	grep -q '^probe: HOLD' "$scratch/log" && break
	grep -q '^probe: FAIL' "$scratch/log" && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.05
done
grep -q '^probe: HOLD' "$scratch/log" || { cat "$scratch/log"; die "no probe: HOLD"; }
ctl --json stats >"$scratch/stats.json" || die "iovm ctl stats: $(cat "$scratch/stats.json")"
ok shutdown
wait "$pid"
rc=$?
pid=
cat "$scratch/log"
[ "$rc" = 0 ] || die "exit status $rc after shutdown, expected 0"

python3 - "$scratch/log" "$scratch/stats.json" <<'EOF' || die "statistics differ from the probe's count"
import json, re, sys

log, stats = sys.argv[1], sys.argv[2]
text = open(log, errors="replace").read()
m = re.search(r"^probe: blk done (.*)$", text, re.M)
if not m:
    print("the probe printed no 'blk done' line")
    sys.exit(1)
probe = {}
for item in m.group(1).split():
    kind, vals = item.split("=")
    ok, nbytes, failed = (int(x) for x in vals.split("/"))
    probe[kind] = (ok, nbytes, failed)
print("probe:", probe)

reply = json.loads(open(stats).read())
disks = reply["return"]["disks"]
if len(disks) != 1:
    print("expected one disk, got", len(disks))
    sys.exit(1)
d = disks[0]
t = d["total"]
bad = []
for kind, (ok, nbytes, failed) in probe.items():
    k = t[kind]
    print("iovm: %s ops=%d bytes=%d errors=%d merged=%d" %
          (kind, k["ops"], k["bytes"], k["errors"], k.get("merged", 0)))
    if k["ops"] != ok or k["bytes"] != nbytes:
        bad.append("%s: iovm %d ops / %d bytes, the probe %d / %d" %
                   (kind, k["ops"], k["bytes"], ok, nbytes))
    if k["errors"] != 0:
        bad.append("%s: %d errors" % (kind, k["errors"]))
    if sum(b["count"] for b in k["histogram"]) != k["ops"]:
        bad.append("%s: the histogram does not sum to %d" % (kind, k["ops"]))
    qsum = sum(q[kind]["ops"] for q in d["queues"])
    if qsum != k["ops"]:
        bad.append("%s: the queues' ops sum to %d, the total is %d" % (kind, qsum, k["ops"]))
if probe["read"][0] < 1000 or probe["write"][0] < 1000:
    bad.append("the probe's job was too small to mean anything: %r" % probe)
busy = [q["queue"] for q in d["queues"] if q["read"]["ops"] + q["write"]["ops"] > 0]
if len(busy) != 2:
    bad.append("requests on queues %r, expected both of 2" % busy)
if t["inflight"] != 0:
    bad.append("%d requests in flight with the guest idle" % t["inflight"])
if bad:
    print("\n".join(bad))
    sys.exit(1)
EOF
echo PASS
