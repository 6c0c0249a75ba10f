# IMPI interoperation: a one-process IMPI client built from libicbc's IMPI
# parts (test/impi/impi_pingpong.c) and its LAM/MPI counterpart, compiled by
# test/pytest/test_impi_lam.py with LAM's own mpicc.
noinst_PROGRAMS += test/impi/impi_pingpong
test_impi_impi_pingpong_SOURCES = test/impi/impi_pingpong.c
test_impi_impi_pingpong_CPPFLAGS = -I$(top_srcdir)/src/icbc -I$(top_srcdir)/src/impi
test_impi_impi_pingpong_LDADD = libicbc.la
EXTRA_DIST += test/impi/lam_pingpong.c test/impi/lam_coll.c test/impi/lam_constructors.c
