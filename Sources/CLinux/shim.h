#ifndef CAIRN_CLINUX_SHIM_H
#define CAIRN_CLINUX_SHIM_H


/* renameat2(2) is declared by glibc only under _GNU_SOURCE, which Swift's Glibc module does not
   set, and defining it here would clash with the Glibc module's view of the same headers. The
   prototype below is glibc's (2.28 and later). */
extern int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags);

/* From <linux/fs.h>: fail with EEXIST instead of replacing the new path. */
static inline unsigned int cairn_rename_noreplace(void) { return 1u << 0; }

static inline int cairn_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                                  unsigned int flags) {
    return renameat2(olddirfd, oldpath, newdirfd, newpath, flags);
}


/* Extended attributes (<sys/xattr.h>, glibc 2.3 and later). The header is not included: like
   fcntl.h it would bring types such as mode_t into Swift through this module. These prototypes
   are glibc's, with ssize_t and size_t spelled as long and unsigned long (LP64 Linux). */
extern long flistxattr(int fd, char *list, unsigned long size);
extern long llistxattr(const char *path, char *list, unsigned long size);
extern long fgetxattr(int fd, const char *name, void *value, unsigned long size);
extern long lgetxattr(const char *path, const char *name, void *value, unsigned long size);
extern int fsetxattr(int fd, const char *name, const void *value, unsigned long size, int flags);
extern int lsetxattr(const char *path, const char *name, const void *value, unsigned long size, int flags);

/* pipe2(2) (glibc 2.9 and later, declared only under _GNU_SOURCE) and fcntl's F_SETPIPE_SZ
   (<linux/fcntl.h>: F_LINUX_SPECIFIC_BASE + 7, Linux 2.6.35 and later). */
extern int pipe2(int pipefd[2], int flags);
static inline int cairn_f_setpipe_sz(void) { return 1024 + 7; }

/* mallopt(3) with M_MMAP_THRESHOLD (<malloc.h>: -3), glibc's prototype; the header is not
   included, for the same reason as above. */
extern int mallopt(int param, int value);
static inline int cairn_set_mmap_threshold(int bytes) { return mallopt(-3, bytes); }

/* sync_file_range(2) (glibc 2.6 and later, declared only under _GNU_SOURCE; its offsets are
   off64_t, spelled long long here) with
   SYNC_FILE_RANGE_WRITE (<fcntl.h>: 2): starts writeback of a range's dirty pages without waiting
   for it, so a later fsync(2) has less left to wait for. */
extern int sync_file_range(int fd, long long offset, long long nbytes, unsigned int flags);
static inline int cairn_start_writeback(int fd, long long offset, long long nbytes) { return sync_file_range(fd, offset, nbytes, 2u); }

/* malloc_trim(3) (<malloc.h>, glibc's prototype; not included, as above): returns free heap
   memory, at the top and inside every arena, to the system. */
extern int malloc_trim(unsigned long pad);
static inline int cairn_malloc_trim(void) { return malloc_trim(0); }

#endif
