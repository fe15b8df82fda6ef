#!/usr/bin/env python3
"""Summarises iovm's per-request I/O trace (a -Dio_trace=true build; the
format is in src/lib/iotrace.h): per queue thread and per phase (a run of
requests between idle gaps, e.g. one probe job), the stage latencies of a
request, how many requests sit in the device and before it, how the thread
batches its io_uring_enter calls, and where its time goes.

    meson setup build-trace -Dio_trace=true && ninja -C build-trace
    mkdir -p /tmp/iot && rm -f /tmp/iot/t.*
    IOVM_IO_TRACE=/tmp/iot/t BUILD=build-trace bench/blk.sh --secs 3 \\
        --rounds 1 --pin 0,1 --only iovm,iovm-scsi
    python3 bench/io-trace.py /tmp/iot/t.*
    python3 bench/io-trace.py --compare /tmp/iot/t.A... /tmp/iot/t.B...

Stages (times in us): pop->submit, from the chain taken off the avail ring
to the io_uring_enter that hands its SQE to the kernel (split into
pop->queued, until the device hands it to the block queue, and
queued->submit); submit->reap, in the device (kernel and disk); reap->push,
completion seen to used entry written; push->notify, to the interrupt that
covers it (none in poll mode: suppressed); guest, from a head's push to its
next pop (the driver's time). "in device" is the time-weighted mean number
of requests between their submit enter and their reap; "before kernel"
between pop and submit enter. Thread time: spinning (blkq_spin), sleeping
(waiting enters, which may also submit), submit-only enters, the rest.
"""
import argparse
import collections
import struct
import sys

HDR = struct.Struct('<8sIIQQQQIHH32s')
REC = struct.Struct('<QIIHB5x')
MAGIC = b'IOVMTRC1'

(POP, SUBMIT_Q, ENTER, WAKE, ENTER_DONE, REAP, REAP_PASS, PUSH, NOTIFY,
 NOTIFY_SKIPPED, SPIN_START, SPIN_END) = range(1, 13)
ENTER_SUBMIT, ENTER_WAIT, ENTER_GETEVENTS = range(3)
SPIN_WHY = ('timeout', 'cqe', 'avail')


def load(path):
    with open(path, 'rb') as f:
        data = f.read()
    if len(data) < HDR.size:
        sys.exit(f'{path}: too short for a trace header')
    (magic, version, rec_size, nrec, dropped, start, end, pid, queue, _,
     name) = HDR.unpack_from(data)
    if magic != MAGIC or version != 1 or rec_size != REC.size:
        sys.exit(f'{path}: not an iovm I/O trace (version 1)')
    body = data[HDR.size:HDR.size + nrec * REC.size]
    if len(body) != nrec * REC.size:
        sys.exit(f'{path}: truncated: {nrec} records announced')
    return {
        'path': path, 'name': name.rstrip(b'\0').decode(errors='replace'),
        'pid': pid, 'queue': queue, 'dropped': dropped,
        'start': start, 'end': end, 'recs': REC.iter_unpack(body),
        'nrec': nrec,
    }


class Req:
    __slots__ = ('pop', 'size', 'read', 'queued', 'group', 'submit',
                 'reap', 'push', 'notify', 'guest')

    def __init__(self, t, arg):
        self.pop = t
        self.size = arg & 0x7fffffff
        self.read = bool(arg >> 31)
        self.queued = self.group = self.submit = None
        self.reap = self.push = self.notify = self.guest = None


class Phase:
    def __init__(self):
        self.reqs = []
        self.first = self.last = None
        self.peak = 0
        self.enters = collections.Counter()
        self.sqes = []          # per enter that handed SQEs
        self.cqes = []          # per reap pass that took any
        self.empty_passes = 0
        self.notifies = []      # pushes covered per interrupt
        self.skipped = 0
        self.spin_ns = self.sleep_ns = self.submit_ns = 0
        self.spins = collections.Counter()
        self.spans = []         # (kind, start, end) of spins and enters

    def window(self):
        return (self.last - self.first) if self.reqs else 0


