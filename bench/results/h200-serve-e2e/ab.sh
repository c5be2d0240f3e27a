#!/usr/bin/env bash
# Run 46, paired on one machine: two self-contained archives (scripts/build-server),
# A and B, alternated. bash ab.sh A.tar.xz B.tar.xz OUT
# (run 46: A built from f3a2479, B from the code that deleted the hand-over
# semaphore, the maps ahead and host uploads through interop).
set -u
A=$1 B=$2 O=$3; mkdir -p $O /tmp/A /tmp/B
tar -C /tmp/A -xJf "$A"; tar -C /tmp/B -xJf "$B"
bin() { echo /tmp/$1/diptych-server-linux-x86_64/bin; }
bench() { local v=$1 n=$2; shift 2; $(bin $v)/diptych-gpu-bench --quiet --contexts 1 "$@" > $O/$v-$n.txt 2>&1
  echo "$v $n: $(grep -h 'composites/s\|paced:' $O/$v-$n.txt | tr '\n' ' ' | cut -c1-220)"; }
for r in 1 2 3; do
  for v in A B; do
    bench $v pl-pip-32-$r --host-memory page-locked --layout pip --streams 32 --frames 400
    bench $v pg-pip-32-$r --host-memory pageable --layout pip --streams 32 --frames 400
  done
done
for v in A B; do bench $v pl-paced-64 --host-memory page-locked --layout pip --streams 64 --frames 300 --pace 60; done
for v in A B A B; do
  timeout 80 $(bin $v)/diptych bench --chart none --sheet none --work-dir /tmp/abd --duration 6 --preset ultrafast \
    --stages nvdec --frames 600 --streams 32 > $O/$v-nvdec-32.md 2> $O/$v-nvdec-32.log
  echo "$v nvdec 32: $(grep -h '^| nvdec (' $O/$v-nvdec-32.md | cut -d'|' -f2-5 | tr -s ' ')"
done
# Then the page-locked PiP alone, B first, six times each.
for r in 1 2 3 4 5 6; do for v in B A; do bench $v pl-pip-32-again-$r --host-memory page-locked --layout pip --streams 32 --frames 400; done; done
