#!/usr/bin/env python3
# prof.py NAME CMD...: runs CMD, samples its threads' CPU (/proc/PID/task/*/stat) every 50 ms,
# prints CPU seconds per thread name, total user/sys, wall, and the kernel wait channels seen.
import os, sys, time, subprocess, collections, resource
name, cmd = sys.argv[1], sys.argv[2:]
tick = os.sysconf('SC_CLK_TCK')
t0 = time.time()
p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
last = {}; comm = {}; wchan = collections.Counter(); states = collections.Counter()
while p.poll() is None:
    try:
        for tid in os.listdir(f'/proc/{p.pid}/task'):
            try:
                s = open(f'/proc/{p.pid}/task/{tid}/stat').read()
                c = s[s.index('(')+1:s.rindex(')')]; f = s[s.rindex(')')+2:].split()
                last[tid] = (int(f[11]) + int(f[12])) / tick; comm[tid] = c
                states[(c, f[0])] += 1
                if f[0] != 'R':
                    w = open(f'/proc/{p.pid}/task/{tid}/wchan').read().strip()
                    wchan[(c, w)] += 1
            except (FileNotFoundError, ProcessLookupError, ValueError):
                pass
    except FileNotFoundError:
        pass
    time.sleep(0.05)
out = p.stdout.read().decode(errors='replace')
wall = time.time() - t0
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(f'== {name}: wall {wall:.2f} s, user {ru.ru_utime:.2f} s, sys {ru.ru_stime:.2f} s, cores busy {(ru.ru_utime+ru.ru_stime)/wall:.1f}')
for l in out.splitlines():
    if 'composites/s' in l or 'per composite' in l: print('  ' + l)
by = collections.defaultdict(lambda: [0, 0.0])
for tid, cpu in last.items(): by[comm[tid]][0] += 1; by[comm[tid]][1] += cpu
for c, (n, cpu) in sorted(by.items(), key=lambda x: -x[1][1])[:12]: print(f'  threads {c!r} x{n}: {cpu:.2f} CPU s')
tot = collections.Counter()
for (c, s), n in states.items(): tot[c] += n
for (c, s), n in sorted(states.items(), key=lambda x: -x[1])[:10]: print(f'  state {c!r} {s}: {100*n/tot[c]:.0f} %')
for (c, w), n in wchan.most_common(10): print(f'  wchan {c!r} {w}: {n}')
top = sorted(last.items(), key=lambda x: -x[1])
print('  busiest threads: ' + ', '.join(f'{comm[t]}:{c:.2f}' for t, c in top[:8]) + f'; median {top[len(top)//2][1]:.2f} of {len(top)}')
