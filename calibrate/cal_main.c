/* cal_main.c: `ptdc calibrate`: launch ptdc-measure (mpirun, or srun under
 * Slurm) for each configuration a cluster file needs, fit, write the file.
 *
 *   ptdc calibrate [--target cpu|cuda] [--ranks N] [--gpu PRESET] [--quick]
 *                  [--records DIR] [--from DIR ...] [-o FILE]
 *
 * Configurations (CPU): the node full, one rank per core (the base rates);
 * one rank alone with every core (how much faster a rank with the node to
 * itself runs); the collectives on --ranks ranks; memory and host work.
 * CUDA: one rank per GPU for the compute rates, --ranks GPUs for the
 * collectives. docs/cost-model.md, "Calibrating a cluster". */
#define _GNU_SOURCE /* sched_getaffinity: cores() counts as run.sh's nproc does */
#include "calibrate.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct CalCli {
    const char *target, *gpu, *out, *records, *from[CAL_MAX_SETS];
    int ranks, quick, nfrom;
    double budget;                /* seconds per point (0: ptdc-measure's default) */
} CalCli;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: ptdc calibrate [options]\n"
            "\n"
            "Measure this machine through libptdrt (GEMMs, kernels, attention, collectives,\n"
            "memory) and write a cluster file for --cluster. Progress goes to stderr, a summary\n"
            "of what was fitted follows. On this node by default; launched under Slurm (srun)\n"
            "or with PTDC_MPIRUN_FLAGS naming a hostfile it also measures across nodes.\n"
            "\n"
            "  --target cpu|cuda   the backend to measure (default cpu)\n"
            "  --ranks N           ranks for the collectives (default: the node's cores on CPU,\n"
            "                      its GPUs on CUDA)\n"
            "  --gpu PRESET        the datasheet GPU the measurement refines (CUDA; default\n"
            "                      a100-80gb): its peak stays MFU's denominator\n"
            "  --quick             fewer points (about a quarter of the time)\n"
            "  --budget SECONDS    time per measured point (default 0.05)\n"
            "  --records DIR       keep the raw measurements in DIR\n"
            "  --from DIR          fit records kept earlier instead of measuring; given up\n"
            "                      to 16 times (sets of one configuration kept at different\n"
            "                      moments), fit each measured number's median over them\n"
            "  -o FILE             the cluster file to write (default calibrated.cluster)\n");
}

static bool parse(int argc, char **argv, CalCli *c)
{
    memset(c, 0, sizeof *c);
    c->target = "cpu";
    c->gpu = "a100-80gb";
    c->out = "calibrated.cluster";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            exit(0);
        } else if (!strcmp(a, "--quick")) {
            c->quick = 1;
        } else if (!v && (!strcmp(a, "--target") || !strcmp(a, "--ranks") || !strcmp(a, "--gpu") ||
                          !strcmp(a, "--budget") ||
                          !strcmp(a, "--records") || !strcmp(a, "--from") || !strcmp(a, "-o"))) {
            ir_error(IR_NOLOC, "calibrate: %s expects a value", a);
            return false;
        } else if (!strcmp(a, "--target")) {
            c->target = argv[++i];
            if (strcmp(c->target, "cpu") && strcmp(c->target, "cuda")) {
                ir_error(IR_NOLOC, "calibrate: --target expects cpu or cuda, got '%s'", c->target);
                return false;
            }
        } else if (!strcmp(a, "--ranks")) {
            char *e;
            long n = strtol(argv[++i], &e, 10);
            if (*e || n < 1 || n > 4096) {
                ir_error(IR_NOLOC, "calibrate: --ranks expects 1 to 4096, got '%s'", argv[i]);
                return false;
            }
            c->ranks = (int)n;
        } else if (!strcmp(a, "--budget")) {
            char *e;
            c->budget = strtod(argv[++i], &e);
            if (*e || !(c->budget > 0 && c->budget < 10)) {
                ir_error(IR_NOLOC, "calibrate: --budget expects seconds in (0, 10), got '%s'", argv[i]);
                return false;
            }
        } else if (!strcmp(a, "--gpu")) {
            c->gpu = argv[++i];
        } else if (!strcmp(a, "--records")) {
            c->records = argv[++i];
        } else if (!strcmp(a, "--from")) {
            if (c->nfrom == CAL_MAX_SETS) {
                ir_error(IR_NOLOC, "calibrate: --from given more than %d times", CAL_MAX_SETS);
                return false;
            }
            c->from[c->nfrom++] = argv[++i];
        } else if (!strcmp(a, "-o")) {
            c->out = argv[++i];
        } else {
            ir_error(IR_NOLOC, "calibrate: unknown option '%s' (see ptdc calibrate --help)", a);
            return false;
        }
    }
    return true;
}

