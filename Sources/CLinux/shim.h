// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module lacks.
#ifndef MIRROR_CLINUX_SHIM_H
#define MIRROR_CLINUX_SHIM_H

#define _GNU_SOURCE 1
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/ioctl.h>

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

/// The kernel's `struct sched_attr` as far as its first published size (SCHED_ATTR_SIZE_VER0),
/// declared here: <linux/sched/types.h> also declares a `struct sched_param` that clashes with
/// glibc's.
struct mirror_sched_attr {
    unsigned int size;
    unsigned int sched_policy;
    unsigned long long sched_flags;
    int sched_nice;
    unsigned int sched_priority;
    unsigned long long sched_runtime;
    unsigned long long sched_deadline;
    unsigned long long sched_period;
};

/// Asks for a time slice of `nanoseconds` for the calling thread, keeping its policy, nice
/// value and flags: sched_setattr(2)'s `sched_runtime`, which a SCHED_OTHER or SCHED_BATCH
/// thread may set since Linux 6.12 (earlier kernels ignore it). Any other policy is left as
/// it is, and so is a slice already no longer than `nanoseconds`. Returns 0, or -1 with errno.
static inline int mirror_request_thread_slice(unsigned long long nanoseconds) {
    struct mirror_sched_attr attr = {0};
    if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return -1;
    if (attr.sched_policy != 0 && attr.sched_policy != 3) return 0;
    if (attr.sched_runtime != 0 && attr.sched_runtime <= nanoseconds) return 0;
    attr.size = sizeof attr;
    // Only SCHED_FLAG_RESET_ON_FORK is kept: the others ask for more than this size holds.
    attr.sched_flags &= 0x01;
    attr.sched_runtime = nanoseconds;
    attr.sched_deadline = 0;
    attr.sched_period = 0;
    return (int)syscall(SYS_sched_setattr, 0, &attr, 0);
}

/// The calling thread's policy, nice value and slice (`sched_runtime`, 0 before Linux 6.12
/// for those policies), as sched_getattr(2) reports them. Returns 0, or -1 with errno.
static inline int mirror_thread_scheduling(unsigned int *policy, int *nice, unsigned long long *slice) {
    struct mirror_sched_attr attr = {0};
    if (syscall(SYS_sched_getattr, 0, &attr, sizeof attr, 0) != 0) return -1;
    *policy = attr.sched_policy;
    *nice = attr.sched_nice;
    *slice = attr.sched_runtime;
    return 0;
}

/// FICLONE of <linux/fs.h>: makes `destination` share `source`'s extents (a reflink, on XFS
/// with reflink=1, Btrfs, and others); fails with EOPNOTSUPP, EXDEV or EINVAL where it cannot.
static inline int mirror_clone_file(int destination, int source) {
    return ioctl(destination, 0x40049409 /* FICLONE: _IOW(0x94, 9, int) */, source);
}

/// copy_file_range(2) from the current offsets of both files: the kernel copies (or shares)
/// the bytes without them passing through this process.
static inline long long mirror_copy_file_range(int source, int destination, long long length) {
    return (long long)copy_file_range(source, NULL, destination, NULL, (size_t)length, 0);
}

#endif
