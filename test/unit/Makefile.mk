# GoogleTest unit tests of libicbc and the tools' pure parts (make check).
if HAVE_GTEST
check_PROGRAMS += test/unit/icbc_unit_tests
TESTS += test/unit/icbc_unit_tests
test_unit_icbc_unit_tests_CPPFLAGS = -I$(top_srcdir)/src/icbc -DICBC_TEST_DATA_DIR='"$(abs_top_srcdir)/test/unit/data"'
test_unit_icbc_unit_tests_SOURCES = \
    test/unit/status_test.cc
test_unit_icbc_unit_tests_LDADD = libicbc.la -lgtest -lgtest_main -lpthread
test_unit_icbc_unit_tests_SOURCES += test/unit/routerfile_test.cc
test_unit_icbc_unit_tests_CPPFLAGS += -DICBC_ROUTERFILE_TOOL='"$(abs_top_builddir)/icbc-routerfile"'
endif
if HAVE_GTEST
test_unit_icbc_unit_tests_SOURCES += test/unit/bcard_test.cc test/unit/wire_test.cc test/unit/peer_test.cc test/unit/route_test.cc \
    test/unit/stripe_test.cc test/unit/seq_test.cc \
    test/unit/pace_test.cc test/unit/netprobe_test.cc test/unit/freelist_test.cc \
    test/unit/queue_test.cc
endif
if HAVE_GTEST
test_unit_icbc_unit_tests_SOURCES += test/unit/bt_lib_test.cc
test_unit_icbc_unit_tests_CPPFLAGS += -I$(top_srcdir)/src/bt_lib
test_unit_icbc_unit_tests_LDADD += $(CRYPTO_LIBS)
endif
if HAVE_GTEST
test_unit_icbc_unit_tests_SOURCES += test/unit/guard_test.cc
test_unit_icbc_unit_tests_CPPFLAGS += -I$(top_srcdir)/src/mx_router
endif
if HAVE_GTEST
# icbc-router's option table, and the manual's SYNOPSIS and OPTIONS held to it.
test_unit_icbc_unit_tests_SOURCES += test/unit/router_opts_test.cc
test_unit_icbc_unit_tests_CPPFLAGS += -I$(top_srcdir)/src/router $(UCX_CPPFLAGS) \
    -DICBC_DOCS_DIR='"$(abs_top_srcdir)/docs"'
endif
# The IMPI server's protocol and the impi-server daemon.
if HAVE_GTEST
test_unit_icbc_unit_tests_SOURCES += test/unit/impi_server_test.cc test/unit/impi_client_test.cc \
    test/unit/impi_p2p_test.cc test/unit/impi_coll_test.cc test/unit/impi_agent_test.cc \
    test/unit/impi_relay_test.cc \
    test/unit/impi_daemon.h \
    test/unit/impi_test_layout.h
test_unit_icbc_unit_tests_CPPFLAGS += -I$(top_srcdir)/src/impi \
    -DIMPI_SERVER_BIN='"$(abs_top_builddir)/impi-server"'
endif
if HAVE_GTEST
# The fabric transport on UCX and on libfabric.
test_unit_icbc_unit_tests_SOURCES += test/unit/fabric_test.cc
test_unit_icbc_unit_tests_SOURCES += test/unit/bind_test.cc
endif
