/*
 * libfabric opened at run time (ofi_lib.h says why).
 */
#include "ofi_lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#ifndef OFI_LIB_SONAME
/* the soname of the ABI the headers describe (FI_MAJOR_VERSION 1) */
#define OFI_LIB_SONAME "libfabric.so.1"
#endif

ofi_lib_t ofi_lib;

static pthread_once_t ofi_lib_once = PTHREAD_ONCE_INIT;
static icbc_status_t ofi_lib_status;
static char ofi_lib_why[256];

static void *ofi_lib_sym(void *lib, const char *name)
{
    void *fn = dlsym(lib, name);

    if (fn == NULL && ofi_lib_status == ICBC_OK) {
        snprintf(ofi_lib_why, sizeof(ofi_lib_why), "%s has no %s", OFI_LIB_SONAME, name);
        ofi_lib_status = ICBC_ERR_UNREACHABLE;
    }
    return fn;
}

static void ofi_lib_load(void)
{
    /* never closed: the providers it loads keep threads and handlers */
    void *lib = dlopen(OFI_LIB_SONAME, RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL) {
        const char *e = dlerror();
        snprintf(ofi_lib_why, sizeof(ofi_lib_why), "%s", e ? e : OFI_LIB_SONAME ": not found");
        ofi_lib_status = ICBC_ERR_UNREACHABLE;
        return;
    }
    *(void **) &ofi_lib.getinfo = ofi_lib_sym(lib, "fi_getinfo");
    *(void **) &ofi_lib.freeinfo = ofi_lib_sym(lib, "fi_freeinfo");
    *(void **) &ofi_lib.dupinfo = ofi_lib_sym(lib, "fi_dupinfo");
    *(void **) &ofi_lib.fabric = ofi_lib_sym(lib, "fi_fabric");
    *(void **) &ofi_lib.strerror = ofi_lib_sym(lib, "fi_strerror");
}

icbc_status_t ofi_lib_open(char *err, size_t errlen)
{
    pthread_once(&ofi_lib_once, ofi_lib_load);
    if (ofi_lib_status != ICBC_OK)
        return icbc_err(ofi_lib_status, err, errlen, "fabric: libfabric: %s", ofi_lib_why);
    return ICBC_OK;
}