static char *slurp(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0;
    char *buf = ir_xmalloc(cap);
    for (size_t r; (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (n + 1 == cap)
            buf = ir_xrealloc(buf, cap *= 2);
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

/* CPUs this process may run on (its affinity mask), as nproc counts them in
 * a generated program's run.sh, so ranks are placed the same way. */
static int cores(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Does the CUDA measuring program find no GPU here (its exit status 3)? */
static bool run_no_device(const char *bin)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s --help >/dev/null 2>&1", bin);
    int st = system(cmd);
    return st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 3;
}

/* Run ptdc-measure on `ranks` ranks, placed as a generated program's run.sh
 * places them (codegen/cg_emit.c): each rank bound to cpus / ranks CPUs,
 * on which the runtime runs as many threads; more ranks than CPUs share
 * them unbound. Returns its records (heap), or NULL after a message. */
static char *run_measure(const CalCli *c, const char *part, int ranks)
{
    const char *bin = !strcmp(c->target, "cuda") ? PTDC_MEASURE_CUDA : PTDC_MEASURE_CPU;
    if (access(bin, X_OK) != 0) {
        ir_error(IR_NOLOC, "calibrate: the %s measuring program '%s' is not built%s", c->target, bin,
                 !strcmp(c->target, "cuda") ? " (the CUDA toolkit was not found at configure time)" : "");
        return NULL;
    }
    if (!strcmp(c->target, "cuda") && run_no_device(bin)) {
        ir_error(IR_NOLOC, "calibrate: --target cuda needs a GPU, and this machine has none "
                           "(ptdc-measure-cuda is built: run this where the GPUs are)");
        return NULL;
    }
    char cmd[4096], opts[128], bind[128];
    snprintf(opts, sizeof opts, "--part %s%s", part, c->quick ? " --quick" : "");
    if (c->budget > 0)
        snprintf(opts + strlen(opts), sizeof opts - strlen(opts), " --budget %g", c->budget);
    int cpus = cores();
    if (cpus >= ranks)
        snprintf(bind, sizeof bind, "--use-hwthread-cpus --map-by slot:PE=%d --bind-to hwthread",
                 cpus / ranks);
    else
        snprintf(bind, sizeof bind, "--oversubscribe --bind-to none");
    const char *flags = getenv("PTDC_MPIRUN_FLAGS");
    if (getenv("SLURM_JOB_ID"))
        snprintf(cmd, sizeof cmd, "srun --ntasks=%d %s %s", ranks, bin, opts);
    else
        snprintf(cmd, sizeof cmd, "%s %s -np %d %s %s", PTDC_MEASURE_MPIRUN, flags ? flags : bind,
                 ranks, bin, opts);
    fflush(stderr);
    FILE *p = popen(cmd, "r");
    if (!p) {
        ir_error(IR_NOLOC, "calibrate: cannot start '%s': %s", cmd, strerror(errno));
        return NULL;
    }
    size_t len;
    char *out = slurp(p, &len);
    int st = pclose(p);
    if (st != 0) {
        ir_error(IR_NOLOC, "calibrate: '%s' failed (%s %d)", cmd,
                 WIFEXITED(st) ? "exit status" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
        free(out);
        return NULL;
    }
    return out;
}

static bool save_records(const char *dir, const char *name, const char *text)
{
    if (!ir_mkdirs(dir))
        return false;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.records", dir, name);
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        ir_error(IR_NOLOC, "calibrate: cannot write '%s': %s", path, strerror(errno));
        return false;
    }
    return true;
}

static char *load_records(const char *dir, const char *name, bool required)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.records", dir, name);
    FILE *f = fopen(path, "r");
    if (!f) {
        if (required)
            ir_error(IR_NOLOC, "calibrate: cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    size_t len;
    char *t = slurp(f, &len);
    fclose(f);
    return t;
}

/* Part `name` of every --from set, merged when there are several (the
 * part in all sets or none). False after a message. */
static bool load_parts(const CalCli *c, const char *name, bool required, char **out)
{
    char *t[CAL_MAX_SETS];
    int have = 0;
    for (int s = 0; s < c->nfrom; s++)
        have += (t[s] = load_records(c->from[s], name, required)) != NULL;
    bool ok = have == c->nfrom || (have == 0 && !required);
    if (!ok && (have || !required))
        ir_error(IR_NOLOC, "calibrate: %s.records is in %d of the %d --from directories: sets of "
                 "different runs cannot be merged", name, have, c->nfrom);
    *out = NULL;
    if (ok && have == 1)
        *out = t[0], t[0] = NULL;
    else if (ok && have > 1)
        ok = (*out = cal_records_merge(name, t, have)) != NULL;
    for (int s = 0; s < c->nfrom; s++)
        free(t[s]);
    return ok;
}

/* GPUs the CUDA measuring program sees on this node (1 if it cannot say). */
static int gpus(void)
{
    FILE *p = popen(PTDC_MEASURE_CUDA " --devices 2>/dev/null", "r");
    int n = 0;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = 0;
        pclose(p);
    }
    return n > 0 ? n : 1;
}


int cal_main(int argc, char **argv)
{
    CalCli c;
    if (!parse(argc, argv, &c))
        return 1;
    enum { FULL, SOLO, COMM, COMM2, MEMORY, NPARTS };
    static const char *const parts[NPARTS] = {"full", "solo", "comm", "comm-shared", "memory"};
    char *text[NPARTS] = {0};
    bool cpu = !strcmp(c.target, "cpu");
    int ncores = cores();
    int ranks = c.ranks ? c.ranks : cpu ? ncores : gpus();
    int rc = 1;
    if (c.nfrom) {
        for (int i = 0; i < NPARTS; i++)
            if (!load_parts(&c, parts[i], i == FULL, &text[i]))
                goto out;
    } else {
        fprintf(stderr, "calibrate: %s backend, %d core%s; %s\n", c.target, ncores,
                ncores == 1 ? "" : "s", c.quick ? "quick run" : "full run");
        /* Ranks are placed and threaded as run.sh places a program's: the
         * node full is one rank per core (one thread each) or per GPU; one
         * rank alone has every core. */
        int full = cpu ? ncores : (ranks < gpus() ? ranks : gpus());
        int nsteps = 3 + (cpu && ncores > 1) + (cpu && ranks > 1);
        int k = 0;
        fprintf(stderr, "calibrate: [%d/%d] compute, %d rank%s at once\n", ++k, nsteps, full,
                full == 1 ? "" : "s");
        if (!(text[FULL] = run_measure(&c, "compute", full)))
            goto out;
        if (cpu && ncores > 1) {
            fprintf(stderr, "calibrate: [%d/%d] compute, one rank with %d cores\n", ++k, nsteps, ncores);
            if (!(text[SOLO] = run_measure(&c, "compute", 1)))
                goto out;
        }
        if (ranks > 1) {
            fprintf(stderr, "calibrate: [%d/%d] collectives on %d ranks\n", ++k, nsteps, ranks);
            if (!(text[COMM] = run_measure(&c, "comm", ranks)))
                goto out;
        }
        if (cpu && ranks > 1) {
            /* Plans may put more ranks than cores on a node; their
             * collectives then wait for ranks the scheduler runs in turns. */
            fprintf(stderr, "calibrate: [%d/%d] collectives on %d ranks sharing %d cores\n", ++k,
                    nsteps, 2 * ranks, ncores);
            if (!(text[COMM2] = run_measure(&c, "comm", 2 * ranks)))
                goto out;
        }
        fprintf(stderr, "calibrate: [%d/%d] memory and host work\n", ++k, nsteps);
        if (!(text[MEMORY] = run_measure(&c, "memory", ranks > 1 ? 2 : 1)))
            goto out;
        if (c.records)
            for (int i = 0; i < NPARTS; i++)
                if (text[i] && !save_records(c.records, parts[i], text[i]))
                    goto out;
    }
    {
        CalRecords rec[NPARTS];
        memset(rec, 0, sizeof rec);
        bool ok = true;
        for (int i = 0; i < NPARTS && ok; i++)
            if (text[i])
                ok = cal_records_parse(parts[i], text[i], &rec[i]);
        PassCluster cl;
        memset(&cl, 0, sizeof cl);
        if (ok && !pass_gpu_preset(cpu ? "a100-80gb" : c.gpu, &cl.gpu)) {
            ir_error(IR_NOLOC, "calibrate: --gpu: unknown GPU '%s' (presets: %s)", c.gpu,
                     pass_gpu_preset_names());
            ok = false;
        }
        CalInput in = {&rec[FULL], text[SOLO] ? &rec[SOLO] : NULL,
                       {text[COMM] ? &rec[COMM] : NULL, text[COMM2] ? &rec[COMM2] : NULL},
                       text[MEMORY] ? &rec[MEMORY] : NULL, cpu ? ncores : 0};
        if (c.nfrom && cpu && rec[FULL].ranks > 0)
            in.cores = rec[FULL].ranks; /* the full configuration ran one rank per core */
        CalReport rep;
        if (ok)
            ok = cal_fit(&in, &cl, &rep);
        if (ok) {
            if (cpu) {
                cl.gpu.hbm_bytes = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
                cl.nodes = rec[COMM].nodes > 0 ? rec[COMM].nodes : 1;
            }
            char *buf;
            size_t len;
            FILE *m = open_memstream(&buf, &len);
            fprintf(m, "# %s: measured by `ptdc calibrate --target %s%s` on %s\n", c.out, c.target,
                    c.quick ? " --quick" : "", rec[FULL].host);
            fprintf(m, "# (format: docs/cost-model.md, \"Cluster file\")\n");
            pass_cluster_print(m, &cl);
            fclose(m);
            char tmp[4096];
            snprintf(tmp, sizeof tmp, "%s.tmp.%ld", c.out, (long)getpid());
            FILE *f = fopen(tmp, "w");
            if (!f || fwrite(buf, 1, len, f) != len || fclose(f) != 0 || rename(tmp, c.out) != 0) {
                ir_error(IR_NOLOC, "calibrate: cannot write '%s': %s", c.out, strerror(errno));
                unlink(tmp);
                ok = false;
            }
            free(buf);
        }
        if (ok) {
            cal_print_summary(stderr, &in, &cl, &rep);
            fprintf(stderr, "calibrate: wrote %s (plan with: ptdc MODEL --cluster %s --gpus N%s)\n",
                    c.out, c.out, cpu ? " --target cpu" : "");
            rc = 0;
        }
        for (int i = 0; i < NPARTS; i++)
            cal_records_free(&rec[i]);
    }
out:
    for (int i = 0; i < NPARTS; i++)
        free(text[i]);
    return rc;
}
