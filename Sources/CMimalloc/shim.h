// mimalloc (headers from libmimalloc-dev): the allocator of the `mirror` command. Linked before
// libc, its malloc and free are every library's in the process.
#ifndef MIRROR_CMIMALLOC_SHIM_H
#define MIRROR_CMIMALLOC_SHIM_H

#include <mimalloc.h>

/// Gives the free pages of the calling thread's heap back to the system now rather than after
/// mimalloc's delay (mimalloc 2.0 collects the heaps of ended threads only when called on the
/// main thread, which the commands do not run on).
static inline void mirror_heap_collect(void) {
    mi_collect(true);
}

#endif
