#!/usr/bin/env bash
# fault_ckpt_async_kill: kill -9 of every rank while an asynchronous save is
# in flight (issue 35). tiny-llama's program (2 ranks) saves step 3, then
# resumes from it saving every 3 steps with the writer slowed
# (PTDC_CKPT_WRITE_DELAY_MS: each rank's file of step 6 is written, then the
# writer sleeps before reporting it done). Once both rank files of step 6
# are on disk and the job has trained step 7 past it (training went on
# while the save was written), every rank gets SIGKILL. Then:
#   - step 6 has its rank files but no manifest: not committed;
#   - a plain --load resumes step 3 (the previous checkpoint), and steps
#     4..8 of the resumed run log the losses of an uninterrupted 8-step run
#     and export byte-identical weights; it saves step 6 and 8 over the
#     leftovers, and step 8 then loads.
set -u
work=$(mktemp -d /tmp/ptdc-fault-async-kill.XXXXXX)
cleanup() {
  [ -n "${job:-}" ] && kill -KILL -- -"$job" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
. "$(dirname "$0")/prog.sh"
common="--data synthetic:7 --decay-steps 8"
losses() { grep '^step' | awk '{split($2, s, "/"); print s[1], $5}'; }

train $common --steps 8 --export-hf "$work/full.safetensors"
expect "8 uninterrupted steps" 0 "^step *8/8"
losses <<<"$out" > "$work/full.losses"

d=$work/ckpt
train $common --steps 3 --save "$d"
expect "3 steps" 0 "saved checkpoint of step 3 .*(asynchronous"

# In a process group of its own, so that the cleanup can end what is left.
python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
  env PTDC_CKPT_WRITE_DELAY_MS=600000 "$prog/run.sh" $common --steps 100000 --load "$d" \
  --save "$d" --save-every 3 > "$work/killed.out" 2>&1 &
job=$!
s6=$d/step-000000006
ready=0
for _ in $(seq 1200); do
  if [ -f "$s6/rank00000.ckpt" ] && [ -f "$s6/rank00001.ckpt" ] &&
     grep -q '^step *7/' "$work/killed.out"; then ready=1; break; fi
  sleep 0.05
done
mapfile -t pids < <(pgrep -f "^$prog/train")
[ ${#pids[@]} -gt 0 ] && kill -KILL "${pids[@]}"
kill -KILL -- -"$job" 2>/dev/null
{ wait "$job"; } 2>/dev/null; job=
out=$(cat "$work/killed.out")
if [ $ready = 0 ]; then
  echo "FAIL: step 6's rank files never appeared while the job trained on:"
  sed 's/^/    /' "$work/killed.out"; ls -R "$d"; fail=1
fi
echo "killed ${#pids[@]} ranks at: $(grep '^step' "$work/killed.out" | tail -1)"
lacks "the killed run" "saved checkpoint of step 6"
[ -e "$s6/manifest.json" ] && { echo "FAIL: step 6 was committed before its writers finished"; fail=1; }
# What the killed run trained agrees with the uninterrupted run as far as
# both went (the save in flight changed nothing in training).
losses <<<"$out" | awk '$1 <= 8' > "$work/killed.losses"
if [ ! -s "$work/killed.losses" ] ||
   ! awk 'NR == FNR { full[$0]; next } !($0 in full) { bad = 1 } END { exit bad }' \
       "$work/full.losses" "$work/killed.losses"; then
  echo "FAIL: the killed run's losses differ from the uninterrupted run's"; fail=1
fi

train $common --steps 8 --load "$d" --save "$d" --save-every 3 --export-hf "$work/resumed.safetensors"
expect "resume after the kill" 0 "loaded checkpoint of step 3 "
expect "resume after the kill" 0 "saved checkpoint of step 6 "
expect "resume after the kill" 0 "saved checkpoint of step 8 "
{ awk '$1 <= 3' "$work/full.losses"; losses <<<"$out"; } > "$work/resumed.losses"
if ! cmp -s "$work/full.losses" "$work/resumed.losses"; then
  echo "FAIL: 3 + 5 resumed steps differ from 8 uninterrupted steps:"
  diff "$work/full.losses" "$work/resumed.losses" | sed 's/^/    /'; fail=1
else
  echo "resumed steps 4..8 log the uninterrupted run's losses, bitwise"
fi
cmp "$work/full.safetensors" "$work/resumed.safetensors" ||
  { echo "FAIL: the resumed run's weights differ from the uninterrupted run's"; fail=1; }
train $common --steps 8 --load "$d"
expect "load after the resumed run" 0 "loaded checkpoint of step 8 "
exit $fail
