# libFuzzer targets of the parsers of outside bytes (docs/fuzzing.md).
# libicbc is built with $(CC); each target instead compiles the few sources
# it needs with clang and -fsanitize=fuzzer,address,undefined, so plain
# rules rather than automake programs. `make fuzz` builds them, `make
# fuzz-smoke` runs each for FUZZ_SECONDS (test/fuzz/run.sh).
FUZZ_TARGETS = \
    test/fuzz/routerfile_fuzz \
    test/fuzz/route_hdr_fuzz \
    test/fuzz/am_hdr_fuzz \
    test/fuzz/bcard_fuzz \
    test/fuzz/bt_frame_fuzz \
    test/fuzz/bt_stream_fuzz \
    test/fuzz/impi_server_fuzz \
    test/fuzz/impi_pkt_fuzz \
    test/fuzz/impi_layout_fuzz \
    test/fuzz/router_admit_fuzz \
    test/fuzz/impi_hostconn_fuzz \
    test/fuzz/impi_rx_fuzz \
    test/fuzz/impi_p2p_fuzz \
    test/fuzz/impi_frames_fuzz \
    test/fuzz/impi_relay_fuzz \
    test/fuzz/impi_relay_link_fuzz
FUZZ_SECONDS = 20
FUZZ_FLAGS = -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -fno-omit-frame-pointer -Wall -Wextra -Wno-unused-parameter
FUZZ_CPPFLAGS = -I$(top_srcdir)/src/icbc -I$(top_srcdir)/src/bt_lib -I$(top_srcdir)/src/impi \
    -I$(top_srcdir)/src/router \
    -I$(top_srcdir)/test/fuzz
# bt_lib whole (its poller needs the rest), for the targets that run on it
FUZZ_BT_LIB = $(top_srcdir)/src/bt_lib/opts.c $(top_srcdir)/src/bt_lib/sockopt.c \
    $(top_srcdir)/src/bt_lib/frame.c $(top_srcdir)/src/bt_lib/poller.c \
    $(top_srcdir)/src/bt_lib/conn.c $(top_srcdir)/src/bt_lib/send.c \
    $(top_srcdir)/src/bt_lib/recv.c $(top_srcdir)/src/bt_lib/auth.c \
    $(top_srcdir)/src/bt_lib/listen.c $(top_srcdir)/src/icbc/log.c
FUZZ_HDRS = $(top_srcdir)/test/fuzz/fuzz_check.h $(top_srcdir)/src/icbc/icbc_status.h
FUZZ_LINK = $(AM_V_CCLD)$(MKDIR_P) test/fuzz && \
    $(CLANG) $(FUZZ_FLAGS) $(FUZZ_CPPFLAGS) -o $@ $(filter %.c,$^) $(CRYPTO_LIBS)

EXTRA_DIST += \
    test/fuzz/run.sh \
    test/fuzz/fuzz_check.h \
    test/fuzz/gen_seeds.c \
    test/fuzz/routerfile_fuzz.c \
    test/fuzz/routerfile_fuzz.dict \
    test/fuzz/route_hdr_fuzz.c \
    test/fuzz/am_hdr_fuzz.c \
    test/fuzz/bcard_fuzz.c \
    test/fuzz/bt_frame_fuzz.c \
    test/fuzz/bt_stream_fuzz.c \
    test/fuzz/impi_server_fuzz.c \
    test/fuzz/impi_pkt_fuzz.c \
    test/fuzz/impi_layout_fuzz.c \
    test/fuzz/router_admit_fuzz.c \
    test/fuzz/impi_hostconn_fuzz.c \
    test/fuzz/impi_rx_fuzz.c \
    test/fuzz/impi_p2p_fuzz.c \
    test/fuzz/impi_frames_fuzz.c \
    test/fuzz/impi_relay_fuzz.c \
    test/fuzz/impi_relay_link_fuzz.c \
    test/fuzz/impi_fuzz_layout.h \
    test/fuzz/corpus
CLEANFILES += $(FUZZ_TARGETS) test/fuzz/gen_seeds

.PHONY: fuzz fuzz-smoke fuzz-seeds

if HAVE_LIBFUZZER
fuzz: $(FUZZ_TARGETS)

