#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro around a cast Swift cannot import: it tells SQLite to copy a
// bound value before the call returns.
static inline sqlite3_destructor_type mirror_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}