def analyse(tr, gap_ns):
    phases = []
    ph = None
    open_reqs = {}              # head -> Req popped, not pushed
    last_push = {}              # head -> its last push time
    pending_sq = []             # queued, SQE not yet at the kernel
    pending_notify = []
    idle_since = None           # nothing outstanding since
    enter = spin = None         # (kind, start) of the open one
    anomalies = 0
    for t, ev, hid, arg, _q in ((r[0], r[4], r[1], r[2], r[3])
                                for r in tr['recs']):
        if ev == POP:
            if ph is None or (not open_reqs and idle_since is not None and
                              t - idle_since >= gap_ns):
                ph = Phase()
                phases.append(ph)
            r = Req(t, arg)
            if hid in open_reqs:
                anomalies += 1
            open_reqs[hid] = r
            if hid in last_push:
                r.guest = t - last_push[hid]
            ph.reqs.append(r)
            if ph.first is None:
                ph.first = t
            ph.peak = max(ph.peak, len(open_reqs))
            continue
        if ph is None:
            continue            # before the first request
        if ev == SUBMIT_Q:
            r = open_reqs.get(hid)
            if r:
                r.queued, r.group = t, arg
                pending_sq.append(r)
        elif ev == ENTER:
            ph.enters[hid] += 1
            if arg and hid != ENTER_GETEVENTS:
                ph.sqes.append(arg)
            if arg:
                for r in pending_sq:
                    r.submit = t
                pending_sq = []
            if hid != ENTER_GETEVENTS:
                enter = (hid, t)
        elif ev in (WAKE, ENTER_DONE):
            if enter:
                k, t0 = enter
                ph.spans.append(('sleep' if k == ENTER_WAIT else 'submit',
                                 t0, t))
                enter = None
        elif ev == REAP:
            r = open_reqs.get(hid)
            if r:
                r.reap = t
        elif ev == REAP_PASS:
            if arg:
                ph.cqes.append(arg)
            else:
                ph.empty_passes += 1
        elif ev == PUSH:
            r = open_reqs.pop(hid, None)
            last_push[hid] = t
            if r:
                r.push = t
                pending_notify.append(r)
                ph.last = t
            if not open_reqs:
                idle_since = t
        elif ev == NOTIFY:
            for r in pending_notify:
                r.notify = t
            ph.notifies.append(len(pending_notify))
            pending_notify = []
        elif ev == NOTIFY_SKIPPED:
            ph.skipped += 1
        elif ev == SPIN_START:
            spin = t
        elif ev == SPIN_END:
            if spin is not None:
                ph.spans.append(('spin', spin, t))
                ph.spins[SPIN_WHY[hid] if hid < 3 else '?'] += 1
                spin = None
    for ph in phases:
        ph.reqs = [r for r in ph.reqs if r.push is not None]
        if not ph.reqs:
            continue
        for kind, t0, t1 in ph.spans:
            d = max(0, min(t1, ph.last) - max(t0, ph.first))
            setattr(ph, kind + '_ns', getattr(ph, kind + '_ns') + d)
    return [p for p in phases if p.reqs], anomalies


def pct(v, q):
    return v[min(len(v) - 1, int(q * len(v)))] if v else None


def dist(v):
    v = sorted(v)
    if not v:
        return None
    return (pct(v, .5), pct(v, .9), pct(v, .99), sum(v) / len(v), len(v))


def occupancy(reqs, start, end, window):
    if not window:
        return 0.0
    return sum(getattr(r, end) - getattr(r, start) for r in reqs
               if getattr(r, start) is not None and
               getattr(r, end) is not None) / window


def kb(n):
    n &= ~511
    return f'{n >> 10}k' if n >= 1024 else f'{n}b'


