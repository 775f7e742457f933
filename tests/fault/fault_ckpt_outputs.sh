#!/usr/bin/env bash
# fault_ckpt_outputs: every output target is checked before the first step
# (issue 36.2, 36.4).
#   - a second job saving into a directory that a running job saves into is
#     refused, naming the holder; after the first job is killed (-9) its
#     lock is not stale: a new job saves there;
#   - an unwritable --save or --export-hf (a file in the way, /proc, a
#     missing parent of a file export, a read-only directory when not root)
#     is refused before the first step, naming the path and the reason.
set -u
work=$(mktemp -d /tmp/ptdc-fault-outputs.XXXXXX)
cleanup() { [ -n "${job:-}" ] && kill -KILL "$job" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
. "$(dirname "$0")/prog.sh"
before_training() { expect "$1" 2 "$2"; lacks "$1" "^step "; }

d=$work/locked
: > "$work/first.out"
setsid "$prog/run.sh" --steps 100000 --save "$d" --save-every 1000 > "$work/first.out" 2>&1 &
job=$!
for _ in $(seq 600); do grep -q "^step" "$work/first.out" && break; sleep 0.05; done
train --steps 2 --save "$d"
before_training "a second job saving into one directory" "another job is saving checkpoints into this directory (its lock .*\.ptdc-save\.lock is held by pid [0-9]* on host"
kill -KILL -- -"$job" 2>/dev/null; wait "$job" 2>/dev/null; job=
train --steps 2 --save "$d"
expect "after the first job was killed" 0 "saved checkpoint of step 2"

echo data > "$work/afile"
train --steps 2 --save "$work/afile"
before_training "--save onto a file" "--save $work/afile: .*exists and is not a directory"
train --steps 2 --save "$work/afile/sub"
before_training "--save below a file" "--save $work/afile/sub: .*not a directory"
train --steps 2 --save /proc/ptdc-no-such
before_training "--save in /proc" "--save /proc/ptdc-no-such: cannot create directory"
train --steps 2 --export-hf /proc/ptdc.safetensors
before_training "--export-hf in /proc" "--export-hf /proc/ptdc.safetensors: cannot write in /proc"
train --steps 2 --export-hf "$work/missing/w.safetensors"
before_training "--export-hf with a missing directory" "--export-hf $work/missing/w.safetensors: its directory $work/missing does not exist"
train --steps 2 --export-hf "$work/afile"
before_training "--export-hf directory onto a file" "--export-hf $work/afile: exists and is not a directory"
if [ "$(id -u)" != 0 ]; then # root writes through permission bits
  mkdir "$work/ro" && chmod 555 "$work/ro"
  train --steps 2 --save "$work/ro"
  before_training "--save read-only" "--save $work/ro: cannot write in the checkpoint directory"
  train --steps 2 --export-hf "$work/ro/x.safetensors"
  before_training "--export-hf read-only" "cannot write in $work/ro"
fi
exit $fail
