// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module lacks.
#ifndef MIRROR_CLINUX_SHIM_H
#define MIRROR_CLINUX_SHIM_H

#define _GNU_SOURCE 1
#include <fcntl.h>

/// Starts writeback of a file range without waiting for it (SYNC_FILE_RANGE_WRITE), so that a
/// later fsync has little left to do.
static inline int mirror_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

#endif
