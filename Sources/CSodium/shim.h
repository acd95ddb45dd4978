#ifndef CAIRN_CSODIUM_SHIM_H
#define CAIRN_CSODIUM_SHIM_H
#include <sodium.h>
#endif
