#!/bin/sh
# A real Ceph cluster on loopback for the tests, from Debian's packages:
# one ceph-mon and three ceph-osd daemons (BlueStore on sparse files),
# cephx off, no mgr (pools, images and I/O do not need one), pool "iovm"
# of size 3 / min_size 2 with 8 PGs on one host.
#   cluster.sh start DIR       make and start it in DIR (writes DIR/ceph.conf
#                              and DIR/env); returns once an image can be made
#   cluster.sh stop DIR        SIGKILL every daemon of DIR and wait for them
#   cluster.sh kill-osd DIR N  SIGKILL osd.N (fault tests)
#   cluster.sh start-osd DIR N restart osd.N; returns once the map has it up
# Exit 77 with "SKIPPED: ..." when the packages are missing.
set -u
cmd=${1:-} dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || {
	echo "usage: $0 start|stop|kill-osd|start-osd DIR [N]" >&2
	exit 2
}

die() {
	echo "cluster.sh: $*" >&2
	exit 1
}

need() {
	for b in ceph-mon ceph-osd ceph rbd monmaptool; do
		command -v "$b" >/dev/null 2>&1 || {
			echo "SKIPPED: $b is not installed (apt-get install ceph-mon ceph-osd ceph-common)"
			exit 77
		}
	done
}

ceph_() {
	timeout 60 ceph -c "$dir/ceph.conf" "$@"
}

# The pid of a daemon of this cluster: its pidfile, if that process lives.
pid_of() {
	[ -f "$dir/run/$1.pid" ] || return 1
	p=$(cat "$dir/run/$1.pid" 2>/dev/null) || return 1
	[ -n "$p" ] && kill -0 "$p" 2>/dev/null && echo "$p"
}

log_tail() {
	[ -f "$dir/log/$1.log" ] && tail -n 15 "$dir/log/$1.log" >&2
}

start_osd() {
	ceph-osd -c "$dir/ceph.conf" -i "$1" >>"$dir/log/osd.$1.out" 2>&1 ||
		{ log_tail "osd.$1"; die "osd.$1 did not start"; }
}

# Waits until osd.N is up in the map (true) or down (false).
wait_osd() {
	i=0
	while [ $i -lt 120 ]; do
		s=$(ceph_ osd dump 2>/dev/null | awk -v o="osd.$1" '$1 == o { print $2 }')
		[ "$s" = "$2" ] && return 0
		i=$((i + 1))
		sleep 0.5
	done
	log_tail "osd.$1"
	die "osd.$1 is not $2 after 60 s"
}

