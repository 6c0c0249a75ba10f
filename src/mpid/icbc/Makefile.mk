# icbc netmod, overlaid as src/mpid/ch4/netmod/icbc; core/ is libicbc (src/icbc).
if BUILD_CH4_NETMOD_ICBC

AM_CPPFLAGS += -I$(top_srcdir)/src/mpid/ch4/netmod/icbc/core

mpi_core_sources += src/mpid/ch4/netmod/icbc/func_table.c \
                    src/mpid/ch4/netmod/icbc/icbc_init.c \
                    src/mpid/ch4/netmod/icbc/icbc_am_recv.c \
                    src/mpid/ch4/netmod/icbc/icbc_delegate.c \
                    src/mpid/ch4/netmod/icbc/core/status.c \
                    src/mpid/ch4/netmod/icbc/core/log.c \
                    src/mpid/ch4/netmod/icbc/core/bcard.c \
                    src/mpid/ch4/netmod/icbc/core/peer.c \
                    src/mpid/ch4/netmod/icbc/core/wire.c

errnames_txt_files += src/mpid/ch4/netmod/icbc/errnames.txt

endif
