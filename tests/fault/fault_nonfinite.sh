#!/usr/bin/env bash
# fault_nonfinite: non-finite weights (issue 36.5).
#   - a NaN and an infinity in imported weights: refused before the first
#     step, naming the tensor;
#   - after --lr 1e30 the weights stay finite but every later loss is not:
#     that state is not saved, and the step saved before stays the newest.
set -u
work=$(mktemp -d /tmp/ptdc-fault-nonfinite.XXXXXX)
trap 'rm -rf "$work"' EXIT
. "$(dirname "$0")/prog.sh"

train --steps 1 --export-hf "$work/w.safetensors"
expect "export" 0 "exported"
for v in nan inf; do
  name=$(python3 - "$work/w.safetensors" "$work/$v.safetensors" $v <<'PY'
import json, struct, sys
src, dst, v = sys.argv[1:]
b = bytearray(open(src, 'rb').read())
n = struct.unpack('<Q', b[:8])[0]
h = json.loads(b[8:8 + n])
name = sorted(k for k in h if k != '__metadata__')[-1]
at = 8 + n + h[name]['data_offsets'][0] + 4 * 7
b[at:at + 4] = struct.pack('<f', float(v))
open(dst, 'wb').write(b)
print(name)
PY
)
  train --steps 2 --import-hf "$work/$v.safetensors"
  expect "imported $v" 1 "--import-hf $work/$v.safetensors: tensor '$name' holds $( [ $v = nan ] && echo NaN || echo 'an infinity')"
  lacks "imported $v" "^step "
done

d=$work/lr
train --steps 2 --save "$d"
expect "2 steps" 0 "saved checkpoint of step 2"
train --steps 4 --load "$d" --save "$d" --save-every 1 --lr 1e30
expect "--lr 1e30" 1 "not saving step 3: its weights give a non-finite loss"
lacks "--lr 1e30" "saved checkpoint of step 3"
train --steps 2 --load "$d"
expect "after --lr 1e30" 0 "loaded checkpoint of step 2 "
exit $fail
