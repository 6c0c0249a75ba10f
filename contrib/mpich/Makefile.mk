# MPICH 4.0.2 with the icbc netmod; built and installed by contrib/mpich/build-mpich.sh.
