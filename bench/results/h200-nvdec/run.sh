#!/usr/bin/env bash
# run.sh OUT STEP...: Diptych's NVDEC path on a GPU server, from the
# self-contained archive beside this script (scripts/build-server), with
# glvnd's loaders added and nothing else installed. Steps:
#   verify   the GPU, `diptych probe` (NVDEC capabilities per codec), the archive's libraries
#   nvdec    diptych bench --stages nvdec: `diptych record --decoder nvdec` against the same take
#            with --decoder cpu (PSNR per frame; H.264 1080p60 + 720p30, and 10-bit HEVC alone),
#            composites/s from NVDEC frames against the same pictures from host memory
#   pairs    diptych bench --stages e2e --pairs: ours (NVDEC) and FFmpeg's configurations at the
#            counts in PAIRS_DIPTYCH, PAIRS_FFMPEG (PAIR_RUNNERS_PEERS: which FFmpeg runners)
# Every step's output goes to OUT; BUDGET (seconds, default 220) bounds the whole run.
set -uo pipefail
O=$(readlink -f "$1"); shift
here=$(dirname "$(readlink -f "$0")")
A=$here/diptych-server-linux-x86_64.tar.xz
W=/tmp/dnv; B=$W/diptych-server-linux-x86_64/bin
T0=$(date +%s); BUDGET=${BUDGET:-220}
t() { local s=$(date +%s%N); "$@"; local r=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $r] $*"; return $r; }
left() { local l=$(( BUDGET - ($(date +%s) - T0) )); [ $l -gt 1 ] && echo $l || echo 1; }
if [ ! -x "$B/diptych" ]; then
  rm -rf $W; mkdir -p $W
  if command -v xz >/dev/null; then t tar -C $W -xJf "$A"; else t python3 -c "import tarfile,sys; tarfile.open(sys.argv[1],'r:xz').extractall(sys.argv[2])" "$A" $W; fi
fi
export PATH=$B:$PATH
cd $W
R=(diptych bench --chart none --sheet none --work-dir /tmp/dnvb --duration 6 --preset ultrafast)
for step in "$@"; do
  case $step in
  verify)
    { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; head -2 /etc/os-release
      cat $B/../VERSIONS; ldd $B/diptych; } > $O/machine.txt 2>&1
    t timeout $(left) diptych probe > $O/probe.txt 2>&1
    ;;
  nvdec)
    t timeout $(left) "${R[@]}" --stages nvdec --frames 600 --streams 16 --json $O/nvdec.json > $O/nvdec.md 2> $O/nvdec.log
    ;;
  pairs)
    t timeout $(left) "${R[@]}" --stages e2e --pairs "${PAIRS_DIPTYCH:-1,15,18,21}" --pair-runners diptych \
      --json $O/pairs-diptych.json > $O/pairs-diptych.md 2>> $O/pairs.log
    t timeout $(left) "${R[@]}" --stages e2e --pairs "${PAIRS_FFMPEG:-1,10,11}" --pair-runners "${PAIR_RUNNERS_PEERS:-ffmpeg}" \
      --json $O/pairs-ffmpeg.json > $O/pairs-ffmpeg.md 2>> $O/pairs.log
    ;;
  esac
done
echo "done in $(( $(date +%s) - T0 )) s"
