[#] start of __file__
dnl MPICH_SUBCFG_AFTER=src/mpid/ch4

dnl icbc netmod: selected with --with-device=ch4:icbc; needs an external UCX.
AC_DEFUN([PAC_SUBCFG_PREREQ_]PAC_SUBCFG_AUTO_SUFFIX,[
    AM_COND_IF([BUILD_CH4],[
        for net in $ch4_netmods ; do
            if test "$net" = "icbc" ; then
                build_ch4_netmod_icbc=yes
                AC_DEFINE(HAVE_CH4_NETMOD_ICBC,1,[icbc netmod is built])
                if test "$build_ch4_locality_info" != "yes" ; then
                    AC_DEFINE(MPIDI_BUILD_CH4_LOCALITY_INFO, 1, [CH4 should build locality info])
                    build_ch4_locality_info="yes"
                fi
            fi
        done
    ])
    AM_CONDITIONAL([BUILD_CH4_NETMOD_ICBC],[test "X$build_ch4_netmod_icbc" = "Xyes"])
])dnl

AC_DEFUN([PAC_SUBCFG_BODY_]PAC_SUBCFG_AUTO_SUFFIX,[
AM_COND_IF([BUILD_CH4_NETMOD_ICBC],[
    AC_MSG_NOTICE([RUNNING CONFIGURE FOR ch4:icbc])
    AC_CHECK_HEADER([ucp/api/ucp.h],[],[AC_MSG_ERROR([ch4:icbc needs UCX headers (ucp/api/ucp.h)])])
    AC_CHECK_LIB([ucp],[ucp_am_send_nbx],[],
                 [AC_MSG_ERROR([ch4:icbc needs libucp with the active-message nbx API (UCX >= 1.10)])],
                 [-lucs])
    AC_CHECK_LIB([crypto],[HMAC],[],[AC_MSG_ERROR([ch4:icbc needs libcrypto (libssl-dev)])])
    PAC_LIBS_ADD([-lucp -lucs -lcrypto])
    dnl libfabric, the second fabric API, when installed (libfabric-dev):
    dnl opened at run time, not linked (mx_router/ofi_lib.h says why).
    AC_CHECK_HEADER([rdma/fabric.h],
        [AC_CHECK_LIB([fabric],[fi_getinfo],[
            AC_CHECK_LIB([dl],[dlopen],[PAC_LIBS_ADD([-ldl])])
            PAC_APPEND_FLAG([-DICBC_HAVE_OFI],[CPPFLAGS])
        ])])
])dnl end AM_COND_IF(BUILD_CH4_NETMOD_ICBC,...)
])dnl end _BODY

[#] end of __file__
