/*
 * wasiprobe - a hostile test guest. Each input record's value is a command
 * that makes WASI calls (through wasi-libc) the way a plugin trying to leave
 * its sandbox would; the output record's value is the outcome: "ok:..." or
 * "err:<strerror>". The runtime's tests (sandbox_test.go, grants_test.go)
 * drive it against granted directories, the clock and the random source.
 *
 * Commands (paths are guest paths; DATA is the rest of the line):
 *   read P | readnf P (O_NOFOLLOW) | write P DATA | append P DATA
 *   create P (O_RDONLY|O_CREAT) | trunc P (O_RDONLY|O_TRUNC)
 *   symlink TARGET LINK | link OLD NEW | rename OLD NEW | readlink P
 *   mkdir P | rmdir P | unlink P | stat P | lstat P | ls P
 *   utime P (sets atime and mtime to the epoch)
 *   opendir P (-> ok:FD) | readat FD P | writeat FD P DATA | close FD
 *   race N P (read P N times; ok:<distinct outcomes, '|'-separated>)
 *   time (ok:<realtime ns> <monotonic ns>) | rand N (ok:<N bytes, hex>)
 *   sleep MS (ok:<monotonic ns slept>)
 *   args | env (ok:<count> <bytes>) | stdin (ok:<bytes read>)
 *   sock FD (sock_accept on FD, then sock_recv on FD) | exit CODE
 */
#define _DEFAULT_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <wasi/api.h>

#include "streamd.h"

static char cmd[4096];
static char res[16384];
static size_t res_len;

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void say(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(res + res_len, sizeof res - res_len, fmt, ap);
    va_end(ap);
    if (n > 0) {
        res_len += (size_t)n;
        if (res_len >= sizeof res) res_len = sizeof res - 1;
    }
}

static void fail(void) { say("err:%s", strerror(errno)); }

/* next cuts the next space-separated word off *s. */
static char *next(char **s) {
    char *w = *s;
    char *sp = strchr(w, ' ');
    if (sp) {
        *sp = 0;
        *s = sp + 1;
    } else {
        *s = w + strlen(w);
    }
    return w;
}

/* readfd reads up to 4 KiB from fd into the result and closes fd. */
static void readfd(int fd) {
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    int e = errno;
    close(fd);
    if (n < 0) {
        errno = e;
        fail();
        return;
    }
    say("ok:%.*s", (int)n, buf);
}

static void writefd(int fd, const char *data) {
    size_t len = strlen(data);
    ssize_t n = write(fd, data, len);
    int e = errno;
    close(fd);
    if (n < 0) {
        errno = e;
        fail();
        return;
    }
    say("ok:%zd", n);
}

static void openread(const char *p, int flags) {
    int fd = open(p, flags);
    if (fd < 0) {
        fail();
        return;
    }
    readfd(fd);
}

static void openwrite(const char *p, int flags, const char *data) {
    int fd = open(p, flags, 0644);
    if (fd < 0) {
        fail();
        return;
    }
    writefd(fd, data);
}

static void check(int rc) {
    if (rc < 0)
        fail();
    else
        say("ok");
}

