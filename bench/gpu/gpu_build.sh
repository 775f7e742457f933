# gpu_build.sh, sourced by the bench/gpu scripts (the directory is the
# repository root): gpu_build BUILD_DIR TARGET prints "SKIPPED: <reason>" and
# exits 77 without a usable GPU, else builds TARGET in BUILD_DIR (configured
# if absent; "FAILED" and exit 1 if it cannot) and prints the GPU's line.
gpu_build() {
    if ! command -v nvidia-smi >/dev/null 2>&1; then
        echo "SKIPPED: no nvidia-smi (no NVIDIA driver on this machine)"; exit 77
    fi
    if ! smi=$(nvidia-smi -L 2>&1); then
        echo "SKIPPED: nvidia-smi fails: $(echo "$smi" | head -n 1)"; exit 77
    fi
    [ -f "$1/CMakeCache.txt" ] || cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release >/dev/null || exit 1
    cmake --build "$1" --target "$2" -j "$(nproc 2>/dev/null || echo 2)" >/dev/null || {
        echo "FAILED: could not build $2 in $1"; exit 1; }
    echo "$smi" | head -n 1
}
