# Run 44: RGBA and BGRA pictures read in place; paced runs with the streams' start spread. $1 = output dir.
O=$1; W=/tmp/dsv; B=$W/diptych-server-linux-x86_64/bin
[ -x $B/diptych-gpu-bench ] || { mkdir -p $W; tar -C $W -xJf $(dirname "$0")/diptych-server-linux-x86_64.tar.xz; }
export PATH=$B:$PATH
timeout -k 2 90 diptych-gpu-check --gpu device > $O/check.txt 2>&1; grep -h "PASS\|FAIL" $O/check.txt | sort -u
for v in "pl-rgba-32 auto --format rgba --streams 32 --frames 300" "pl-rgba-32-textures textures --format rgba --streams 32 --frames 300" \
         "pl-bgra-32 auto --format bgra --streams 32 --frames 300" "pl-rgba-16 auto --format rgba --streams 16 --frames 300" \
         "pl-rgba-64 auto --format rgba --streams 64 --frames 200" "pg-rgba-32 auto --format rgba --streams 32 --frames 300 --host-memory pageable" \
         "pl-pip-32 auto --streams 32 --frames 400" "pl-sbs-32 auto --layout side-by-side --streams 32 --frames 400" \
         "pl-stacked-32 auto --layout stacked --streams 32 --frames 400" \
         "pl-paced-64 auto --streams 64 --frames 300 --pace 60" "pg-paced-64 auto --streams 64 --frames 300 --pace 60 --host-memory pageable" \
         "pl-paced-64-rgba auto --format rgba --streams 64 --frames 300 --pace 60"; do
  set -- $v; n=$1 pic=$2; shift 2
  m="--host-memory page-locked"; case "$*" in *--host-memory*) m=;; esac
  l="--layout pip"; case "$*" in *--layout*) l=;; esac
  DIPTYCH_GPU_PICTURES=$pic timeout -k 2 40 diptych-gpu-bench --quiet --contexts 1 $l $m "$@" --json $O/$n.json > $O/$n.txt 2>&1
  echo "$n: $(grep -h 'composites/s\|per composite\|paced:\|host memory\|error\|rror:' $O/$n.txt | tr '\n' ' ')"
done
grep -h 'contexts 1' $O/pl-rgba-32.txt
