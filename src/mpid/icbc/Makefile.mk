# icbc netmod, overlaid as src/mpid/ch4/netmod/icbc; core/ is libicbc (src/icbc).
if BUILD_CH4_NETMOD_ICBC

AM_CPPFLAGS += -I$(top_srcdir)/src/mpid/ch4/netmod/icbc/core \
               -I$(top_srcdir)/src/mpid/ch4/netmod/icbc/bt_lib \
               -I$(top_srcdir)/src/mpid/ch4/netmod/icbc/mx_router \
               -I$(top_srcdir)/src/mpid/ch4/netmod/icbc/router \
               -I$(top_srcdir)/src/mpid/ch4/netmod/icbc/impi

include_HEADERS += src/mpid/ch4/netmod/icbc/include/icbc.h \
                   src/mpid/ch4/netmod/icbc/include/icbcf.h

mpi_core_sources += src/mpid/ch4/netmod/icbc/func_table.c \
                    src/mpid/ch4/netmod/icbc/icbc_init.c \
                    src/mpid/ch4/netmod/icbc/icbc_peer_ep.c \
                    src/mpid/ch4/netmod/icbc/icbc_am_recv.c \
                    src/mpid/ch4/netmod/icbc/icbc_delegate.c \
                    src/mpid/ch4/netmod/icbc/icbc_proto_icbc.c \
                    src/mpid/ch4/netmod/icbc/icbc_recv.c \
                    src/mpid/ch4/netmod/icbc/icbc_path.c \
                    src/mpid/ch4/netmod/icbc/icbc_path_routed.c \
                    src/mpid/ch4/netmod/icbc/icbc_path_tcp.c \
                    src/mpid/ch4/netmod/icbc/icbc_pacing.c \
                    src/mpid/ch4/netmod/icbc/icbc_router_embed.c \
                    src/mpid/ch4/netmod/icbc/icbc_dump.c \
                    src/mpid/ch4/netmod/icbc/icbc_impi_world.c \
                    src/mpid/ch4/netmod/icbc/icbc_path_impi.c \
                    src/mpid/ch4/netmod/icbc/icbc_proto_impi.c \
                    src/mpid/ch4/netmod/icbc/icbc_impi_coll.c \
                    src/mpid/ch4/netmod/icbc/icbc_impi_gather.c \
                    src/mpid/ch4/netmod/icbc/icbc_impi_lam.c \
                    src/mpid/ch4/netmod/icbc/icbc_impi_alltoall.c \
                    src/mpid/ch4/netmod/icbc/icbc_impi_scan.c \
                    src/mpid/ch4/netmod/icbc/icbc_impi_attr.c \
                    src/mpid/ch4/netmod/icbc/impi/coll.c \
                    src/mpid/ch4/netmod/icbc/impi/hostconn.c \
                    src/mpid/ch4/netmod/icbc/impi/rx.c \
                    src/mpid/ch4/netmod/icbc/impi/p2p.c \
                    src/mpid/ch4/netmod/icbc/impi/agent.c \
                    src/mpid/ch4/netmod/icbc/impi/proto.c \
                    src/mpid/ch4/netmod/icbc/impi/layout.c \
                    src/mpid/ch4/netmod/icbc/impi/client.c \
                    src/mpid/ch4/netmod/icbc/core/status.c \
                    src/mpid/ch4/netmod/icbc/core/log.c \
                    src/mpid/ch4/netmod/icbc/core/bcard.c \
                    src/mpid/ch4/netmod/icbc/core/peer.c \
                    src/mpid/ch4/netmod/icbc/core/wire.c \
                    src/mpid/ch4/netmod/icbc/core/stripe.c \
                    src/mpid/ch4/netmod/icbc/core/seq.c \
                    src/mpid/ch4/netmod/icbc/core/pace.c \
                    src/mpid/ch4/netmod/icbc/core/route.c \
                    src/mpid/ch4/netmod/icbc/core/routerfile.c \
                    src/mpid/ch4/netmod/icbc/core/bind.c \
                    src/mpid/ch4/netmod/icbc/core/netif.c \
                    src/mpid/ch4/netmod/icbc/core/netprobe.c \
                    src/mpid/ch4/netmod/icbc/mx_router/mx_client.c \
                    src/mpid/ch4/netmod/icbc/mx_router/mx_fabric.c \
                    src/mpid/ch4/netmod/icbc/mx_router/mx_fabric_ucx.c \
                    src/mpid/ch4/netmod/icbc/mx_router/mx_fabric_ofi.c \
                    src/mpid/ch4/netmod/icbc/mx_router/ofi_lib.c \
                    src/mpid/ch4/netmod/icbc/mx_router/mx_server.c \
                    src/mpid/ch4/netmod/icbc/core/hmap.c \
                    src/mpid/ch4/netmod/icbc/mx_router/mx_guard.c \
                    src/mpid/ch4/netmod/icbc/router/router.c \
                    src/mpid/ch4/netmod/icbc/router/fabric.c \
                    src/mpid/ch4/netmod/icbc/router/trunk.c \
                    src/mpid/ch4/netmod/icbc/router/forward.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/auth.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/conn.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/frame.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/listen.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/opts.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/poller.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/recv.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/send.c \
                    src/mpid/ch4/netmod/icbc/bt_lib/sockopt.c

errnames_txt_files += src/mpid/ch4/netmod/icbc/errnames.txt

endif
