#!/bin/bash
# Round 10: frames of compositors sharing a context batched phase by phase (--frame-batch 1: one at a time).
cd .dev/gpu
for f in *.xz; do xz -dkf "$f"; done
chmod +x diptych-gpu-bench diptych-gpu-check
mkdir -p $OUT/json
B=./diptych-gpu-bench
LOG=$OUT/round10.log
timeout 60 ./diptych-gpu-check --gpu device > $OUT/gpu-check.txt 2>&1
run() { name=$1; shift; echo "== $name: $*" >> $LOG; timeout 40 $B --quiet --json $OUT/json/$name.json "$@" >> $LOG 2>&1; echo "rc $?" >> $LOG; }
run pip-s1 --layout pip --streams 1 --frames 1500
run pip-s8 --layout pip --streams 8 --contexts 1 --frames 800
run pip-s16 --layout pip --streams 16 --contexts 1 --frames 600
run pip-s32 --layout pip --streams 32 --contexts 1 --frames 300
run pip-s16-nobatch --frame-batch 1 --layout pip --streams 16 --contexts 1 --frames 600
run pip-s16-notimers --timer-queries off --layout pip --streams 16 --contexts 1 --frames 600
run sbs-s16 --layout side-by-side --streams 16 --contexts 1 --frames 600
run stacked-s16 --layout stacked --streams 16 --contexts 1 --frames 600
run pip2160-s8 --layout pip --size 3840x2160 --streams 8 --contexts 1 --frames 300
run pip2160-s16 --layout pip --size 3840x2160 --streams 16 --contexts 1 --frames 150
run rgba-s16 --layout pip --format rgba --streams 16 --contexts 1 --frames 400
run sbs-rgba-s16 --layout side-by-side --format rgba --streams 16 --contexts 1 --frames 400
run pip-s16-sec30 --layout pip --streams 16 --contexts 1 --frames 600 --secondary-every 2
run pip-s16-direct --layout pip --streams 16 --contexts 1 --frames 400 --direct on
run pace64 --layout pip --streams 64 --contexts 1 --frames 300 --pace 60
run pace64-stagger --layout pip --streams 64 --contexts 1 --frames 300 --pace 60 --stagger
run pace48 --layout pip --streams 48 --contexts 1 --frames 300 --pace 60
run pace48-stagger --layout pip --streams 48 --contexts 1 --frames 300 --pace 60 --stagger
run pace32 --layout pip --streams 32 --contexts 1 --frames 300 --pace 60
run pace32-nobatch --frame-batch 1 --layout pip --streams 32 --contexts 1 --frames 300 --pace 60
tar -C $OUT -czf $OUT/round10-json.tgz json && rm -rf $OUT/json
echo done >> $LOG
