#!/usr/bin/env bash
# fault_ckpt_dir: a checkpoint directory belongs to one run (issue 36.1).
#   - rollback: --load D/step-8 --save D keeps step 8 (the rollback point),
#     and a later plain --load D resumes the new lineage's step 9, never the
#     abandoned step 10;
#   - a new run saving into a directory with another run's later steps keeps
#     its own saves (they were pruned at once), and a plain --load names the
#     run it resumes and says that another exists;
#   - a step entry that is a symbolic link is never followed by pruning: the
#     files it points to stay;
#   - --save D/step-N is refused before the first step, saying what to pass.
set -u
work=$(mktemp -d /tmp/ptdc-fault-ckdir.XXXXXX)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/prog.sh"

d=$work/roll
train --steps 10 --save-every 2 --save "$d"
expect "10 steps" 0 "saved checkpoint of step 10" 
train --steps 9 --load "$d/step-000000008" --save "$d"
expect "rollback to step 8" 0 "a new lineage .* starts after step 8"
[ -f "$d/step-000000008/manifest.json" ] || { echo "FAIL: the rollback point step 8 was pruned"; ls "$d"; fail=1; }
train --steps 9 --load "$d"
expect "plain --load after the rollback" 0 "loaded checkpoint of step 9 "
expect "plain --load after the rollback" 0 "step-000000010: skipped: abandoned by a rollback"

d=$work/two
train --steps 6 --save-every 2 --save "$d"
train --steps 2 --save-every 1 --seed 3 --save "$d"
expect "a second run" 0 "saved checkpoint of step 2"
for s in 1 2 4 6; do
  [ -f "$d/step-00000000$s/manifest.json" ] || { echo "FAIL: step $s was pruned"; ls "$d"; fail=1; }
done
train --steps 6 --load "$d"
expect "plain --load with two runs" 0 "holds the steps of 1 other run besides run"
expect "plain --load with two runs" 0 "loaded checkpoint of step 6 "

d=$work/link
mkdir -p "$work/outside" "$d"
echo precious > "$work/outside/rank00000.ckpt"
ln -s "$work/outside" "$d/step-000000001"
train --steps 6 --save-every 2 --keep 1 --save "$d"
expect "a symlinked step" 0 "step-000000001: a symbolic link, not a step directory; never followed or removed"
[ -f "$work/outside/rank00000.ckpt" ] || { echo "FAIL: pruning deleted a file through a symlink"; fail=1; }

train --steps 2 --save "$work/roll/step-000000008"
expect "--save DIR/step-N" 2 "is a step directory of a checkpoint.*pass --save $work/roll "
lacks "--save DIR/step-N" "^step "
exit $fail
