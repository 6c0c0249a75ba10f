# bt_lib: framed, authenticated TCP for router trunks and direct TCP paths
# (docs/bt_lib.md). Part of libicbc.
libicbc_la_CPPFLAGS += -I$(top_srcdir)/src/bt_lib
libicbc_la_SOURCES += \
    src/bt_lib/opts.c \
    src/bt_lib/sockopt.c \
    src/bt_lib/frame.c \
    src/bt_lib/poller.c \
    src/bt_lib/conn.c \
    src/bt_lib/send.c \
    src/bt_lib/recv.c \
    src/bt_lib/auth.c \
    src/bt_lib/listen.c
include_icbc_HEADERS += src/bt_lib/bt_lib.h
libicbc_la_SOURCES += src/bt_lib/bt_impl.h
