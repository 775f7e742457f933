/* import_hf.c: `ptdc import-hf DIR_OR_CONFIG [-o MODEL.mdl]`: write the .mdl
 * equivalent of a Hugging Face config.json (frontend/hf_*.c), after checking
 * that it compiles. Without -o the text goes to stdout. The file is written
 * whole or not at all (a temporary renamed into place). */
#include "driver.h"
#include "frontend.h"
#include "ir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(void)
{
    printf("usage: ptdc import-hf DIR_OR_CONFIG [-o MODEL.mdl]\n"
           "\n"
           "Write the .mdl of a Hugging Face model: DIR/config.json (or the config file\n"
           "given) of LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or\n"
           "GPT2LMHeadModel. Every constant names the key it came from; a key ptdc cannot\n"
           "reproduce exactly is refused by name. Without -o the model goes to stdout.\n"
           "The model's weights are read by the training program: run.sh --import-hf DIR.\n");
}

static bool write_file(const char *path, const char *text, size_t len)
{
    if (!ir_mkdirs_parent(path))
        return false;
    size_t n = strlen(path) + 32;
    char *tmp = ir_xmalloc(n);
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "w");
    bool ok = f && fwrite(text, 1, len, f) == len && fflush(f) == 0;
    if (f && fclose(f) != 0)
        ok = false;
    if (ok && rename(tmp, path) != 0)
        ok = false;
    if (!ok) {
        ir_error(IR_NOLOC, "cannot write '%s': %s", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return ok;
}

/* Is out the input's config (in, or in/config.json for a directory)? */
static bool same_file(const char *out, const char *in)
{
    struct stat o, i;
    char config[4096];
    if (stat(out, &o) != 0 || stat(in, &i) != 0)
        return false;
    if (S_ISDIR(i.st_mode)) {
        snprintf(config, sizeof config, "%s/config.json", in);
        if (stat(config, &i) != 0)
            return false;
    }
    return o.st_dev == i.st_dev && o.st_ino == i.st_ino;
}

int drv_import_hf(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage();
            return 0;
        } else if (!strcmp(argv[i], "-o") || !strcmp(argv[i], "--output")) {
            if (i + 1 >= argc) {
                ir_error(IR_NOLOC, "%s expects a file name", argv[i]);
                return 1;
            }
            out = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            ir_error(IR_NOLOC, "import-hf: unknown option '%s' (see ptdc import-hf --help)",
                     argv[i]);
            return 1;
        } else if (in) {
            ir_error(IR_NOLOC, "import-hf: one model at a time: '%s' and '%s'", in, argv[i]);
            return 1;
        } else {
            in = argv[i];
        }
    }
    if (!in) {
        ir_error(IR_NOLOC, "import-hf: no model given (usage: ptdc import-hf DIR_OR_CONFIG "
                 "[-o MODEL.mdl])");
        return 1;
    }
    if (out && same_file(out, in)) {
        ir_error(IR_NOLOC, "import-hf: -o %s is the config it reads; write the .mdl elsewhere", out);
        return 1;
    }
    IrArena *a = ir_arena_new();
    size_t len;
    char *text = fe_hf_import(a, in, &len);
    int rc = 1;
    /* What is written must compile: the import and the language agree. */
    if (text && fe_compile_source(a, out ? out : "import-hf.mdl", text, len, NULL, 0, 0)) {
        if (!out)
            rc = fwrite(text, 1, len, stdout) == len ? 0 : 1;
        else if (write_file(out, text, len)) {
            fprintf(stderr, "ptdc: wrote %s\n", out);
            rc = 0;
        }
    }
    ir_arena_free(a);
    return rc;
}