static int64_t nanos(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void run(char *s) {
    char *op = next(&s);
    if (!strcmp(op, "read")) {
        openread(next(&s), O_RDONLY);
    } else if (!strcmp(op, "readnf")) {
        openread(next(&s), O_RDONLY | O_NOFOLLOW);
    } else if (!strcmp(op, "write")) {
        char *p = next(&s);
        openwrite(p, O_WRONLY | O_CREAT | O_TRUNC, s);
    } else if (!strcmp(op, "append")) {
        char *p = next(&s);
        openwrite(p, O_WRONLY | O_CREAT | O_APPEND, s);
    } else if (!strcmp(op, "create")) {
        int fd = open(next(&s), O_RDONLY | O_CREAT, 0644);
        if (fd < 0) {
            fail();
        } else {
            close(fd);
            say("ok");
        }
    } else if (!strcmp(op, "trunc")) {
        int fd = open(next(&s), O_RDONLY | O_TRUNC);
        if (fd < 0) {
            fail();
        } else {
            close(fd);
            say("ok");
        }
    } else if (!strcmp(op, "symlink")) {
        char *target = next(&s);
        check(symlink(target, next(&s)));
    } else if (!strcmp(op, "link")) {
        char *old = next(&s);
        check(link(old, next(&s)));
    } else if (!strcmp(op, "rename")) {
        char *old = next(&s);
        check(rename(old, next(&s)));
    } else if (!strcmp(op, "readlink")) {
        char buf[1024];
        ssize_t n = readlink(next(&s), buf, sizeof buf);
        if (n < 0)
            fail();
        else
            say("ok:%.*s", (int)n, buf);
    } else if (!strcmp(op, "mkdir")) {
        check(mkdir(next(&s), 0755));
    } else if (!strcmp(op, "rmdir")) {
        check(rmdir(next(&s)));
    } else if (!strcmp(op, "unlink")) {
        check(unlink(next(&s)));
    } else if (!strcmp(op, "stat") || !strcmp(op, "lstat")) {
        struct stat st;
        int rc = op[0] == 's' ? stat(next(&s), &st) : lstat(next(&s), &st);
        if (rc < 0)
            fail();
        else
            say("ok:%lld", (long long)st.st_size);
    } else if (!strcmp(op, "ls")) {
        DIR *d = opendir(next(&s));
        if (!d) {
            fail();
            return;
        }
        say("ok:");
        struct dirent *e;
        int first = 1;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
            say("%s%s", first ? "" : ",", e->d_name);
            first = 0;
        }
        closedir(d);
    } else if (!strcmp(op, "utime")) {
        struct timespec ts[2] = {{0, 0}, {0, 0}};
        check(utimensat(AT_FDCWD, next(&s), ts, 0));
    } else if (!strcmp(op, "opendir")) {
        int fd = open(next(&s), O_RDONLY | O_DIRECTORY);
        if (fd < 0)
            fail();
        else
            say("ok:%d", fd);
    } else if (!strcmp(op, "readat")) {
        int dir = atoi(next(&s));
        int fd = openat(dir, next(&s), O_RDONLY);
        if (fd < 0)
            fail();
        else
            readfd(fd);
    } else if (!strcmp(op, "writeat")) {
        int dir = atoi(next(&s));
        char *p = next(&s);
        int fd = openat(dir, p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0)
            fail();
        else
            writefd(fd, s);
    } else if (!strcmp(op, "close")) {
        check(close(atoi(next(&s))));
    } else if (!strcmp(op, "race")) {
        static char seen[8192];
        size_t seen_len = 0;
        int n = atoi(next(&s));
        char *p = next(&s);
        seen[0] = 0;
        for (int i = 0; i < n; i++) {
            res_len = 0;
            openread(p, O_RDONLY);
            res[res_len] = 0;
            /* Keep each distinct outcome once, '|'-separated. */
            int found = 0;
            for (char *q = seen; *q;) {
                char *bar = strchr(q, '|');
                size_t l = bar ? (size_t)(bar - q) : strlen(q);
                if (l == res_len && !memcmp(q, res, l)) {
                    found = 1;
                    break;
                }
                q = bar ? bar + 1 : q + l;
            }
            if (!found && seen_len + res_len + 2 < sizeof seen) {
                if (seen_len) seen[seen_len++] = '|';
                memcpy(seen + seen_len, res, res_len);
                seen_len += res_len;
                seen[seen_len] = 0;
            }
        }
        res_len = 0;
        say("ok:%s", seen);
    } else if (!strcmp(op, "time")) {
        say("ok:%lld %lld", (long long)nanos(CLOCK_REALTIME), (long long)nanos(CLOCK_MONOTONIC));
    } else if (!strcmp(op, "rand")) {
        unsigned char buf[256];
        size_t n = (size_t)atoi(next(&s));
        if (n > sizeof buf) n = sizeof buf;
        if (getentropy(buf, n) != 0) {
            fail();
            return;
        }
        say("ok:");
        for (size_t i = 0; i < n; i++) say("%02x", buf[i]);
    } else if (!strcmp(op, "sleep")) {
        long ms = atol(next(&s));
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
        int64_t start = nanos(CLOCK_MONOTONIC);
        if (nanosleep(&ts, NULL) != 0) {
            fail();
            return;
        }
        say("ok:%lld", (long long)(nanos(CLOCK_MONOTONIC) - start));
    } else if (!strcmp(op, "args") || !strcmp(op, "env")) {
        __wasi_size_t count, size;
        __wasi_errno_t e = op[0] == 'a' ? __wasi_args_sizes_get(&count, &size)
                                        : __wasi_environ_sizes_get(&count, &size);
        if (e) {
            errno = e;
            fail();
        } else {
            say("ok:%lu %lu", (unsigned long)count, (unsigned long)size);
        }
    } else if (!strcmp(op, "stdin")) {
        char buf[64];
        ssize_t n = read(0, buf, sizeof buf);
        if (n < 0)
            fail();
        else
            say("ok:%zd", n);
    } else if (!strcmp(op, "sock")) {
        int fd = atoi(next(&s));
        __wasi_fd_t conn;
        __wasi_errno_t e = __wasi_sock_accept(fd, 0, &conn);
        char buf[16];
        __wasi_iovec_t iov = {(uint8_t *)buf, sizeof buf};
        __wasi_size_t n;
        __wasi_roflags_t flags;
        __wasi_errno_t e2 = __wasi_sock_recv(fd, &iov, 1, 0, &n, &flags);
        say("%s:accept %s, recv %s", e || e2 ? "err" : "ok", strerror(e), strerror(e2));
    } else if (!strcmp(op, "exit")) {
        __wasi_proc_exit((__wasi_exitcode_t)atoi(next(&s)));
    } else {
        say("err:unknown command %s", op);
    }
}

static int probe(const streamd_record *in, streamd_emitter *out, streamd_error *err) {
    if (!in->value.data || in->value.len >= sizeof cmd) return streamd_error_set(err, "bad command");
    memcpy(cmd, in->value.data, in->value.len);
    cmd[in->value.len] = 0;
    res_len = 0;
    errno = 0;
    run(cmd);
    return streamd_emit_begin(out, in->timestamp_ms, in->key, streamd_bytes_of(res, res_len)) ||
           streamd_emit_end(out);
}

STREAMD_TRANSFORM("wasiprobe", "1.0.0", probe)
