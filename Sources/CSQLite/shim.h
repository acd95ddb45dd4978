#ifndef CAIRN_CSQLITE_SHIM_H
#define CAIRN_CSQLITE_SHIM_H
#include <sqlite3.h>
#endif
