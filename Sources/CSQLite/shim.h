#ifndef CAIRN_CSQLITE_SHIM_H
#define CAIRN_CSQLITE_SHIM_H
#include <sqlite3.h>

/// sqlite3_open_v2 flags are macros of type int; these give them to Swift with one type.
static inline int cairn_sqlite_open_readonly(void) { return SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX; }
#endif
