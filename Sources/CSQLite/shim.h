#include <sqlite3.h>

// SQLITE_TRANSIENT is a macro around a cast Swift cannot import: it tells SQLite to copy a
// bound value before the call returns.
static inline sqlite3_destructor_type mirror_sqlite_transient(void) {
    return SQLITE_TRANSIENT;
}

// Turns off SQLite's count of the memory it holds (SQLITE_CONFIG_MEMSTATUS), whose global mutex
// every allocation takes: threads reading their own connections at once (verify's workers) met
// on it. Only before SQLite initialises; SQLITE_MISUSE after, when it changes nothing.
static inline int mirror_sqlite_stop_counting_memory(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}
