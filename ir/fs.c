/* fs.c: creating output directories (the driver's plan files, codegen's DIR). */
#include "ir.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool ir_mkdirs(const char *dir)
{
    char *p = ir_xstrdup(dir);
    bool ok = true;
    for (char *s = p + 1; ok && *p; s++) {
        bool end = *s == 0;
        if (*s == '/' || end) {
            *s = 0;
            if (mkdir(p, 0777) != 0 && errno != EEXIST) {
                ir_error(IR_NOLOC, "cannot create directory '%s': %s", p, strerror(errno));
                ok = false;
            }
            if (end)
                break;
            *s = '/';
        }
    }
    free(p);
    return ok;
}

bool ir_mkdirs_parent(const char *path)
{
    char *p = ir_xstrdup(path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') /* "out/" names the directory "out" */
        p[--n] = 0;
    char *slash = strrchr(p, '/');
    bool ok = true;
    if (slash && slash != p) {
        *slash = 0;
        ok = ir_mkdirs(p);
    }
    free(p);
    return ok;
}
