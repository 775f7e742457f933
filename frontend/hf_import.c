/* hf_import.c: the frontend's entry points for Hugging Face models
 * (frontend.h): config.json read strictly (hf_config.c), written as .mdl
 * (hf_mdl.c). */
#include "fe.h"
#include "hf.h"

#include <string.h>
#include <sys/stat.h>

bool fe_is_hf_config(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return true;
    size_t n = strlen(path);
    return n >= 5 && strcmp(path + n - 5, ".json") == 0;
}

char *fe_hf_import(IrArena *a, const char *path, size_t *len)
{
    HfModel m;
    if (!hf_config_read(a, path, &m))
        return NULL;
    return hf_mdl_write(a, &m, len);
}
