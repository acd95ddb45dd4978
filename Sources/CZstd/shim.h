#ifndef CAIRN_CZSTD_SHIM_H
#define CAIRN_CZSTD_SHIM_H
#include <zstd.h>
#endif
