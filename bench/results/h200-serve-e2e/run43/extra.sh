# Extra runs after run.sh storage: $1 = output dir. Page-locked unless noted.
O=$1; B=/tmp/dsv/diptych-server-linux-x86_64/bin; export PATH=$B:$PATH
for v in "pl-pip-16 --layout pip --streams 16 --frames 400" "pl-pip-64 --layout pip --streams 64 --frames 300" \
         "pl-pip-32-c2 --layout pip --streams 32 --frames 400 --contexts 2" "pl-rgba-32 --layout pip --streams 32 --frames 300 --format rgba" \
         "pl-pip-32-if6 --layout pip --streams 32 --frames 400 --in-flight 6" "pl-pip-32-calls --layout pip --streams 32 --frames 400 --api calls"; do
  set -- $v; n=$1; shift
  c=1; case "$*" in *--contexts*) c=;; esac
  timeout -k 2 40 diptych-gpu-bench --quiet ${c:+--contexts 1} --host-memory page-locked "$@" --json $O/extra-$n.json > $O/extra-$n.txt 2>&1
  echo "$n: $(grep -h 'composites/s\|per composite\|host memory' $O/extra-$n.txt | tr '\n' ' ')"
done
