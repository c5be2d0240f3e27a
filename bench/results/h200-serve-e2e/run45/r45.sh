# Run 45: 64 paced pairs with each stream's span and the latest submission; RGBA with two contexts. $1 = output dir.
O=$1; W=/tmp/dsv; B=$W/diptych-server-linux-x86_64/bin
[ -x $B/diptych-gpu-bench ] || { mkdir -p $W; tar -C $W -xJf $(dirname "$0")/diptych-server-linux-x86_64.tar.xz; }
export PATH=$B:$PATH
for v in "pl-paced-64 1 --streams 64 --frames 300 --pace 60" "pl-paced-64-b 1 --streams 64 --frames 300 --pace 60" \
         "pl-paced-64-stagger 1 --streams 64 --frames 300 --pace 60 --stagger" "pg-paced-64 1 --streams 64 --frames 300 --pace 60 --host-memory pageable" \
         "pl-paced-64-600 1 --streams 64 --frames 600 --pace 60" \
         "pl-rgba-32-c2 2 --format rgba --streams 32 --frames 300" "pl-pip-32 1 --streams 32 --frames 400"; do
  set -- $v; n=$1 c=$2; shift 2
  m="--host-memory page-locked"; case "$*" in *--host-memory*) m=;; esac
  timeout -k 2 40 diptych-gpu-bench --quiet --contexts $c --layout pip $m "$@" --json $O/$n.json > $O/$n.txt 2>&1
  echo "$n: $(grep -h 'composites/s\|paced:\|host memory\|rror' $O/$n.txt | tr '\n' ' ')"
done