start() {
	need
	mkdir -p "$dir" || die "cannot make $dir"
	dir=$(cd "$dir" && pwd)
	[ -e "$dir/ceph.conf" ] && die "$dir already holds a cluster (stop it, then remove the folder)"
	mkdir -p "$dir/run" "$dir/log" "$dir/mon.a"
	t0=$(date +%s.%N)
	# A free port for the monitor (several clusters may exist at once).
	port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	fsid=$(cat /proc/sys/kernel/random/uuid)
	cat >"$dir/ceph.conf" <<CONF
[global]
fsid = $fsid
mon_host = 127.0.0.1:$port
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
ms_bind_ipv4 = true
ms_bind_ipv6 = false
public_network = 127.0.0.0/8
# one host: replicas go to different OSDs, not hosts
osd_crush_chooseleaf_type = 0
osd_pool_default_size = 3
osd_pool_default_min_size = 2
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
mon_allow_pool_delete = true
paxos_propose_interval = 0.1
mon_osd_min_down_reporters = 1
# a dead client's exclusive lock passes on in seconds, not ~30
osd_client_watch_timeout = 5
run_dir = $dir/run
pid_file = $dir/run/\$name.pid
admin_socket = $dir/run/\$name.asok
log_file = $dir/log/\$name.log
[mon.a]
mon_data = $dir/mon.a
[osd]
osd_data = $dir/osd.\$id
osd_objectstore = bluestore
# not \$osd_data/block: BlueStore makes that a symlink to this path
bluestore_block_path = $dir/osd.\$id.block
bluestore_block_size = 4294967296
bluestore_cache_size = 67108864
osd_memory_target = 536870912
# the virtual disk says it is rotational: no HDD sleeps between recovery ops
osd_recovery_sleep = 0
osd_recovery_sleep_hdd = 0
osd_recovery_sleep_hybrid = 0
osd_op_num_shards = 2
osd_heartbeat_grace = 5
[client]
# writes complete once the OSDs hold them (tests check durability)
rbd_cache = false
CONF
	monmaptool --create --add a "127.0.0.1:$port" --fsid "$fsid" "$dir/monmap" >/dev/null ||
		die "monmaptool failed"
	ceph-mon -c "$dir/ceph.conf" -i a --mkfs --monmap "$dir/monmap" >"$dir/log/mon.a.out" 2>&1 ||
		{ cat "$dir/log/mon.a.out" >&2; die "ceph-mon --mkfs failed"; }
	ceph-mon -c "$dir/ceph.conf" -i a >>"$dir/log/mon.a.out" 2>&1 ||
		{ log_tail mon.a; die "ceph-mon did not start"; }
	# The OSDs' stores are made while the monitor comes up.
	for i in 0 1 2; do
		mkdir -p "$dir/osd.$i"
		ceph-osd -c "$dir/ceph.conf" -i $i --mkfs --no-mon-config \
			>"$dir/log/osd.$i.out" 2>&1 &
	done
	ok=1
	for i in 0 1 2; do wait || ok=0; done
	[ $ok = 1 ] || { cat "$dir"/log/osd.*.out >&2; die "ceph-osd --mkfs failed"; }
	for i in 0 1 2; do
		ceph_ osd create >/dev/null 2>"$dir/log/client.err" ||
			{ cat "$dir/log/client.err" >&2; log_tail mon.a; die "the monitor does not answer"; }
	done
	for i in 0 1 2; do start_osd $i; done
	ceph_ osd pool create iovm 8 8 >/dev/null 2>"$dir/log/client.err" ||
		{ cat "$dir/log/client.err" >&2; die "cannot create pool iovm"; }
	ceph_ osd pool application enable iovm rbd >/dev/null 2>&1
	timeout 120 rbd -c "$dir/ceph.conf" pool init iovm 2>"$dir/log/client.err" ||
		{ cat "$dir/log/client.err" >&2; die "rbd pool init failed"; }
	# Ready: an image can be made (every PG active).
	timeout 120 rbd -c "$dir/ceph.conf" create iovm/ready-check --size 16M 2>"$dir/log/client.err" ||
		{ cat "$dir/log/client.err" >&2; die "cannot create an image"; }
	rbd -c "$dir/ceph.conf" rm iovm/ready-check >/dev/null 2>&1
	cat >"$dir/env" <<ENV
CEPH_CONF=$dir/ceph.conf
IOVM_RBD_POOL=iovm
ENV
	echo "cluster.sh: started in $dir in $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-4) s (mon 127.0.0.1:$port, 3 OSDs, pool iovm)"
}

stop() {
	[ -d "$dir/run" ] || exit 0
	pids=""
	for n in mon.a osd.0 osd.1 osd.2; do
		p=$(pid_of $n) && pids="$pids $p"
	done
	[ -n "$pids" ] || exit 0
	kill -9 $pids 2>/dev/null
	i=0
	while [ $i -lt 100 ]; do
		alive=0
		for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
		[ $alive = 0 ] && exit 0
		i=$((i + 1))
		sleep 0.1
	done
	die "daemons still alive after SIGKILL:$pids"
}

case $cmd in
start) start ;;
stop) stop ;;
kill-osd)
	n=${3:?osd number}
	p=$(pid_of "osd.$n") || die "osd.$n is not running"
	kill -9 "$p"
	while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	;;
start-osd)
	n=${3:?osd number}
	pid_of "osd.$n" >/dev/null && die "osd.$n is running already"
	start_osd "$n"
	wait_osd "$n" up
	;;
*) die "unknown command $cmd" ;;
esac
