#!/usr/bin/env bash
# extra.sh OUT: diptych-gpu-bench from host memory, the defaults against DIPTYCH_CUDA_UPLOADS=import (pictures read in place)
set -uo pipefail
O=$(readlink -f "$1"); B=/tmp/dsv/diptych-server-linux-x86_64/bin; export PATH=$B:$PATH
t() { local s=$(date +%s%N); "$@"; local r=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $r] $*"; return $r; }
IP="DIPTYCH_CUDA_UPLOADS=import"
run() { local name=$1 envs=$2; shift 2; t env $envs timeout -k 2 40 diptych-gpu-bench --quiet "$@" --json $O/x-$name.json > $O/x-$name.txt 2>&1; echo "$name: $(grep composites/s $O/x-$name.txt)"; }
run ip-pip-32-c1 "$IP" --layout pip --streams 32 --contexts 1 --frames 400
run ip-pip-32-c2 "$IP" --layout pip --streams 32 --contexts 2 --frames 400
run ip-pip-32-c4 "$IP" --layout pip --streams 32 --contexts 4 --frames 400
run ip-pip-32-if6 "$IP" --layout pip --streams 32 --contexts 1 --frames 400 --in-flight 6
run ip-pip-32-b64 "$IP" --frame-batch 64 --layout pip --streams 32 --contexts 1 --frames 400
run ip-pip720-32 "$IP" --layout pip --input 1280x720 --streams 32 --contexts 1 --frames 400
run df-pip-32-c1 "DIPTYCH_CUDA_UPLOADS=off" --layout pip --streams 32 --contexts 1 --frames 400
run df-pip-32-c4 "DIPTYCH_CUDA_UPLOADS=off" --layout pip --streams 32 --contexts 4 --frames 400
run ip-sbs-32-c4 "$IP" --layout side-by-side --streams 32 --contexts 4 --frames 400
run ip-stacked-32-c4 "$IP" --layout stacked --streams 32 --contexts 4 --frames 400
run ip-pip2160-16-c4 "$IP" --layout pip --size 3840x2160 --streams 16 --contexts 4 --frames 200
run ip-rgba-32-c4 "$IP" --layout pip --format rgba --streams 32 --contexts 4 --frames 300
run ip-paced-64-c1 "$IP" --layout pip --streams 64 --contexts 1 --frames 300 --pace 60
run ip-paced-64-c4 "$IP" --layout pip --streams 64 --contexts 4 --frames 300 --pace 60
run df-paced-64-c1 "DIPTYCH_CUDA_UPLOADS=off" --layout pip --streams 64 --contexts 1 --frames 300 --pace 60
