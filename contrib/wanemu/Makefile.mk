# contrib/wanemu: icbc-wanemu, the user-space WAN emulator of the testbed, and its plot script.
bin_PROGRAMS += icbc-wanemu
icbc_wanemu_CPPFLAGS = -I$(top_srcdir)/src/icbc
icbc_wanemu_SOURCES = \
    contrib/wanemu/wanemu.h \
    contrib/wanemu/units.c \
    contrib/wanemu/frame.c \
    contrib/wanemu/link.c \
    contrib/wanemu/port.c \
    contrib/wanemu/trace.c \
    contrib/wanemu/main.c
icbc_wanemu_LDADD = libicbc.la -lm

bin_SCRIPTS += contrib/wanemu/icbc-wanemu-plot
EXTRA_DIST += contrib/wanemu/icbc-wanemu-plot

# Unit tests of the parsers, the link model and the trace (no network, no root).
check_PROGRAMS += contrib/wanemu/wanemu_test
TESTS += contrib/wanemu/wanemu_test
contrib_wanemu_wanemu_test_CPPFLAGS = -I$(top_srcdir)/src/icbc
contrib_wanemu_wanemu_test_SOURCES = \
    contrib/wanemu/wanemu_test.c \
    contrib/wanemu/units.c \
    contrib/wanemu/frame.c \
    contrib/wanemu/link.c \
    contrib/wanemu/trace.c
contrib_wanemu_wanemu_test_LDADD = libicbc.la -lm
