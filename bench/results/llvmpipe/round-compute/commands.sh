#!/bin/bash
# llvmpipe end to end, PiP: before (the branch point) and after, alternating, same inputs.
BASE=/tmp/gpu-base/.build/release/diptych
MINE=/work/wt-gpu/.build/release/diptych
W=/tmp/e2e/work
for i in 1 2 3; do
  for who in base mine; do
    bin=$BASE; [ $who = mine ] && bin=$MINE
    $bin bench --stages e2e --layouts pip --peers none --work-dir $W --json /tmp/e2e/$who-$i.json --chart none --sheet none > /tmp/e2e/$who-$i.md 2>/tmp/e2e/$who-$i.err
    echo "$who $i rc $?: $(grep '| e2e' /tmp/e2e/$who-$i.md)"
  done
done
