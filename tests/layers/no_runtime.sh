#!/bin/sh
# no_runtime.sh NM LIB [RUNTIME_LIB]: LIB holds no runtime object: no symbol
# of the runtime's prefixes (rt_, rtc_, rtcpu_, rtcu_), defined, weak or
# referenced, and none of runtime/common's object files. With RUNTIME_LIB the
# check is first shown to catch the runtime itself.
nm=$1 lib=$2 rtlib=$3
found() { # found LIB: the runtime's symbols and objects in LIB
    "$nm" -A "$1" 2>/dev/null | awk '$NF ~ /^(rt|rtc|rtcpu|rtcu)_/ { print }
        { split($1, p, ":"); o = p[2]; if (o ~ /^(util|log|stop|launcher|crc32c|safetensors.*|ckpt_.*)\.c\.o$/) print o }' | sort -u
}
if [ -n "$rtlib" ] && [ -z "$(found "$rtlib")" ]; then
    echo "FAIL: the check finds nothing of the runtime in $rtlib itself"
    exit 1
fi
"$nm" "$lib" >/dev/null || exit 1
bad=$(found "$lib")
if [ -n "$bad" ]; then
    echo "FAIL: $lib holds runtime code:"
    echo "$bad" | head -20
    exit 1
fi
echo "ok: $(basename "$lib") holds no runtime object"
