/*
 * Router placement on the host's cores: icbc_bind.h.
 */
#include "icbc_bind.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <hwloc.h>

static hwloc_topology_t topology_load(void)
{
    hwloc_topology_t t;

    if (hwloc_topology_init(&t) != 0)
        return NULL;
    /* NICs and their PCI bridges, to know where a NIC is attached */
    hwloc_topology_set_io_types_filter(t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (hwloc_topology_load(t) != 0) {
        hwloc_topology_destroy(t);
        return NULL;
    }
    return t;
}

static void topology_text(hwloc_topology_t t, char *buf, size_t len)
{
    snprintf(buf, len, "%d package(s), %d NUMA node(s), %d core(s), %d PU(s)",
             hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE),
             hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE),
             hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE),
             hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
}

/* The first PU of the last core among the CPUs close to IFACE. */
static int auto_cpu(hwloc_topology_t t, const char *iface, char *why, size_t whylen)
{
    hwloc_const_cpuset_t near = hwloc_topology_get_topology_cpuset(t);
    hwloc_obj_t os = NULL, core;
    char list[64];
    int n;

    while (iface && (os = hwloc_get_next_osdev(t, os)) != NULL)
        if (os->name && strcmp(os->name, iface) == 0)
            break;
    if (os != NULL) {
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, os);
        if (anc && anc->cpuset && !hwloc_bitmap_iszero(anc->cpuset))
            near = anc->cpuset;
    }
    n = hwloc_get_nbobjs_inside_cpuset_by_type(t, near, HWLOC_OBJ_CORE);
    core = n > 0 ? hwloc_get_obj_inside_cpuset_by_type(t, near, HWLOC_OBJ_CORE, (unsigned) n - 1)
                 : NULL;
    if (core == NULL || hwloc_bitmap_iszero(core->cpuset)) {
        snprintf(why, whylen, "no core found");
        return -1;
    }
    hwloc_bitmap_list_snprintf(list, sizeof(list), near);
    if (os != NULL)
        snprintf(why, whylen, "auto: the last core near %s (CPUs %s)", iface, list);
    else
        snprintf(why, whylen,
                 "auto: %s has no place in the I/O topology (a virtual interface?): the last "
                 "core of the host (CPUs %s)",
                 iface ? iface : "no interface", list);
    return hwloc_bitmap_first(core->cpuset);
}

int icbc_bind_auto_cpu(const char *iface, char *why, size_t whylen)
{
    hwloc_topology_t t = topology_load();
    int cpu;

    if (t == NULL) {
        snprintf(why, whylen, "the topology could not be read");
        return -1;
    }
    cpu = auto_cpu(t, iface, why, whylen);
    hwloc_topology_destroy(t);
    return cpu;
}

/* SPEC as a set of CPUs of this host; "auto" and "none" are not lists. */
static icbc_status_t parse_list(hwloc_topology_t t, const char *spec, hwloc_bitmap_t set, char *err,
                                size_t errlen)
{
    char avail[64];

    for (const char *p = spec; *p; p++)
        if (!(*p >= '0' && *p <= '9') && *p != ',' && *p != '-') {
            snprintf(err, errlen, "'%s' is not auto, none or a CPU list such as 3 or 2-3,6", spec);
            return ICBC_ERR_INVALID;
        }
    if (spec[0] == '\0' || hwloc_bitmap_list_sscanf(set, spec) != 0 || hwloc_bitmap_iszero(set) ||
        hwloc_bitmap_weight(set) < 0) {
        snprintf(err, errlen, "'%s' is not auto, none or a CPU list such as 3 or 2-3,6", spec);
        return ICBC_ERR_INVALID;
    }
    if (t && !hwloc_bitmap_isincluded(set, hwloc_topology_get_allowed_cpuset(t))) {
        hwloc_bitmap_list_snprintf(avail, sizeof(avail), hwloc_topology_get_allowed_cpuset(t));
        snprintf(err, errlen, "CPU list '%s' names CPUs this host does not have (it has %s)", spec,
                 avail);
        return ICBC_ERR_INVALID;
    }
    return ICBC_OK;
}

icbc_status_t icbc_bind_check(const char *spec, char *err, size_t errlen)
{
    hwloc_bitmap_t set;
    icbc_status_t st;

    if (spec == NULL || strcmp(spec, "auto") == 0 || strcmp(spec, "none") == 0)
        return ICBC_OK;
    set = hwloc_bitmap_alloc();
    if (set == NULL)
        return ICBC_ERR_NO_MEMORY;
    st = parse_list(NULL, spec, set, err, errlen);
    hwloc_bitmap_free(set);
    return st;
}

