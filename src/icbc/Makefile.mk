# libicbc: MPI-independent core (topology, router file, peer table, wire formats).
lib_LTLIBRARIES += libicbc.la
libicbc_la_CPPFLAGS = -I$(top_srcdir)/src/icbc
libicbc_la_SOURCES = \
    src/icbc/status.c \
    src/icbc/log.c
libicbc_la_LIBADD = $(CRYPTO_LIBS)
include_icbcdir = $(includedir)/icbc
include_icbc_HEADERS = \
    src/icbc/icbc_status.h \
    src/icbc/icbc_log.h
# Router file parser and its checker tool (docs/routerfile.md).
libicbc_la_SOURCES += src/icbc/routerfile.c
include_icbc_HEADERS += src/icbc/icbc_routerfile.h
bin_PROGRAMS += icbc-routerfile
icbc_routerfile_SOURCES = src/icbc/routerfile_tool.c
icbc_routerfile_CPPFLAGS = -I$(top_srcdir)/src/icbc
icbc_routerfile_LDADD = libicbc.la
# Business cards, peer table and wire header (also compiled into libmpi by the netmod).
libicbc_la_SOURCES += src/icbc/bcard.c src/icbc/peer.c src/icbc/wire.c
include_icbc_HEADERS += src/icbc/icbc_bcard.h src/icbc/icbc_peer.h src/icbc/icbc_wire.h

# Route header of routed and TCP messages, router registration proof.
libicbc_la_SOURCES += src/icbc/route.c
include_icbc_HEADERS += src/icbc/icbc_route.h src/icbc/icbc_bytes.h

# Network interfaces: the fabric device UCX is opened on (docs/router.md, SECURITY).
libicbc_la_SOURCES += src/icbc/netif.c src/icbc/netprobe.c
include_icbc_HEADERS += src/icbc/icbc_netif.h src/icbc/icbc_netprobe.h

# Striping engine: send and slot tables, chunks, accounting, stalls (docs/paths.md).
libicbc_la_SOURCES += src/icbc/stripe.c
include_icbc_HEADERS += src/icbc/icbc_stripe.h src/icbc/icbc_clock.h

# The one list, FIFO queue and hash map, and the free list of libicbc, the routers and the
# transports.
libicbc_la_SOURCES += src/icbc/hmap.c
include_icbc_HEADERS += src/icbc/icbc_list.h src/icbc/icbc_queue.h src/icbc/icbc_hmap.h \
    src/icbc/icbc_freelist.h

# Numbered ordered lanes: kept until acknowledged, delivered once in order (failover).
libicbc_la_SOURCES += src/icbc/seq.c
include_icbc_HEADERS += src/icbc/icbc_seq.h

# Pacing: a process's inter-cluster sending held to a rate (MATB).
libicbc_la_SOURCES += src/icbc/pace.c
include_icbc_HEADERS += src/icbc/icbc_pace.h

# Router placement on cores from the host's topology (hwloc).
libicbc_la_SOURCES += src/icbc/bind.c
include_icbc_HEADERS += src/icbc/icbc_bind.h
libicbc_la_LIBADD += $(HWLOC_LIBS)