def summarise(ph):
    reqs = ph.reqs
    dev = [r for r in reqs if r.submit is not None and r.reap is not None
           and r.submit <= r.reap]
    kinds = collections.Counter((kb(r.size), 'R' if r.read else 'W')
                                for r in reqs)
    (size, rw), _ = kinds.most_common(1)[0]
    us = 1e-3

    def d(pairs):
        return dist([(b - a) * us for a, b in pairs])
    st = collections.OrderedDict()
    st['pop->submit'] = d((r.pop, r.submit) for r in dev)
    st['  pop->queued'] = d((r.pop, r.queued) for r in dev
                            if r.queued is not None)
    st['  queued->submit'] = d((r.queued, r.submit) for r in dev
                               if r.queued is not None)
    st['submit->reap'] = d((r.submit, r.reap) for r in dev)
    st['reap->push'] = d((r.reap, r.push) for r in reqs
                         if r.reap is not None)
    st['push->notify'] = d((r.push, r.notify) for r in reqs
                           if r.notify is not None)
    st['guest (push->pop)'] = dist([r.guest * us for r in reqs
                                    if r.guest is not None])
    w = ph.window()
    s = {
        'label': f'{size} {rw} peak {ph.peak}',
        'reqs': len(reqs), 'secs': w * 1e-9,
        'not_sent': len(reqs) - len(dev),
        'stages': st,
        'in_device': occupancy(dev, 'submit', 'reap', w),
        'before_kernel': occupancy(dev, 'pop', 'submit', w),
        'sqes': ph.sqes, 'cqes': ph.cqes, 'empty_passes': ph.empty_passes,
        'notifies': ph.notifies, 'skipped': ph.skipped,
        'enters': ph.enters, 'spins': ph.spins,
        'groups': dist([r.group for r in reqs if r.group]),
        'share': {k: (getattr(ph, k + '_ns') / w if w else 0)
                  for k in ('spin', 'sleep', 'submit')},
    }
    s['share']['rest'] = max(0.0, 1 - sum(s['share'].values()))
    return s


def mean(v):
    return sum(v) / len(v) if v else 0.0


def fmt(x, width=8):
    return f'{"-":>{width}}' if x is None else f'{x:{width}.1f}'


def print_summary(tr, phases, anomalies, min_reqs):
    secs = (tr['end'] - tr['start']) * 1e-9
    print(f"== {tr['path']}: thread {tr['name']} (pid {tr['pid']}, queue "
          f"{tr['queue']}), {tr['nrec']} events, {tr['dropped']} dropped, "
          f"{secs:.2f} s")
    if tr['dropped']:
        print('   (buffer full: the end of the run is missing; raise '
              'IOVM_IO_TRACE_EVENTS)')
    if anomalies:
        print(f'   ({anomalies} heads popped again before their push)')
    small = 0
    for i, ph in enumerate(phases):
        if len(ph.reqs) < min_reqs:
            small += 1
            continue
        s = summarise(ph)
        print(f"\n### phase {i + 1}: {s['label']}: {s['reqs']} requests in "
              f"{s['secs']:.3f} s ({s['reqs'] / s['secs'] if s['secs'] else 0:.0f}/s)"
              + (f", {s['not_sent']} never at the kernel"
                 if s['not_sent'] else ''))
        print('\n| stage (us) | p50 | p90 | p99 | mean |')
        print('|---|---:|---:|---:|---:|')
        for k, v in s['stages'].items():
            if v:
                print(f'| {k} | {v[0]:.1f} | {v[1]:.1f} | {v[2]:.1f} '
                      f'| {v[3]:.1f} |')
        e, sh = s['enters'], s['share']
        print(f"\n- mean requests: in device {s['in_device']:.2f}, popped "
              f"before kernel {s['before_kernel']:.2f}"
              + (f"; requests per SQE (merge) {s['groups'][3]:.2f}"
                 if s['groups'] else ''))
        print(f"- enters: {e[ENTER_SUBMIT]} submit, {e[ENTER_WAIT]} wait, "
              f"{e[ENTER_GETEVENTS]} getevents (spin); SQEs per sending "
              f"enter {mean(s['sqes']):.2f} (max {max(s['sqes'], default=0)})")
        print(f"- CQEs per reap pass {mean(s['cqes']):.2f} ({len(s['cqes'])} "
              f"passes, {s['empty_passes']} empty); pushes per notify "
              f"{mean(s['notifies']):.2f} ({len(s['notifies'])} sent, "
              f"{s['skipped']} suppressed)")
        print(f"- thread time: spin {sh['spin']:.0%}, sleep {sh['sleep']:.0%}, "
              f"submit enters {sh['submit']:.0%}, rest {sh['rest']:.0%}; "
              'spins ended by ' + (', '.join(f'{k} {v}' for k, v in
                                             sorted(s['spins'].items()))
                                   or 'none'))
    if small:
        print(f'\n({small} phases of fewer than {min_reqs} requests left out)')
    print()


