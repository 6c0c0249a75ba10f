!     icbcf.h: what ICBC's MPI adds for Fortran applications
!     (docs/pacing.md). Valid between MPI_INIT and MPI_FINALIZE.
!
!     ICBC_PACING_MATB: communicator attribute keyval. This process's
!     sending to other clusters, for messages sent on the communicator
!     (and its duplicates), is paced at the value in bits/s; 0: not
!     paced. A communicator without it takes MPI_COMM_WORLD's.
!         INTEGER(KIND=MPI_ADDRESS_KIND) RATE
!         RATE = 100000000
!         CALL MPI_COMM_SET_ATTR(MPI_COMM_WORLD, ICBC_PACING_MATB, RATE, IERR)
      INTEGER ICBC_PACING_MATB
      COMMON /ICBC_PACING/ ICBC_PACING_MATB
