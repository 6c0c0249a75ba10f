/*
 * libfabric, opened when the first fabric of that API is created rather
 * than linked: linking it loads its providers' libraries into every
 * process that links libicbc, and Debian's libfabric links PSM, whose
 * library (libinfinipath) sleeps about 0.2 s in its constructor. Every
 * rank, router and test program paid that at start, with or without
 * libfabric. The backend calls five functions of the library itself;
 * the rest of libfabric's API reaches the provider through the objects'
 * operation tables (inline functions of its headers), no symbol needed.
 */
#ifndef ICBC_OFI_LIB_H
#define ICBC_OFI_LIB_H

#include <stddef.h>
#include <stdint.h>

#include <rdma/fabric.h>

#include "icbc_status.h"

typedef struct ofi_lib {
    int (*getinfo)(uint32_t version, const char *node, const char *service, uint64_t flags,
                   const struct fi_info *hints, struct fi_info **info);
    void (*freeinfo)(struct fi_info *info);
    struct fi_info *(*dupinfo)(const struct fi_info *info);
    int (*fabric)(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
    const char *(*strerror)(int errnum);
} ofi_lib_t;

/* The library's functions, valid once ofi_lib_open succeeded. */
extern ofi_lib_t ofi_lib;

/* Opens the library once per process (later calls give the first call's
 * result); on failure ERR says which file or symbol was missing. */
icbc_status_t ofi_lib_open(char *err, size_t errlen);

#endif
