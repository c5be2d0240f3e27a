#!/usr/bin/env bash
# check.sh ARCHIVE OUT verify|bench|bounds|round2 [args]: the server archive
# (scripts/build-server) unpacked on a bare GPU server and exercised there.
#   verify   ldd, probe, demo, files made by its own ffmpeg, diptych record on them, the GPU tools
#   bench    diptych bench --stages e2e ARGS (e.g. --pairs 48 --preset ultrafast,veryfast --duration 6 --json F)
#   bounds   CPU cost of one pair's parts: software and NVDEC decode, x264 alone (PRESETS)
#   round2   the second H200 run of bench/results/h200-e2e.md
# The bench's peer is the archive's own ffmpeg (bin/ beside diptych).
set -uo pipefail
A=$(readlink -f "$1"); O=$(readlink -f "$2"); what=$3; shift 3; self=$(readlink -f "$0")
W=/tmp/dsrv; B=$W/diptych-server-linux-x86_64/bin
t() { local s=$(date +%s%N); "$@"; local r=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $r] $*"; return $r; }
if [ ! -x "$B/diptych" ]; then
  rm -rf $W; mkdir -p $W
  if command -v xz >/dev/null; then t tar -C $W -xJf "$A"; else t python3 -c "import tarfile,sys; tarfile.open(sys.argv[1],'r:xz').extractall(sys.argv[2])" "$A" $W; fi
fi
export PATH=$B:$PATH
cd $W
case $what in
verify)
  head -2 /etc/os-release; nproc; grep -m1 'model name' /proc/cpuinfo; free -g | head -2
  nvidia-smi -L; command -v xz || echo "no xz (unpacked with python3)"; du -sh $W; cat $B/../VERSIONS
  for b in $B/*; do echo "== ldd $(basename $b)"; ldd $b; done
  t diptych probe
  t diptych demo; ffprobe -v error -count_packets -show_entries stream=codec_name,nb_read_packets,duration -of csv demo.mp4
  t ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc2=size=1920x1080:rate=60 -f lavfi -i sine=frequency=440:sample_rate=48000 -t 5 -c:v libx264 -preset veryfast -c:a aac -pix_fmt yuv420p p.mp4
  t ffmpeg -hide_banner -loglevel error -y -f lavfi -i testsrc=size=1280x720:rate=30 -t 5 -c:v libx265 -preset ultrafast -x265-params log-level=error -pix_fmt yuv420p s.mp4
  t diptych record --primary p.mp4 --secondary s.mp4 --out take.mp4 --json | grep -E '"(frames|fps|realtimeFactor|encoder|gpu|audio)"'
  ffprobe -v error -count_packets -show_entries stream=codec_name,nb_read_packets,duration -of csv take.mp4
  t diptych record --primary p.mp4 --secondary s.mp4 --layout side-by-side --codec hevc --out take.ts
  ffprobe -v error -count_packets -show_entries stream=codec_name,nb_read_packets -of csv take.ts
  t ffmpeg -hide_banner -loglevel error -init_hw_device cuda=cu:0 -hwaccel cuda -hwaccel_device cu -hwaccel_output_format cuda -i p.mp4 -an -vf hwdownload,format=nv12 -f null - && echo "NVDEC decode ok"
  t diptych-gpu-bench --quiet --layout pip --streams 4 --contexts 1 --frames 240
  t timeout 60 diptych-gpu-check
  ;;
bench)
  t diptych bench --stages e2e --chart none --sheet none --work-dir /tmp/dbench "$@"
  ;;
bounds)
  # CPU cost of the parts of one pair: decode alone, x264 alone (from raw frames), one pair at a time.
  p=/tmp/dbench/primary-1920x1080-60-6s.mp4; s=/tmp/dbench/secondary-1280x720-30-6s.mp4
  TIMEFORMAT='%R s wall, %U s user, %S s sys'
  for preset in "$@"; do
    echo "== $preset"
    echo "decode 1080p60 + 720p30 (CPU):"; time ffmpeg -hide_banner -loglevel error -i $p -i $s -map 0:v -map 1:v -f null - -f null -
    echo "decode 1080p60 (NVDEC):"; time ffmpeg -hide_banner -loglevel error -hwaccel cuda -hwaccel_output_format cuda -i $p -vf hwdownload,format=nv12 -f null -
    ffmpeg -hide_banner -loglevel error -y -i $p -f rawvideo -pix_fmt nv12 /tmp/raw.nv12
    echo "x264 $preset 1080p60 10M from raw NV12:"; time ffmpeg -hide_banner -loglevel error -f rawvideo -pix_fmt nv12 -s 1920x1080 -r 60 -i /tmp/raw.nv12 -c:v libx264 -preset $preset -b:v 10M -g 60 -bf 0 -f mp4 -y /tmp/x.mp4
    echo "read raw only:"; time ffmpeg -hide_banner -loglevel error -f rawvideo -pix_fmt nv12 -s 1920x1080 -r 60 -i /tmp/raw.nv12 -f null -
  done
  ;;
round2)
  # veryfast for everyone; ultrafast for the NVDEC configurations; the parts' costs; a longer lone take's memory.
  T0=$(date +%s); left() { echo $(( $1 - ($(date +%s) - T0) )); }
  R="diptych bench --stages e2e --chart none --sheet none --work-dir /tmp/dbench"
  t timeout $(left 140) $R --pairs 48 --preset veryfast --duration 6 --json $O/veryfast.json > $O/veryfast.md 2>> $O/run.log
  t timeout $(left 200) $R --pairs 48 --preset ultrafast --duration 6 --pair-runners ffmpeg-nvdec,ffmpeg-nvdec-cpu-overlay --json $O/nvdec.json > $O/nvdec.md 2>> $O/run.log
  [ $(left 228) -gt 12 ] && t timeout $(left 228) "$self" "$A" $O bounds ultrafast veryfast > $O/bounds.log 2>&1
  [ $(left 268) -gt 25 ] && t timeout $(left 268) $R --work-dir /tmp/dmem --pairs 1 --duration 40 --preset ultrafast --pair-runners diptych,ffmpeg --json $O/memory.json > $O/memory.md 2>> $O/run.log
  ;;
esac
