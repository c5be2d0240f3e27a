#!/bin/bash
# Round 8 (first run of the compute path on the H200). Run from the repository root.
cd .dev/gpu
for f in *.xz; do xz -dkf "$f"; done
chmod +x diptych-gpu-bench diptych-gpu-check transfer_bw
mkdir -p $OUT/json
B=./diptych-gpu-bench
LOG=$OUT/round8.log
nproc > $OUT/machine.txt; nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv >> $OUT/machine.txt 2>&1
timeout 60 ./diptych-gpu-check --gpu device > $OUT/gpu-check.txt 2>&1
timeout 40 ./transfer_bw 3000 > $OUT/transfer.txt 2>&1
timeout 40 ./transfer_bw 800 3840 2160 >> $OUT/transfer.txt 2>&1
run() { name=$1; shift; echo "== $name: $*" >> $LOG; timeout 40 $B --quiet --json $OUT/json/$name.json "$@" >> $LOG 2>&1; echo "rc $?" >> $LOG; }
run pip-s1 --layout pip --streams 1 --frames 1500
run pip-s8 --layout pip --streams 8 --contexts 1 --frames 800
run pip-s16 --layout pip --streams 16 --contexts 1 --frames 600
run pip-s32 --layout pip --streams 32 --contexts 1 --frames 300
run pip-s16-k2 --layout pip --streams 16 --contexts 2 --frames 600
run sbs-s16 --layout side-by-side --streams 16 --contexts 1 --frames 600
run stacked-s16 --layout stacked --streams 16 --contexts 1 --frames 600
run pip2160-s8 --layout pip --size 3840x2160 --streams 8 --contexts 1 --frames 300
run rgba-s16 --layout pip --format rgba --streams 16 --contexts 1 --frames 400
run pip-s16-fragment --layout pip --streams 16 --contexts 1 --frames 400 --pass fragment
run pip-s16-direct --layout pip --streams 16 --contexts 1 --frames 400 --direct on
run pip-s16-notimers --timer-queries off --layout pip --streams 16 --contexts 1 --frames 600
run pace64 --layout pip --streams 64 --contexts 1 --frames 300 --pace 60
run pace64-stagger --layout pip --streams 64 --contexts 1 --frames 300 --pace 60 --stagger
timeout 20 $B --bandwidth > $OUT/bandwidth.txt 2>&1
echo done >> $LOG
