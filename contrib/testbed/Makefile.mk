# contrib/testbed: icbc-testbed, the emulated cluster-of-clusters testbed (bash).
bin_SCRIPTS += contrib/testbed/icbc-testbed
EXTRA_DIST += contrib/testbed/icbc-testbed \
    test/testbed/run.sh test/testbed/lib.sh test/testbed/args.sh test/testbed/single.sh \
    test/testbed/rtt.sh test/testbed/throughput.sh test/testbed/overload.sh \
    test/testbed/private.sh test/testbed/down.sh \
    benchmarks/wanemu/run.sh benchmarks/wanemu/plot.py

# The testbed tests need root and a few minutes, so they are not part of
# `make check`: run `make check-testbed` (as root).
check-testbed: icbc-wanemu
	ICBC_WANEMU=$(abs_builddir)/icbc-wanemu ICBC_TESTBED_BIN=$(abs_top_srcdir)/contrib/testbed/icbc-testbed \
	    $(abs_top_srcdir)/test/testbed/run.sh
.PHONY: check-testbed
