# mx_router: the fabric transport (mx_fabric: UCX and libfabric) and, on it,
# the transport of routed messages, router half (mx_server)
# and compute-process half (mx_client). Part of libicbc.
libicbc_la_CPPFLAGS += -I$(top_srcdir)/src/mx_router $(UCX_CPPFLAGS) $(OFI_CPPFLAGS)
libicbc_la_LDFLAGS = $(UCX_LDFLAGS)
libicbc_la_LIBADD += $(UCX_LIBS) $(OFI_LIBS)
libicbc_la_SOURCES += \
    src/mx_router/mx_fabric.c \
    src/mx_router/mx_fabric_ucx.c \
    src/mx_router/mx_guard.c \
    src/mx_router/mx_server.c \
    src/mx_router/mx_client.c
if HAVE_OFI
libicbc_la_SOURCES += src/mx_router/mx_fabric_ofi.c src/mx_router/ofi_lib.c
endif
noinst_HEADERS += src/mx_router/mx_fabric_impl.h src/mx_router/ofi_lib.h
include_icbc_HEADERS += \
    src/mx_router/mx_fabric.h \
    src/mx_router/mx_router.h \
    src/mx_router/mx_client.h \
    src/mx_router/mx_server.h \
    src/mx_router/mx_guard.h \
    src/mx_router/mx_ucx.h
