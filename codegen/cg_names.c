/* cg_names.c: the names generated code uses for tensors: a tensor's name
 * without its layer (layers share one struct type) and a C identifier that
 * cannot collide with a keyword or with the runtime's and trainer's names.
 * cg_lower.c names buffers with them and cg_print.c prints them. */
#include "cg.h"

#include <ctype.h>
#include <string.h>

const char *cg_short_name(const Cg *c, int t)
{
    const char *n = c->g->tensors[t].name;
    if (c->g->tensors[t].layer >= 0 && strncmp(n, "layers", 6) == 0) {
        const char *dot = strchr(n, '.');
        if (dot && (dot = strchr(dot + 1, '.')))
            return dot + 1;
    }
    return n;
}

static const char *const reserved[] = {
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "new", "delete",
    "class", "this", "template", "typename", "private", "public", "protected", "virtual",
    "operator", "namespace", "using", "friend", "b", "s", "k", "l", "mb", "slot", "A", "F", "I",
    "NULL", "main", "int8_t", "int16_t", "int32_t", "int64_t", NULL};

const char *cg_ident(Cg *c, const char *s)
{
    char buf[512];
    size_t k = 0;
    for (const char *p = s; *p && k + 1 < sizeof buf; p++)
        buf[k++] = isalnum((unsigned char)*p) ? *p : '_';
    buf[k] = 0;
    bool bad = k == 0 || isdigit((unsigned char)buf[0]) || !strncmp(buf, "g_", 2) ||
               !strncmp(buf, "rt_", 3) || !strncmp(buf, "cg_", 3) || !strncmp(buf, "CG_", 3) ||
               !strncmp(buf, "RT_", 3);
    for (int i = 0; reserved[i] && !bad; i++)
        bad = !strcmp(buf, reserved[i]);
    return bad ? cg_fmt(c, "t_%s", buf) : ir_strdup(c->arena, buf);
}
