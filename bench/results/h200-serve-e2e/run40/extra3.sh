#!/usr/bin/env bash
set -uo pipefail
O=$(readlink -f "$1"); B=/tmp/dsv/diptych-server-linux-x86_64/bin; export PATH=$B:$PATH
P="python3 $(dirname "$0")/prof.py"   # bench/results/h200-serve-e2e/prof.py, copied beside this script
$P def-pip-32 diptych-gpu-bench --contexts 1 --layout pip --streams 32 --frames 400
$P def-pip-8 diptych-gpu-bench --contexts 1 --layout pip --streams 8 --frames 600
$P gl-pip-32 env DIPTYCH_CUDA_UPLOADS=off DIPTYCH_GPU_PICTURES=textures diptych-gpu-bench --contexts 1 --layout pip --streams 32 --frames 400
$P def-pip720-32 diptych-gpu-bench --contexts 1 --layout pip --input 1280x720 --streams 32 --frames 400
$P def-paced-64 diptych-gpu-bench --contexts 1 --layout pip --streams 64 --frames 300 --pace 60
