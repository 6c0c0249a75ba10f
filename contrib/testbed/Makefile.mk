# contrib/testbed
