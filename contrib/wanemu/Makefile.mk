# contrib/wanemu
