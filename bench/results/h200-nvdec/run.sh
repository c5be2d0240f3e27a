#!/usr/bin/env bash
# run.sh OUT STEP...: Diptych's NVDEC path on a GPU server, from the
# self-contained archive beside this script (scripts/build-server), with
# glvnd's loaders added and nothing else installed. Steps:
#   verify   the GPU, `diptych probe` (NVDEC capabilities per codec), the archive's libraries
#   record   the end-to-end inputs made by the archive's ffmpeg (as `diptych bench` makes them),
#            `diptych record --decoder nvdec` on them (its log and JSON summary)
#   nvdec    diptych bench --stages nvdec: `diptych record --decoder nvdec` against the same take
#            with --decoder cpu (PSNR per frame; H.264 1080p60 + 720p30, and 10-bit HEVC alone),
#            composites/s from NVDEC frames against the same pictures from host memory
#   pairs    diptych bench --stages e2e --pairs, ultrafast: ours (NVDEC) at PAIRS_DIPTYCH,
#            FFmpeg on the CPU at PAIRS_FFMPEG, FFmpeg with NVDEC at PAIRS_FFMPEG_NVDEC (none: skipped)
# Every step's output goes to OUT; BUDGET (seconds, default 200) bounds the whole
# run, and each step has a cap of its own so one that hangs leaves time for the rest.
set -uo pipefail
O=$(readlink -f "$1"); shift
here=$(dirname "$(readlink -f "$0")")
A=$here/diptych-server-linux-x86_64.tar.xz
W=/tmp/dnv; B=$W/diptych-server-linux-x86_64/bin; D=/tmp/dnvb
T0=$(date +%s); BUDGET=${BUDGET:-200}
t() { local s=$(date +%s%N); "$@"; local r=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $r] $*"; return $r; }
# The smaller of $1 seconds and what is left of the budget.
cap() { local l=$(( BUDGET - ($(date +%s) - T0) )); [ $l -lt 2 ] && l=2; [ $1 -lt $l ] && echo $1 || echo $l; }
if [ ! -x "$B/diptych" ]; then
  rm -rf $W; mkdir -p $W
  if command -v xz >/dev/null; then t tar -C $W -xJf "$A"; else t python3 -c "import tarfile,sys; tarfile.open(sys.argv[1],'r:xz').extractall(sys.argv[2])" "$A" $W; fi
fi
export PATH=$B:$PATH
mkdir -p $D; cd $W
R=(diptych bench --chart none --sheet none --work-dir $D --duration 6 --preset ultrafast)
for step in "$@"; do
  echo "== $step ($(( $(date +%s) - T0 )) s in)"
  case $step in
  verify)
    { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; head -2 /etc/os-release
      cat $B/../VERSIONS; ldd $B/diptych; } > $O/machine.txt 2>&1
    t timeout -k 2 $(cap 20) diptych probe > $O/probe.txt 2>&1
    ;;
  record)
    for f in "primary-1920x1080-60-6s testsrc2 1920x1080 60" "secondary-1280x720-30-6s testsrc 1280x720 30"; do
      set -- $f
      [ -f $D/$1.mp4 ] || t ffmpeg -hide_banner -loglevel error -y -f lavfi -i $2=size=$3:rate=$4 -t 6 -c:v libx264 -preset veryfast \
        -crf 20 -g $4 -pix_fmt yuv420p $D/$1.partial.mp4 && mv $D/$1.partial.mp4 $D/$1.mp4
    done
    t timeout -k 2 $(cap 30) diptych record --primary $D/primary-1920x1080-60-6s.mp4 --secondary $D/secondary-1280x720-30-6s.mp4 \
      --preset ultrafast --audio none --decoder nvdec --out $D/take-nvdec.mp4 --json > $O/record-nvdec.json 2> $O/record-nvdec.log
    ffprobe -v error -count_frames -show_entries stream=codec_name,width,height,nb_read_frames -of csv $D/take-nvdec.mp4 >> $O/record-nvdec.log 2>&1
    ;;
  nvdec)
    t timeout -k 2 $(cap 60) "${R[@]}" --stages nvdec --frames 600 --streams 16 --json $O/nvdec.json > $O/nvdec.md 2> $O/nvdec.log
    ;;
  pairs)
    t timeout -k 2 $(cap 70) "${R[@]}" --stages e2e --pairs "${PAIRS_DIPTYCH:-1,15,19,23}" --pair-runners diptych \
      --json $O/pairs-diptych.json > $O/pairs-diptych.md 2>> $O/pairs.log
    t timeout -k 2 $(cap 35) "${R[@]}" --stages e2e --pairs "${PAIRS_FFMPEG:-1,10,11}" --pair-runners ffmpeg \
      --json $O/pairs-ffmpeg.json > $O/pairs-ffmpeg.md 2>> $O/pairs.log
    [ "${PAIRS_FFMPEG_NVDEC:-1,8}" = none ] || t timeout -k 2 $(cap 35) "${R[@]}" --stages e2e --pairs "${PAIRS_FFMPEG_NVDEC:-1,8}" \
      --pair-runners ffmpeg-nvdec --json $O/pairs-ffmpeg-nvdec.json > $O/pairs-ffmpeg-nvdec.md 2>> $O/pairs.log
    ;;
  esac
done
echo "done in $(( $(date +%s) - T0 )) s"
