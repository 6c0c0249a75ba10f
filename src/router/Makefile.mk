# Router core (library, also runs as a thread) and the icbc-router daemon
# (docs/router.md).
libicbc_la_CPPFLAGS += -I$(top_srcdir)/src/router
libicbc_la_SOURCES += \
    src/router/router.c \
    src/router/fabric.c \
    src/router/rt_admit.h \
    src/router/trunk.c \
    src/router/forward.c \
    src/router/router_opts.c \
    src/router/router_int.h
include_icbc_HEADERS += src/router/router.h src/router/router_opts.h

bin_PROGRAMS += icbc-router
icbc_router_SOURCES = src/router/router_main.c src/router/router_relay.c \
    src/router/router_relay.h
icbc_router_CPPFLAGS = -I$(top_srcdir)/src/icbc -I$(top_srcdir)/src/router \
    -I$(top_srcdir)/src/impi
icbc_router_LDADD = libicbc.la

# Two routers in two "clusters" on 127.0.0.1 with clients over mx_client.
if HAVE_GTEST
check_PROGRAMS += test/router/icbc_router_tests
TESTS += test/router/icbc_router_tests
test_router_icbc_router_tests_CPPFLAGS = -I$(top_srcdir)/src/icbc -I$(top_srcdir)/src/router \
    -I$(top_srcdir)/src/mx_router -I$(top_srcdir)/src/bt_lib $(UCX_CPPFLAGS) \
    -DICBC_ROUTER_BIN='"$(abs_top_builddir)/icbc-router"'
test_router_icbc_router_tests_SOURCES = test/router/router_test.cc
test_router_icbc_router_tests_LDADD = libicbc.la $(UCX_LIBS) -lgtest -lgtest_main -lpthread
endif
# The same tests with routers and processes on libfabric.
if HAVE_GTEST
if HAVE_OFI
TESTS += test/router/ofi.sh
endif
endif
EXTRA_DIST += test/router/ofi.sh
