#!/usr/bin/env python3
"""Reads the log of bench/compare.sh and prints, per leg and job, the median
IOPS of the two builds with their min-max, after/before and the p99s. A leg
that failed in a round has no line for that round (the medians are of what
ran); a job missing from one build is listed as such."""
import collections
import re
import statistics
import sys

d=collections.defaultdict(list)  # (suite,leg,job,build) -> [iops]
p99=collections.defaultdict(list)
build=None; suite=None; leg=None
for line in open(sys.argv[1]):
    m=re.match(r'=== round (\d+) (\w+) (\w+)',line)
    if m: build=m.group(2); suite=m.group(3); leg=None; continue
    m=re.match(r'== (iovm.*)',line)
    if m and suite=='blk': leg=m.group(1).strip(); continue
    if suite=='blk' and leg:
        m=re.match(r'job=(\S+) iops=(\d+) .*lat_p99_us=([\d.]+)',line)
        if m: d[('blk',leg,m.group(1),build)].append(int(m.group(2))); p99[('blk',leg,m.group(1),build)].append(float(m.group(3)))
    if suite=='vhost':
        m=re.match(r'\| (\S+) \| iovm \| (\d+) \| [\d.]+ \| [\d.]+ \| ([\d.]+) \|',line)
        if m: d[('vhost','iovm vhost-user-blk',m.group(1),build)].append(int(m.group(2))); p99[('vhost','iovm vhost-user-blk',m.group(1),build)].append(float(m.group(3)))
keys=sorted(set(k[:3] for k in d))
print('| leg | job | before IOPS (median; min-max) | after IOPS (median; min-max) | after/before | p99 µs before / after |')
print('|---|---|---:|---:|---:|---:|')
for k in keys:
    b=d.get(k+('before',),[]); a=d.get(k+('after',),[])
    if not b or not a:
        print(f'| {k[1]} | {k[2]} | {"missing" if not b else len(b)} | {"missing" if not a else len(a)} | - | - |')
        continue
    mb=statistics.median(b); ma=statistics.median(a)
    pb=statistics.median(p99[k+('before',)]); pa=statistics.median(p99[k+('after',)])
    print(f'| {k[1]} | {k[2]} | {mb:.0f} ({min(b)}-{max(b)}) | {ma:.0f} ({min(a)}-{max(a)}) | {ma/mb:.2f} | {pb:.0f} / {pa:.0f} |')