def compare(a, b, gap_ns, min_reqs):
    res = []
    for path in (a, b):
        tr = load(path)
        phases, _ = analyse(tr, gap_ns)
        res.append((tr, [summarise(p) for p in phases
                         if len(p.reqs) >= min_reqs]))
    (ta, sa), (tb, sb) = res
    print(f"== A: {ta['path']} ({ta['name']})\n== B: {tb['path']} "
          f"({tb['name']})")
    for i in range(max(len(sa), len(sb))):
        x = sa[i] if i < len(sa) else None
        y = sb[i] if i < len(sb) else None
        print(f"\n### phase {i + 1}: A {x['label'] if x else '-'}, "
              f"B {y['label'] if y else '-'}")
        print('\n| (us) | A p50 | A p99 | A mean | B p50 | B p99 | B mean |')
        print('|---|---:|---:|---:|---:|---:|---:|')
        keys = (x or y)['stages'].keys()
        for k in keys:
            row = [k]
            for s in (x, y):
                v = s['stages'][k] if s else None
                row += [fmt(v[0], 1), fmt(v[2], 1), fmt(v[3], 1)] if v \
                    else ['-'] * 3
            print('| ' + ' | '.join(row) + ' |')
        for k, f in (('in device', lambda s: f"{s['in_device']:.2f}"),
                     ('before kernel', lambda s: f"{s['before_kernel']:.2f}"),
                     ('SQEs/enter', lambda s: f"{mean(s['sqes']):.2f}"),
                     ('CQEs/pass', lambda s: f"{mean(s['cqes']):.2f}"),
                     ('pushes/notify', lambda s: f"{mean(s['notifies']):.2f}"),
                     ('spin/sleep/submit/rest', lambda s: '/'.join(
                         f"{s['share'][k]:.0%}" for k in
                         ('spin', 'sleep', 'submit', 'rest')))):
            print(f"| {k} | {f(x) if x else '-'} | | | "
                  f"{f(y) if y else '-'} | | |")


def main():
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('files', nargs='*', help='dump files (PREFIX.<pid>.<thread>.<n>)')
    p.add_argument('--gap', type=float, default=2.0, metavar='MS',
                   help='a new phase starts after an idle gap (no request '
                        'outstanding) of at least MS ms (default 2)')
    p.add_argument('--min-reqs', type=int, default=100, metavar='N',
                   help='leave out phases of fewer requests (default 100)')
    p.add_argument('--compare', nargs=2, metavar=('A', 'B'),
                   help='two dump files side by side, phase by phase')
    o = p.parse_args()
    gap = int(o.gap * 1e6)
    if o.compare:
        compare(*o.compare, gap, o.min_reqs)
        return
    if not o.files:
        p.error('no dump files (or --compare A B)')
    for path in o.files:
        tr = load(path)
        phases, anomalies = analyse(tr, gap)
        print_summary(tr, phases, anomalies, o.min_reqs)


if __name__ == '__main__':
    main()
