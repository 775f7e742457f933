# progcache.sh: sourced by the test scripts that build generated programs.
#   build_program DIR [VAR=VALUE...]
#       `make -s -C DIR train VAR=VALUE...`, unless a program was built from
#       exactly the same inputs before: then that binary is linked in
#       (docs/design.md, "The suite's time").
# Many tests build the same program: the LAMB fixtures train the AdamW
# fixtures' programs with another flag, the fault tests compile
# tiny-llama for 2 ranks, the 1-rank references repeat across fixtures.
# Compiling one costs about 2 CPU s (5 under ASan), more than most runs.
# The key is a hash of everything the Makefile's `train` rule reads: the
# program's sources and headers, the Makefile and any makefile beside it
# (equiv.sh's equiv.mk; compiler, flags, paths), the
# runtime archive and the runtime's headers, the compiler's version and the
# make variables given: any change of any of them compiles anew. The cache lives beside the
# runtime archive (one per build tree: the release and the ASan programs
# never mix); PTDC_PROGCACHE=off compiles every program.
build_program() {
    _d=$1
    shift
    _lib=$(sed -n 's/^RUNTIME_LIB = //p' "$_d/Makefile")
    _inc=$(sed -n 's/^RUNTIME_INCLUDE = //p' "$_d/Makefile")
    _cc=$(sed -n 's/^CC = //p' "$_d/Makefile")
    if [ "${PTDC_PROGCACHE:-on}" = off ] || [ -z "$_lib" ] || [ ! -f "$_lib" ] || [ -z "$_cc" ]; then
        make -s -C "$_d" train "$@"
        return
    fi
    _cache=$(dirname "$_lib")/progcache
    # (each file's own hash beside its name, one sha256sum for all of a
    # kind: 0.04 CPU s a key where a cat of each file took 0.12, 170
    # programs under ASan)
    _key=$( { printf '%s\n' "$@"
              (cd "$_d" && ls Makefile *.mk *.c *.h 2>/dev/null | LC_ALL=C sort | xargs sha256sum)
              sha256sum < "$_lib"
              find "$_inc" -name '*.h' | LC_ALL=C sort | xargs sha256sum
              "$_cc" --version; } | sha256sum | cut -c1-32)
    # (a hard link, or a copy where the program's directory is on another
    # file system: the fault tests' are under /tmp)
    if [ -f "$_cache/$_key" ] && rm -f "$_d/train" &&
       { ln "$_cache/$_key" "$_d/train" 2>/dev/null || cp "$_cache/$_key" "$_d/train"; }; then
        touch "$_d/train" # newer than the sources: run.sh's make keeps it
        return
    fi
    # Built anew even if a `train` there looks up to date: make cannot see
    # that it was built with other variables, and it is about to be cached.
    rm -f "$_d/train"
    make -s -C "$_d" train "$@" || return 1
    mkdir -p "$_cache"
    # Entries no program directory links any more (their tests regenerated
    # them against a newer runtime) go, unless just written by a test
    # running beside this one.
    find "$_cache" -type f -links 1 -mmin +60 -delete 2>/dev/null || true
    # A link under a temporary name, renamed: a test reading the cache at
    # the same time sees the whole binary or none.
    { ln -f "$_d/train" "$_cache/.$_key.$$" 2>/dev/null || cp "$_d/train" "$_cache/.$_key.$$"; } &&
        mv -f "$_cache/.$_key.$$" "$_cache/$_key" || rm -f "$_cache/.$_key.$$"
    return 0
}
