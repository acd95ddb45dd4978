#ifndef CAIRN_CZLIB_SHIM_H
#define CAIRN_CZLIB_SHIM_H
#include <zlib.h>

/// `inflateInit` and `deflateInit` are macros; these shims make them callable from Swift.
static inline int cairn_deflateInit(z_streamp strm, int level) {
    return deflateInit(strm, level);
}
static inline int cairn_inflateInit(z_streamp strm) {
    return inflateInit(strm);
}
#endif
