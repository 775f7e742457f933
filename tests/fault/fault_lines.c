/* fault_lines.c: error lines are written whole.
 *   fault_lines count    three rt_log lines and an rt_fatal (run with the
 *                        shim's FAULT_STDERR_COUNT: four write() calls)
 *   fault_lines race     4 processes write 300 lines each into one pipe;
 *                        every line read back must be one of theirs, intact */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt.h"

enum { PROCS = 4, LINES = 300, PAD = 200 };

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "count")) {
        for (int i = 0; i < 3; i++)
            rt_log("line %d of a message in %s pieces: %s", i, "several", "formatted");
        rt_fatal("%s: the last line, %d", "fatal", 4);
    }
    if (argc != 2 || strcmp(argv[1], "race"))
        return 2;
    int fd[2];
    if (pipe(fd) != 0)
        return 2;
    char pad[PAD + 1];
    memset(pad, 'x', PAD);
    pad[PAD] = 0;
    for (int p = 0; p < PROCS; p++) {
        if (fork() == 0) {
            close(fd[0]);
            dup2(fd[1], 2);
            for (int i = 0; i < LINES; i++)
                rt_log("proc %d line %03d %s end", p, i, pad);
            _exit(0);
        }
    }
    close(fd[1]);
    FILE *in = fdopen(fd[0], "r");
    char line[1024];
    int good = 0, bad = 0;
    while (fgets(line, sizeof line, in)) {
        int p, i;
        char tail[PAD + 16];
        if (sscanf(line, "proc %d line %d %208s end\n", &p, &i, tail) == 3 && p >= 0 &&
            p < PROCS && !strcmp(tail, pad) && strlen(line) == strlen("proc 0 line 000  end\n") + PAD)
            good++;
        else if (bad++ < 5)
            fprintf(stdout, "torn line: %s", line);
    }
    while (wait(NULL) > 0)
        ;
    printf("%d whole lines, %d torn\n", good, bad);
    return good == PROCS * LINES && bad == 0 ? 0 : 1;
}
