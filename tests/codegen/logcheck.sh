# logcheck.sh: sourced by every script that runs generated programs
# (tests/codegen/equiv.sh, restart.sh, tests/ref/run.sh).
#   logcheck LOG   fails (status 1, the findings printed) when LOG holds
#                  anything AddressSanitizer, LeakSanitizer or UBSan wrote,
#                  whatever the program's exit status was.
# Generated programs of the sanitizer build stop at the first finding
# (-fno-sanitize-recover=all, codegen/CMakeLists.txt); this catches what
# that flag cannot: a finding in a process whose status is lost (a rank
# killed by mpirun after another failed, a launcher that exits 0) and any
# build without the flag. tests/codegen/sanitizer.sh proves both halves.
logcheck() {
    if grep -E -q 'runtime error|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer' "$1"; then
        grep -E -m 5 'runtime error|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer' "$1"
        echo "logcheck: sanitizer findings in $1"
        return 1
    fi
    return 0
}
