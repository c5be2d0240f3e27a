#!/usr/bin/env bash
set -uo pipefail
O=$(readlink -f "$1"); B=/tmp/dsv/diptych-server-linux-x86_64/bin; export PATH=$B:$PATH
P="python3 $(dirname "$0")/prof.py"   # bench/results/h200-serve-e2e/prof.py, copied beside this script
G="diptych-gpu-bench --contexts 1 --layout pip"
$P base-32 $G --streams 32 --frames 400
$P conn32-32 env CUDA_DEVICE_MAX_CONNECTIONS=32 $G --streams 32 --frames 400
$P malloc-32 env MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824 $G --streams 32 --frames 400
$P both-32 env CUDA_DEVICE_MAX_CONNECTIONS=32 MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824 $G --streams 32 --frames 400
$P batch4-32 $G --frame-batch 4 --streams 32 --frames 400
$P if1-32 $G --streams 32 --frames 400 --in-flight 1
$P both-paced-64 env CUDA_DEVICE_MAX_CONNECTIONS=32 MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824 $G --streams 64 --frames 300 --pace 60
$P both-2160-16 env CUDA_DEVICE_MAX_CONNECTIONS=32 MALLOC_MMAP_THRESHOLD_=268435456 MALLOC_TRIM_THRESHOLD_=1073741824 $G --size 3840x2160 --streams 16 --frames 200
