#!/usr/bin/env bash
# extra5.sh OUT: host frames in page-locked memory (GPUCompositor.makeUploadStorage) against pageable, the defaults
set -uo pipefail
O=$(readlink -f "$1"); B=/tmp/dsv/diptych-server-linux-x86_64/bin; export PATH=$B:$PATH
t() { local s=$(date +%s%N); "$@"; local r=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $r] $*"; return $r; }
run() { local name=$1; shift; t timeout -k 2 40 diptych-gpu-bench --quiet --contexts 1 "$@" --json $O/z-$name.json > $O/z-$name.txt 2>&1
        echo "$name: $(grep -h 'composites/s\|paced:\|host memory' $O/z-$name.txt | tr '\n' ' ')"; }
L="--host-memory page-locked"
run pl-pip-16 $L --layout pip --streams 16 --frames 400
run pl-pip-32 $L --layout pip --streams 32 --frames 400
run pl-pip-64 $L --layout pip --streams 64 --frames 300
run pg-pip-32 --layout pip --streams 32 --frames 400
run pl-sbs-32 $L --layout side-by-side --streams 32 --frames 400
run pl-stacked-32 $L --layout stacked --streams 32 --frames 400
run pl-pip2160-16 $L --layout pip --size 3840x2160 --streams 16 --frames 200
run pl-pip2160-32 $L --layout pip --size 3840x2160 --streams 32 --frames 150
run pl-rgba-32 $L --layout pip --format rgba --streams 32 --frames 300
run pl-paced-64 $L --layout pip --streams 64 --frames 300 --pace 60
run pl-paced-64b $L --layout pip --streams 64 --frames 300 --pace 60
run pl-paced-64-stagger $L --layout pip --streams 64 --frames 300 --pace 60 --stagger
run pg-paced-64 --layout pip --streams 64 --frames 300 --pace 60
