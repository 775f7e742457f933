/* answer.c: what ptdc answers, as an exit status and, with --json, as one
 * JSON object on stdout for every outcome: a plan, a layout that fits or
 * does not, a plan a framework cannot express, or an invalid request. The
 * sentences ptdc says on stderr are captured while it runs (and still
 * printed there at the end) so the JSON carries the same reason and notes.
 * Statuses and keys: docs/planner.md, "JSON answers". */
#include "driver.h"

#include "passes.h"
#include "report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct {
    FILE *mem, *prev;
    char *text;
    size_t len;
} cap;

bool drv_answered;

void drv_capture_begin(void)
{
    cap.mem = open_memstream(&cap.text, &cap.len);
    if (cap.mem)
        cap.prev = ir_diag_set_stream(cap.mem);
}

void drv_capture_end(void)
{
    if (!cap.mem)
        return;
    ir_diag_set_stream(cap.prev);
    fclose(cap.mem);
    cap.mem = NULL;
    fflush(stdout);
    fwrite(cap.text, 1, cap.len, stderr);
    free(cap.text);
    cap.text = NULL;
}

/* The diagnostics so far, one per line as printed ("ptdc: error: ...",
 * "models/x.mdl:3:4: error: ..."), without the quoted source lines; and
 * the messages of the errors and notes alone. */
void drv_messages(DrvMsgs *m)
{
    memset(m, 0, sizeof *m);
    if (!cap.mem)
        return;
    fflush(cap.mem);
    m->buf = ir_xmalloc(cap.len + 1);
    memcpy(m->buf, cap.text, cap.len);
    m->buf[cap.len] = 0;
    for (char *save = NULL, *line = strtok_r(m->buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == ' ' || m->nlines == DRV_MAX_MSGS) /* a quoted source line or its caret */
            continue;
        m->line[m->nlines++] = line;
        const char *kinds[] = {": error: ", ": note: ", ": warning: "};
        for (int k = 0; k < 3; k++) {
            const char *hit = strstr(line, kinds[k]);
            if (!hit)
                continue;
            const char *msg = hit + strlen(kinds[k]);
            if (k == 0 && m->nerr < DRV_MAX_MSGS)
                m->err[m->nerr++] = msg;
            else if (k == 1 && m->nnote < DRV_MAX_MSGS)
                m->note[m->nnote++] = msg;
            break;
        }
    }
}

void drv_messages_free(DrvMsgs *m)
{
    free(m->buf);
    memset(m, 0, sizeof *m);
}

void drv_answer_json(const IrGraph *g, const PassCostCtx *c, const PassSearchAlt *a, const char *status,
                     int rc, const char *emit_name, const char *emit_text)
{
    DrvMsgs m;
    drv_messages(&m);
    rep_answer_print_json(stdout, g, c, a, status, rc, m.nerr ? m.err[0] : NULL, m.note, m.nnote,
                          emit_name, emit_text);
    drv_messages_free(&m);
    drv_answered = true;
}

void drv_error_json(int rc)
{
    DrvMsgs m;
    drv_messages(&m);
    printf("{\n  \"status\": \"error\",\n  \"exit_status\": %d,\n  \"error\": ", rc);
    rep_json_str(stdout, m.nerr ? m.err[0] : "ptdc failed without saying why");
    printf(",\n  \"diagnostics\": [");
    for (int i = 0; i < m.nlines; i++) {
        printf("%s\n    ", i ? "," : "");
        rep_json_str(stdout, m.line[i]);
    }
    printf("%s]\n}\n", m.nlines ? "\n  " : "");
    drv_messages_free(&m);
    drv_answered = true;
}
