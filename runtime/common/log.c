/* log.c: rt_log, one whole line on stderr per call (rtc_write_line). */
#include <stdio.h>

#include "common.h"

void rt_log(const char *fmt, ...)
{
    char prefix[32] = "";
    if (rt_world_size() > 1)
        snprintf(prefix, sizeof prefix, "[rank %d] ", rt_world_rank());
    fflush(stdout); /* what the program printed before comes first */
    va_list ap;
    va_start(ap, fmt);
    rtc_vwrite_line(2, prefix, fmt, ap);
    va_end(ap);
}
