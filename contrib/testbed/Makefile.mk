# contrib/testbed: icbc-testbed, the emulated cluster-of-clusters testbed (bash).
bin_SCRIPTS += contrib/testbed/icbc-testbed
EXTRA_DIST += contrib/testbed/icbc-testbed