icbc_status_t icbc_bind_apply(const char *spec, const char *iface, int thread, icbc_bind_t *out,
                              char *err, size_t errlen)
{
    hwloc_topology_t t;
    hwloc_bitmap_t set;
    icbc_status_t st = ICBC_OK;

    memset(out, 0, sizeof(*out));
    if (spec == NULL)
        spec = "none";
    t = topology_load();
    if (t == NULL) {
        snprintf(err, errlen, "hwloc could not read this host's topology");
        return ICBC_ERR_INVALID;
    }
    topology_text(t, out->topology, sizeof(out->topology));
    set = hwloc_bitmap_alloc();
    if (set == NULL) {
        hwloc_topology_destroy(t);
        return ICBC_ERR_NO_MEMORY;
    }
    if (strcmp(spec, "none") == 0) {
        snprintf(out->why, sizeof(out->why), "none: where the system puts it");
        goto done;
    }
    if (strcmp(spec, "auto") == 0) {
        int cpu = auto_cpu(t, iface, out->why, sizeof(out->why));
        if (cpu < 0) {
            snprintf(err, errlen, "--bind auto: %s", out->why);
            st = ICBC_ERR_INVALID;
            goto done;
        }
        hwloc_bitmap_only(set, (unsigned) cpu);
    } else {
        st = parse_list(t, spec, set, err, errlen);
        if (st != ICBC_OK)
            goto done;
        snprintf(out->why, sizeof(out->why), "the CPU list given");
    }
    if (hwloc_set_cpubind(t, set, thread ? HWLOC_CPUBIND_THREAD : HWLOC_CPUBIND_PROCESS) != 0) {
        snprintf(err, errlen, "binding to CPUs %s failed: %s", spec, strerror(errno));
        st = ICBC_ERR_INVALID;
        goto done;
    }
    out->bound = 1;
    hwloc_bitmap_list_snprintf(out->cpus, sizeof(out->cpus), set);
    /* with one NUMA node all memory is near: nothing to bind */
    if (hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE) > 1 &&
        hwloc_set_membind(t, set, HWLOC_MEMBIND_BIND,
                          thread ? HWLOC_MEMBIND_THREAD : HWLOC_MEMBIND_PROCESS) != 0) {
        size_t used = strlen(out->why);
        snprintf(out->why + used, sizeof(out->why) - used, "; memory not bound (%s)",
                 strerror(errno));
    }

done:
    hwloc_bitmap_free(set);
    hwloc_topology_destroy(t);
    return st;
}

void icbc_bind_where(char *buf, size_t len)
{
    hwloc_topology_t t = topology_load();
    hwloc_bitmap_t cur = hwloc_bitmap_alloc();

    snprintf(buf, len, "unknown");
    if (t && cur && hwloc_get_cpubind(t, cur, HWLOC_CPUBIND_PROCESS) == 0)
        hwloc_bitmap_list_snprintf(buf, len, cur);
    hwloc_bitmap_free(cur);
    if (t)
        hwloc_topology_destroy(t);
}

int icbc_bind_avoid(const char *spec, const char *iface, char *where, size_t len)
{
    hwloc_topology_t t;
    hwloc_bitmap_t cur, router;
    int moved = 0;
    char why[ICBC_BIND_TEXT];

    if (where && len)
        where[0] = '\0';
    if ((t = topology_load()) == NULL)
        return 0;
    cur = hwloc_bitmap_alloc();
    router = hwloc_bitmap_alloc();
    if (cur == NULL || router == NULL || hwloc_get_cpubind(t, cur, HWLOC_CPUBIND_PROCESS) != 0)
        goto out;
    if (spec && strcmp(spec, "auto") == 0) {
        int cpu = auto_cpu(t, iface, why, sizeof(why));
        if (cpu >= 0)
            hwloc_bitmap_only(router, (unsigned) cpu);
    } else if (spec && strcmp(spec, "none") != 0) {
        if (parse_list(t, spec, router, why, sizeof(why)) != ICBC_OK)
            hwloc_bitmap_zero(router);
    }
    /* bound by its user (or the launcher): that placement stands */
    if (!hwloc_bitmap_iszero(router) &&
        hwloc_bitmap_isequal(cur, hwloc_topology_get_allowed_cpuset(t))) {
        hwloc_bitmap_andnot(router, cur, router); /* what is left to the process */
        if (!hwloc_bitmap_iszero(router) &&
            hwloc_set_cpubind(t, router, HWLOC_CPUBIND_PROCESS) == 0) {
            moved = 1;
            hwloc_bitmap_copy(cur, router);
        }
    }
    if (where && len)
        hwloc_bitmap_list_snprintf(where, len, cur);
out:
    hwloc_bitmap_free(router);
    hwloc_bitmap_free(cur);
    hwloc_topology_destroy(t);
    return moved;
}
