# MPICH 4.0.2 with the icbc netmod: configured, built and installed into
# $(prefix) by contrib/mpich/build-mpich.sh as part of make / make install.
EXTRA_DIST += contrib/mpich/build-mpich.sh contrib/mpich/fetch-mpich-source.sh contrib/mpich/build-stock.sh \
              contrib/mpich/patches
if BUILD_MPICH
MPICH_BUILD = $(top_srcdir)/contrib/mpich/build-mpich.sh --prefix $(prefix) \
              --source $(MPICH_SOURCE) --builddir $(abs_top_builddir)/mpich

all-local: mpich-build
mpich-build:
	$(MPICH_BUILD) --stage build
install-exec-local:
	$(MPICH_BUILD) --stage install
.PHONY: mpich-build
endif
