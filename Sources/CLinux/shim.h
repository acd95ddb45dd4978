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

#endif
