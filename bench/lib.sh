# Shared by the probe benchmarks (bench/blk.sh, lsi.sh, 9p.sh), sourced
# first: the build's paths, option helpers, running a VMM with the probe,
# and awk functions for the median tables. Not a command.

me=${0##*/}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build}
iovm=$build/iovm
probe=$build/guest/probe/probe.elf
qemu=$(command -v qemu-system-x86_64 || true)
hz=$(getconf CLK_TCK)

# tobytes SIZE: SIZE with an optional k/m/g suffix, in bytes.
tobytes() {
	case $1 in
	*[kK]) echo $((${1%?} << 10)) ;;
	*[mM]) echo $((${1%?} << 20)) ;;
	*[gG]) echo $((${1%?} << 30)) ;;
	*[!0-9]* | '') echo "$me: bad size '$1'" >&2; exit 2 ;;
	*) echo "$1" ;;
	esac
}

# need_built FILE...: exits unless every file is there.
need_built() {
	for f in "$@"; do
		[ -e "$f" ] || { echo "$me: $f missing: build first (ninja -C build)" >&2; exit 1; }
	done
}

# make_disk: sets offset and makes $file a disk of $region bytes at offset
# (1 MiB) and 1 MiB after it, with real blocks, not a sparse file; kept
# between runs while its size fits.
make_disk() {
	offset=$((1 << 20))
	size=$((offset + region + (1 << 20)))
	if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" != "$size" ]; then
		rm -f "$file"
		fallocate -l "$size" "$file"
	fi
}

cpu_ticks() {
	# utime + stime - guest_time of the whole process (all threads), in
	# clock ticks: the VMM's own host CPU, without the time the vCPU threads
	# spend running guest code (the probe busy-polls, which would otherwise
	# make every VMM look like one full CPU per vCPU)
	sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | awk '{ print $12 + $13 - $41 }'
}

# pin_threads PID: with pin=V,I (blk.sh --pin), moves the VMM's vCPU thread
# and I/O thread (found by name: iovm names them vcpuN and iovm-*, QEMU with
# debug-threads names them "CPU N/KVM" and "IO ioN"; QEMU's LSI has no
# iothread, so its main thread, named after the binary, serves it).
pin_threads() {
	[ -n "${pin:-}" ] || return 0
	for t in /proc/$1/task/*; do
		case $(cat "$t/comm" 2>/dev/null) in
		vcpu* | "CPU "*) taskset -pc "${pin%,*}" "${t##*/}" >/dev/null ;;
		iovm-* | "IO "*) taskset -pc "${pin#*,}" "${t##*/}" >/dev/null ;;
		qemu-system-x86) [ "$name" = qemu-lsi ] &&
			taskset -pc "${pin#*,}" "${t##*/}" >/dev/null ;;
		esac
	done
}

# run_vmm NAME CMD...: runs a VMM with the probe's bench (its output in
# $tmp/NAME.log), appending each job line to $tmp/results with the VMM's CPU
# time per I/O, sampled at the job boundaries. Returns 1 unless the probe
# passed.
run_vmm() {
	name=$1
	shift
	mkfifo "$tmp/fifo"
	: >"$tmp/$name.log"
	"$@" >"$tmp/fifo" 2>"$tmp/$name.err" &
	pid=$!
	prev=""
	while IFS= read -r line; do
		echo "$line" >>"$tmp/$name.log"
		case $line in
		"probe: bench region"*)
			pin_threads "$pid"
			prev=$(cpu_ticks "$pid")
			;;
		job=*)
			now=$(cpu_ticks "$pid")
			ios=$(echo "$line" | tr ' ' '\n' | sed -n 's/^ios=//p')
			cpu=$(awk -v t=$((now - prev)) -v hz="$hz" -v n="$ios" \
				'BEGIN { printf "%.2f", t * 1e6 / hz / n }')
			echo "$name $line cpu_us_per_io=$cpu" >>"$tmp/results"
			prev=$now
			;;
		esac
	done <"$tmp/fifo"
	rc=0
	wait "$pid" || rc=$?
	rm -f "$tmp/fifo"
	if ! grep -q '^probe: PASS' "$tmp/$name.log"; then
		echo "$me: $name run failed (status $rc):" >&2
		tail -n 5 "$tmp/$name.log" "$tmp/$name.err" >&2
		return 1
	fi
}

# awk functions for the result tables: get(line, key) is key's value in a
# line of key=value words; med(a, k, n) the median of a[k, 1..n] (mawk has
# no asort); r(a, b) a/b to two decimals, or "-" without both.
awk_lib='
function get(line, key,   n, i, kv) {
	n = split(line, kv, " ")
	for (i = 1; i <= n; i++)
		if (index(kv[i], key "=") == 1)
			return substr(kv[i], length(key) + 2)
	return ""
}
function med(a, k, n,   i, j, t, s) {
	for (i = 1; i <= n; i++) s[i] = a[k, i] + 0
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && s[j - 1] > s[j]; j--) { t = s[j]; s[j] = s[j - 1]; s[j - 1] = t }
	return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2
}
function r(a, b) { return (a != "" && b != "" && b + 0 > 0) ? sprintf("%.2f", a / b) : "-" }
'

# awk rule reading run_vmm's result lines ("WHO job=J iops=... bw_mbs=...
# lat_mean_us=... lat_p99_us=... cpu_us_per_io=..."): for k = WHO SUBSEP J,
# cnt[k] runs and their figures v_iops[k, n], v_bw, v_mean, v_p99, v_cpu;
# the jobs in order of first appearance in order[1..njobs].
awk_jobs='
{
	who = $1; job = get($0, "job")
	if (!(job in seen)) { seen[job] = 1; order[++njobs] = job }
	k = who SUBSEP job
	n = ++cnt[k]
	v_iops[k, n] = get($0, "iops"); v_bw[k, n] = get($0, "bw_mbs")
	v_mean[k, n] = get($0, "lat_mean_us"); v_p99[k, n] = get($0, "lat_p99_us")
	v_cpu[k, n] = get($0, "cpu_us_per_io")
}
'