fuzz-smoke: fuzz
	@$(SHELL) $(top_srcdir)/test/fuzz/run.sh --build $(abs_top_builddir) \
	    --seconds $(FUZZ_SECONDS) --no-build --label 'fuzz: '

test/fuzz/routerfile_fuzz: $(top_srcdir)/test/fuzz/routerfile_fuzz.c \
    $(top_srcdir)/src/icbc/routerfile.c $(top_srcdir)/src/icbc/log.c \
    $(top_srcdir)/src/icbc/pace.c $(top_srcdir)/src/icbc/icbc_pace.h \
    $(top_srcdir)/src/icbc/status.c $(top_srcdir)/src/icbc/icbc_routerfile.h \
    $(top_srcdir)/src/icbc/bind.c $(top_srcdir)/src/icbc/icbc_bind.h \
    $(top_srcdir)/src/icbc/icbc_log.h $(FUZZ_HDRS)
	$(FUZZ_LINK) $(HWLOC_LIBS)

test/fuzz/route_hdr_fuzz: $(top_srcdir)/test/fuzz/route_hdr_fuzz.c \
    $(top_srcdir)/src/icbc/route.c $(top_srcdir)/src/icbc/icbc_route.h \
    $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)

test/fuzz/am_hdr_fuzz: $(top_srcdir)/test/fuzz/am_hdr_fuzz.c \
    $(top_srcdir)/src/icbc/wire.c $(top_srcdir)/src/icbc/icbc_wire.h \
    $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)

test/fuzz/bcard_fuzz: $(top_srcdir)/test/fuzz/bcard_fuzz.c \
    $(top_srcdir)/src/icbc/bcard.c $(top_srcdir)/src/icbc/icbc_bcard.h \
    $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)

test/fuzz/bt_frame_fuzz: $(top_srcdir)/test/fuzz/bt_frame_fuzz.c \
    $(top_srcdir)/src/bt_lib/frame.c $(top_srcdir)/src/bt_lib/bt_lib.h \
    $(top_srcdir)/src/bt_lib/bt_impl.h $(FUZZ_HDRS)
	$(FUZZ_LINK)

test/fuzz/bt_stream_fuzz: $(top_srcdir)/test/fuzz/bt_stream_fuzz.c \
    $(FUZZ_BT_LIB) \
    $(top_srcdir)/src/icbc/status.c $(top_srcdir)/src/bt_lib/bt_lib.h \
    $(top_srcdir)/src/bt_lib/bt_impl.h $(FUZZ_HDRS)
	$(FUZZ_LINK)

test/fuzz/impi_server_fuzz: $(top_srcdir)/test/fuzz/impi_server_fuzz.c \
    $(top_srcdir)/src/icbc/status.c \
    $(top_srcdir)/src/impi/server.c $(top_srcdir)/src/impi/proto.c \
    $(top_srcdir)/src/impi/impi_server.h $(top_srcdir)/src/impi/impi_proto.h \
    $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)

