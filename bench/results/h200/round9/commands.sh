#!/bin/bash
# Round 9: the compute path after the first H200 round; transfer bounds with two contexts.
cd .dev/gpu
for f in *.xz; do xz -dkf "$f"; done
chmod +x diptych-gpu-bench diptych-gpu-check transfer_bw
mkdir -p $OUT/json
B=./diptych-gpu-bench
LOG=$OUT/round9.log
timeout 30 ./transfer_bw 3000 > $OUT/transfer.txt 2>&1
timeout 30 ./transfer_bw 800 3840 2160 >> $OUT/transfer.txt 2>&1
timeout 60 ./diptych-gpu-check --gpu device > $OUT/gpu-check.txt 2>&1
run() { name=$1; shift; echo "== $name: $*" >> $LOG; timeout 40 $B --quiet --json $OUT/json/$name.json "$@" >> $LOG 2>&1; echo "rc $?" >> $LOG; }
run pip-s1 --layout pip --streams 1 --frames 1500
run pip-s8 --layout pip --streams 8 --contexts 1 --frames 800
run pip-s16 --layout pip --streams 16 --contexts 1 --frames 600
run pip-s24 --layout pip --streams 24 --contexts 1 --frames 400
run sbs-s16 --layout side-by-side --streams 16 --contexts 1 --frames 600
run stacked-s16 --layout stacked --streams 16 --contexts 1 --frames 600
run pip2160-s8 --layout pip --size 3840x2160 --streams 8 --contexts 1 --frames 300
run pip2160-s16 --layout pip --size 3840x2160 --streams 16 --contexts 1 --frames 150
run rgba-s16 --layout pip --format rgba --streams 16 --contexts 1 --frames 400
run pip-s16-sec30 --layout pip --streams 16 --contexts 1 --frames 600 --secondary-every 2
run pip-s16-fragment --layout pip --streams 16 --contexts 1 --frames 400 --pass fragment
run pip-s16-direct --layout pip --streams 16 --contexts 1 --frames 400 --direct on
run pip-s16-notimers --timer-queries off --layout pip --streams 16 --contexts 1 --frames 600
__GL_THREADED_OPTIMIZATIONS=1 run pip-s16-threaded --layout pip --streams 16 --contexts 1 --frames 600
run pace64 --layout pip --streams 64 --contexts 1 --frames 300 --pace 60
run pace48 --layout pip --streams 48 --contexts 1 --frames 300 --pace 60
run pace64-stagger --layout pip --streams 64 --contexts 1 --frames 300 --pace 60 --stagger
tar -C $OUT -czf $OUT/round9-json.tgz json && rm -rf $OUT/json
echo done >> $LOG
