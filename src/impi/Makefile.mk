# IMPI: wire formats, the start-up server's protocol and the client's start-up
# (part of libicbc), and the impi-server daemon (docs/impi.md).
libicbc_la_CPPFLAGS += -I$(top_srcdir)/src/impi
libicbc_la_SOURCES += \
    src/impi/proto.c \
    src/impi/server.c \
    src/impi/daemon.c \
    src/impi/layout.c \
    src/impi/client.c \
    src/impi/hostconn.c \
    src/impi/rx.c \
    src/impi/p2p.c \
    src/impi/agent.c \
    src/impi/coll.c \
    src/impi/relay_startup.c \
    src/impi/relay_link.c \
    src/impi/relay_fwd.c \
    src/impi/relay.c \
    src/impi/relay_impl.h \
    src/impi/impi_relay_link.h
include_icbc_HEADERS += src/impi/impi_proto.h src/impi/impi_server.h src/impi/impi_client.h \
    src/impi/impi_hostconn.h src/impi/impi_rx.h src/impi/impi_p2p.h src/impi/impi_coll.h \
    src/impi/impi_agent.h src/impi/impi_relay.h

bin_PROGRAMS += impi-server
impi_server_SOURCES = src/impi/server_main.c src/impi/cli.c src/impi/impi_cli.h
impi_server_CPPFLAGS = -I$(top_srcdir)/src/icbc -I$(top_srcdir)/src/impi
impi_server_LDADD = libicbc.la

bin_PROGRAMS += impi-relay
impi_relay_SOURCES = src/impi/relay_main.c src/impi/cli.c src/impi/impi_cli.h
impi_relay_CPPFLAGS = -I$(top_srcdir)/src/icbc -I$(top_srcdir)/src/impi
impi_relay_LDADD = libicbc.la