test/fuzz/impi_pkt_fuzz: $(top_srcdir)/test/fuzz/impi_pkt_fuzz.c \
    $(top_srcdir)/src/icbc/status.c \
    $(top_srcdir)/src/impi/proto.c $(top_srcdir)/src/impi/impi_proto.h \
    $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/impi_layout_fuzz: $(top_srcdir)/test/fuzz/impi_layout_fuzz.c \
    $(top_srcdir)/src/icbc/status.c \
    $(top_srcdir)/src/impi/layout.c $(top_srcdir)/src/impi/impi_client.h \
    $(top_srcdir)/src/impi/impi_proto.h $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/router_admit_fuzz: $(top_srcdir)/test/fuzz/router_admit_fuzz.c \
    $(top_srcdir)/src/router/rt_admit.h $(top_srcdir)/src/icbc/route.c \
    $(top_srcdir)/src/icbc/icbc_route.h $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/impi_hostconn_fuzz: $(top_srcdir)/test/fuzz/impi_hostconn_fuzz.c \
    $(top_srcdir)/src/icbc/status.c \
    $(top_srcdir)/test/fuzz/impi_fuzz_layout.h \
    $(top_srcdir)/src/impi/hostconn.c $(top_srcdir)/src/impi/layout.c \
    $(top_srcdir)/src/impi/impi_hostconn.h $(top_srcdir)/src/impi/impi_client.h \
    $(top_srcdir)/src/impi/impi_proto.h $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/impi_rx_fuzz: $(top_srcdir)/test/fuzz/impi_rx_fuzz.c \
    $(top_srcdir)/src/icbc/status.c \
    $(top_srcdir)/test/fuzz/impi_fuzz_layout.h $(top_srcdir)/src/impi/rx.c \
    $(top_srcdir)/src/impi/layout.c $(top_srcdir)/src/impi/proto.c \
    $(top_srcdir)/src/impi/impi_rx.h $(top_srcdir)/src/impi/impi_client.h \
    $(top_srcdir)/src/impi/impi_proto.h $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/impi_relay_fuzz: $(top_srcdir)/test/fuzz/impi_relay_fuzz.c \
    $(top_srcdir)/src/icbc/status.c $(top_srcdir)/src/impi/relay_startup.c \
    $(top_srcdir)/src/impi/rx.c $(top_srcdir)/src/impi/layout.c $(top_srcdir)/src/impi/proto.c \
    $(top_srcdir)/src/impi/impi_relay.h $(top_srcdir)/src/impi/impi_rx.h \
    $(top_srcdir)/src/impi/impi_client.h $(top_srcdir)/src/impi/impi_proto.h \
    $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/impi_relay_link_fuzz: $(top_srcdir)/test/fuzz/impi_relay_link_fuzz.c \
    $(top_srcdir)/src/icbc/status.c $(top_srcdir)/src/impi/relay_link.c \
    $(top_srcdir)/src/impi/impi_relay_link.h $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/impi_p2p_fuzz: $(top_srcdir)/test/fuzz/impi_p2p_fuzz.c \
    $(top_srcdir)/src/icbc/status.c \
    $(top_srcdir)/test/fuzz/impi_fuzz_layout.h $(top_srcdir)/src/impi/rx.c \
    $(top_srcdir)/src/impi/p2p.c $(top_srcdir)/src/impi/impi_p2p.h \
    $(top_srcdir)/src/impi/layout.c $(top_srcdir)/src/impi/proto.c \
    $(top_srcdir)/src/impi/impi_rx.h $(top_srcdir)/src/impi/impi_client.h \
    $(top_srcdir)/src/impi/impi_proto.h $(top_srcdir)/src/icbc/icbc_bytes.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
test/fuzz/impi_frames_fuzz: $(top_srcdir)/test/fuzz/impi_frames_fuzz.c \
    $(top_srcdir)/src/icbc/status.c \
    $(top_srcdir)/src/impi/agent.c $(top_srcdir)/src/impi/rx.c $(top_srcdir)/src/impi/proto.c \
    $(FUZZ_BT_LIB) \
    $(top_srcdir)/src/bt_lib/bt_lib.h $(top_srcdir)/src/bt_lib/bt_impl.h \
    $(top_srcdir)/src/impi/impi_agent.h $(top_srcdir)/src/impi/impi_rx.h \
    $(top_srcdir)/src/impi/impi_client.h $(top_srcdir)/src/impi/impi_proto.h \
    $(top_srcdir)/src/icbc/icbc_bytes.h $(top_srcdir)/src/icbc/icbc_clock.h $(FUZZ_HDRS)
	$(FUZZ_LINK)
else
fuzz fuzz-smoke:
	@echo "fuzz: configure found no clang that builds -fsanitize=fuzzer targets" \
	    "(apt-get install clang, then re-run configure)" >&2; exit 1
endif

# Rewrites the seed corpora of the binary targets in the source tree.
fuzz-seeds: test/fuzz/gen_seeds
	test/fuzz/gen_seeds $(top_srcdir)/test/fuzz/corpus

test/fuzz/gen_seeds: $(top_srcdir)/test/fuzz/gen_seeds.c $(top_srcdir)/src/icbc/route.c \
    $(top_srcdir)/src/icbc/wire.c $(top_srcdir)/src/icbc/bcard.c $(top_srcdir)/src/bt_lib/frame.c
	$(AM_V_CCLD)$(MKDIR_P) test/fuzz && \
	    $(CC) $(CFLAGS) -I$(top_srcdir)/src/icbc -I$(top_srcdir)/src/bt_lib -o $@ $^ $(CRYPTO_LIBS)
