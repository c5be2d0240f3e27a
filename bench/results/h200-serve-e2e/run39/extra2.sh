#!/usr/bin/env bash
# extra2.sh OUT: the defaults (uploads staged in imported CUDA memory, pictures read in place) from host memory,
# against GL's staging and textures, and CUDA copier counts (--copiers)
set -uo pipefail
O=$(readlink -f "$1"); B=/tmp/dsv/diptych-server-linux-x86_64/bin; export PATH=$B:$PATH
t() { local s=$(date +%s%N); "$@"; local r=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $r] $*"; return $r; }
GL="DIPTYCH_CUDA_UPLOADS=off DIPTYCH_GPU_PICTURES=textures"
run() { local name=$1 envs=$2; shift 2; t env $envs timeout -k 2 40 diptych-gpu-bench --quiet --contexts 1 "$@" --json $O/y-$name.json > $O/y-$name.txt 2>&1; echo "$name: $(grep composites/s $O/y-$name.txt)"; }
run def-pip-32 "X=1" --layout pip --streams 32 --frames 400
run c4-pip-32 "X=1" --copiers 4 --layout pip --streams 32 --frames 400
run c32-pip-32 "X=1" --copiers 32 --layout pip --streams 32 --frames 400
run gl-pip-32 "$GL" --layout pip --streams 32 --frames 400
run def-pip-16 "X=1" --layout pip --streams 16 --frames 400
run def-pip-64 "X=1" --layout pip --streams 64 --frames 300
run def-sbs-32 "X=1" --layout side-by-side --streams 32 --frames 400
run def-stacked-32 "X=1" --layout stacked --streams 32 --frames 400
run def-pip2160-16 "X=1" --layout pip --size 3840x2160 --streams 16 --frames 200
run def-pip2160-32 "X=1" --layout pip --size 3840x2160 --streams 32 --frames 150
run gl-pip2160-16 "$GL" --layout pip --size 3840x2160 --streams 16 --frames 200
run def-rgba-32 "X=1" --layout pip --format rgba --streams 32 --frames 300
run def-paced-64 "X=1" --layout pip --streams 64 --frames 300 --pace 60
run def-paced-64b "X=1" --layout pip --streams 64 --frames 300 --pace 60
run def-paced-64-stagger "X=1" --layout pip --streams 64 --frames 300 --pace 60 --stagger
run gl-paced-64 "$GL" --layout pip --streams 64 --frames 300 --pace 60
