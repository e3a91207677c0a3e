// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module lacks.
#ifndef MIRROR_CLINUX_SHIM_H
#define MIRROR_CLINUX_SHIM_H

#define _GNU_SOURCE 1
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

/// The extended-attribute calls of <sys/xattr.h>, declared here as glibc declares them rather
/// than included: under _GNU_SOURCE that header brings in <sys/select.h>, whose `fd_set` then
/// differs from the one in Swift's Glibc module, and a clean build fails on the conflict.
extern ssize_t fgetxattr(int fd, const char *name, void *value, size_t size);
extern int fsetxattr(int fd, const char *name, const void *value, size_t size, int flags);
extern int fremovexattr(int fd, const char *name);

/// Starts writeback of a file range without waiting for it (SYNC_FILE_RANGE_WRITE), so that a
/// later fsync has little left to do.
static inline int mirror_start_writeback(int fd, long long offset, long long length) {
    return sync_file_range(fd, offset, length, SYNC_FILE_RANGE_WRITE);
}

/// Allocates a file's blocks up to `length` (mode 0: the size grows too), so that writes at
/// any offset find their space; fails with EOPNOTSUPP where the file system cannot.
static inline int mirror_allocate(int fd, long long length) {
    return fallocate(fd, 0, 0, length);
}

/// open(2) with O_PATH: a descriptor that locates a file without opening it, so that neither
/// a FIFO (which would block) nor a device (which might act on an open) is opened.
static inline int mirror_open_location(const char *path) {
    return open(path, O_PATH | O_CLOEXEC);
}

/// openat(2) of a directory with O_PATH: a descriptor that locates it (for fstat, and as the
/// start of another openat) with search permission alone, without reading it.
static inline int mirror_open_directory_location(int directory, const char *path) {
    return openat(directory, path, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

#ifndef SYS_openat2
#define SYS_openat2 437
/// RENAME_NOREPLACE of <linux/fs.h>, part of the kernel's ABI.
#define MIRROR_RENAME_NOREPLACE (1 << 0)

/// renameat2(2) with RENAME_NOREPLACE: fails with EEXIST rather than replace a file at the new
/// name. Through syscall(2), as glibc declares the wrapper only under _GNU_SOURCE in <stdio.h>.
/// EINVAL where the file system cannot do it (NFS, some FUSE file systems).
static inline int mirror_rename_noreplace(int fromDirectory, const char *from, int toDirectory, const char *to) {
    return (int)syscall(SYS_renameat2, fromDirectory, from, toDirectory, to, MIRROR_RENAME_NOREPLACE);
}

#endif

/// openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS: opens `path` relative to `directory`
/// only if no component of it is a symbolic link and it stays beneath `directory`. glibc has no
/// wrapper, and Swift cannot call the variadic syscall(2). Returns -1 with errno set; ENOSYS on
/// kernels before 5.6 (or EPERM under a seccomp filter that does not know the call).
static inline int mirror_openat_beneath(int directory, const char *path, int flags) {
    struct open_how how = {0};
    how.flags = (unsigned long long)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS;
    return (int)syscall(SYS_openat2, directory, path, &how, sizeof how);
}

/// RENAME_NOREPLACE of <linux/fs.h>, part of the kernel's ABI.
#define MIRROR_RENAME_NOREPLACE (1 << 0)

/// renameat2(2) with RENAME_NOREPLACE: fails with EEXIST rather than replace a file at the new
/// name. Through syscall(2), as glibc declares the wrapper only under _GNU_SOURCE in <stdio.h>.
/// EINVAL where the file system cannot do it (NFS, some FUSE file systems).
static inline int mirror_rename_noreplace(int fromDirectory, const char *from, int toDirectory, const char *to) {
    return (int)syscall(SYS_renameat2, fromDirectory, from, toDirectory, to, MIRROR_RENAME_NOREPLACE);
}

#endif
