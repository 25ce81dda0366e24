/*
 * orders-downgrade - turns an orders-v2 JSON value into the orders-v1 shape.
 *
 * Input: exactly one JSON object (RFC 8259) with order_id (string), customer
 * (object with id string), amount_cents (integer literal that fits int64) and
 * currency (string); other fields are ignored but must be valid JSON. A
 * duplicate key in the top-level object or in customer, invalid UTF-8, an
 * unpaired surrogate escape, nesting deeper than 64 (the top-level object is
 * level 1) or a null value rejects the record.
 *
 * Output: {"order_id":S,"customer_id":S,"amount_cents":N,"currency":S},
 * compact, strings escaped minimally with lowercase \u00xx. Key, timestamp
 * and headers are kept, except that every fluid-schema-version header is
 * replaced by one "fluid-schema-version: 1" appended last.
 *
 * The rules and the conformance fixture are in examples/wasm/testdata.
 */
#include "downgrade.h"

#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

/* ---- error messages ------------------------------------------------------ */

static void err_str(streamd_buf *e, const char *s) { (void)streamd_buf_append(e, s, strlen(s)); }

static void err_num(streamd_buf *e, uint64_t v) {
    char d[20];
    int n = 0;
    do {
        d[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n) {
        (void)streamd_buf_append_byte(e, (uint8_t)d[--n]);
    }
}

/* ---- key sets (duplicate detection) -------------------------------------- */

/*
 * A key is looked up where it is: a key without escapes is its raw bytes in
 * the input (already checked to be valid UTF-8), so it is neither copied nor
 * decoded; only a key with an escape is decoded, into the arena. A slot is in
 * use when its gen is the set's: resetting the set for the next object is
 * one increment, not a memset of the table.
 */
typedef struct key_entry {
    uint32_t off, len, hash; /* the key is input[off:off+len], or arena's if in_arena */
    uint32_t gen;            /* in use when == keyset.gen */
    uint32_t in_arena;
} key_entry;

/*
 * An object's first KEYS_LINEAR keys are kept in a list and a new key is
 * compared with each (its length and a fingerprint of its first bytes, then
 * the rest): for the few keys of most objects that is cheaper than hashing
 * every key byte by byte. The ninth key moves them all into the hash table.
 */
#define KEYS_LINEAR 8

typedef struct key_short {
    uint64_t fp; /* fingerprint: exactly the key's bytes when len <= 8 */
    uint32_t off, len, in_arena;
} key_short;

/* keyset holds the keys of one object: a list, then hashed. */
typedef struct keyset {
    streamd_buf arena;     /* decoded keys that had escapes */
    const uint8_t *input;  /* the value being parsed */
    key_entry *slots;
    uint32_t cap, n, gen;  /* n: keys in the object so far */
    key_short list[KEYS_LINEAR];
} keyset;

static void keyset_reset(keyset *k, const uint8_t *input) {
    k->arena.len = 0;
    k->input = input;
    k->n = 0;
    if (++k->gen == 0) { /* wrapped: clear the slots once every 2^32 objects */
        if (k->cap) {
            memset(k->slots, 0, k->cap * sizeof *k->slots);
        }
        k->gen = 1;
    }
}

static uint32_t hash_bytes(const uint8_t *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ p[i]) * 16777619u;
    }
    return h;
}

static const uint8_t *key_bytes(const keyset *k, const key_entry *e) {
    return (e->in_arena ? k->arena.data : k->input) + e->off;
}

/*
 * keyset_add_hashed adds the key at input[off:off+len] (or, if in_arena, at
 * the arena's tail arena[off:]) to the hash table and reports 1 if it is
 * new, 0 if it is a duplicate, -1 when memory runs out.
 */
static int keyset_add_hashed(keyset *k, uint32_t off, uint32_t len, uint32_t in_arena) {
    key_entry e = {off, len, 0, k->gen, in_arena};
    const uint8_t *key = len ? key_bytes(k, &e) : (const uint8_t *)"";
    e.hash = hash_bytes(key, len);
    if ((k->n + 1) * 2 > k->cap) {
        uint32_t cap = k->cap ? k->cap * 2 : 16;
        key_entry *s = calloc(cap, sizeof *s); /* gen 0: free (k->gen is never 0) */
        if (s == NULL) {
            return -1;
        }
        for (uint32_t i = 0; i < k->cap; i++) {
            if (k->slots[i].gen == k->gen) {
                uint32_t j = k->slots[i].hash & (cap - 1);
                while (s[j].gen == k->gen) {
                    j = (j + 1) & (cap - 1);
                }
                s[j] = k->slots[i];
            }
        }
        free(k->slots);
        k->slots = s;
        k->cap = cap;
    }
    uint32_t j = e.hash & (k->cap - 1);
    while (k->slots[j].gen == k->gen) {
        const key_entry *o = &k->slots[j];
        if (o->hash == e.hash && o->len == len && (len == 0 || memcmp(key_bytes(k, o), key, len) == 0)) {
            if (in_arena) {
                k->arena.len = off; /* drop the duplicate */
            }
            return 0;
        }
        j = (j + 1) & (k->cap - 1);
    }
    k->slots[j] = e;
    k->n++;
    return 1;
}

/* fingerprint returns the bytes of key[0:len] when len <= 8 (0-padded; two
 * overlapping loads, never past key[len-1]), else its first eight. */
static inline uint64_t fingerprint(const uint8_t *key, uint32_t len) {
    if (len >= 8) {
        uint64_t w;
        memcpy(&w, key, 8);
        return w;
    }
    if (len >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, key, 4);
        memcpy(&hi, key + len - 4, 4);
        return (uint64_t)lo | (uint64_t)hi << 32;
    }
    if (len == 0) {
        return 0;
    }
    return (uint64_t)key[0] | (uint64_t)key[len >> 1] << 8 | (uint64_t)key[len - 1] << 16;
}

/* keyset_add is keyset_add_hashed for any object: the list while the object
 * has at most KEYS_LINEAR keys, then the table. */
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE int keyset_add(keyset *k, uint32_t off, uint32_t len, uint32_t in_arena) {
    if (k->n < KEYS_LINEAR) {
        const uint8_t *key = len ? (in_arena ? k->arena.data : k->input) + off : (const uint8_t *)"";
        uint64_t fp = fingerprint(key, len);
        for (uint32_t j = 0; j < k->n; j++) {
            const key_short *o = &k->list[j];
            if (o->fp == fp && o->len == len &&
                (len <= 8 || memcmp((o->in_arena ? k->arena.data : k->input) + o->off + 8, key + 8, len - 8) == 0)) {
                if (in_arena) {
                    k->arena.len = off; /* drop the duplicate */
                }
                return 0;
            }
        }
        key_short e = {fp, off, len, in_arena};
        k->list[k->n++] = e;
        return 1;
    }
    if (k->n == KEYS_LINEAR) { /* the list is full: into the table with them */
        k->n = 0;
        for (uint32_t j = 0; j < KEYS_LINEAR; j++) {
            const key_short *o = &k->list[j];
            if (keyset_add_hashed(k, o->off, o->len, o->in_arena) < 0) {
                return -1;
            }
        }
    }
    return keyset_add_hashed(k, off, len, in_arena);
}

/* ---- parser -------------------------------------------------------------- */

typedef struct parser {
    const uint8_t *b;
    size_t n, i;
    streamd_buf *s;   /* decoded strings that are kept */
    streamd_buf *err; /* the reason, when a function returns -1 */
    int oom;
    int esc; /* set by str when a string has an escape */
} parser;

/*
 * The wanted fields: {start, end, in_scratch}, a range of the input (a
 * string without escapes: its bytes are the decoded string) or, with
 * in_scratch, of parser.s (a string with an escape, decoded).
 */
typedef struct order {
    size_t order_id[3], customer_id[3], currency[3];
    int64_t amount;
    unsigned seen;
} order;

enum { SEEN_ORDER_ID = 1, SEEN_CUSTOMER = 2, SEEN_AMOUNT = 4, SEEN_CURRENCY = 8 };

static keyset top_keys, customer_keys;

static int fail_at(parser *p, const char *what) {
    p->err->len = 0;
    err_str(p->err, "at byte ");
    err_num(p->err, p->i);
    err_str(p->err, ": ");
    err_str(p->err, what);
    return -1;
}

static int fail(parser *p, const char *what) {
    p->err->len = 0;
    err_str(p->err, what);
    return -1;
}

static int fail_oom(parser *p) {
    p->oom = 1;
    return fail(p, "out of memory");
}

static inline void ws(parser *p) {
    /* Most values are compact: a byte above ' ' ends it at once. */
    if (p->i < p->n && p->b[p->i] > ' ') {
        return;
    }
    while (p->i < p->n) {
        uint8_t c = p->b[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return;
        }
        p->i++;
    }
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

static long hex4(parser *p, size_t at) {
    if (at > p->n || p->n - at < 4) {
        return -1;
    }
    long r = 0;
    for (size_t k = 0; k < 4; k++) {
        int v = hexval(p->b[at + k]);
        if (v < 0) {
            return -1;
        }
        r = r << 4 | v;
    }
    return r;
}

/* utf8_len returns the length of the valid UTF-8 sequence at b[0:n], or 0. */
static size_t utf8_len(const uint8_t *b, size_t n) {
    uint8_t c = b[0];
    uint8_t lo = 0x80, hi = 0xBF;
    size_t len;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) {
            lo = 0xA0;
        } else if (c == 0xED) {
            hi = 0x9F;
        }
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) {
            lo = 0x90;
        } else if (c == 0xF4) {
            hi = 0x8F;
        }
    } else {
        return 0;
    }
    if (n < len || b[1] < lo || b[1] > hi) {
        return 0;
    }
    for (size_t k = 2; k < len; k++) {
        if (b[k] < 0x80 || b[k] > 0xBF) {
            return 0;
        }
    }
    return len;
}

static int put_rune(streamd_buf *s, uint32_t r) {
    uint8_t u[4];
    size_t n;
    if (r < 0x80) {
        u[0] = (uint8_t)r;
        n = 1;
    } else if (r < 0x800) {
        u[0] = (uint8_t)(0xC0 | r >> 6);
        u[1] = (uint8_t)(0x80 | (r & 0x3F));
        n = 2;
    } else if (r < 0x10000) {
        u[0] = (uint8_t)(0xE0 | r >> 12);
        u[1] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
        u[2] = (uint8_t)(0x80 | (r & 0x3F));
        n = 3;
    } else {
        u[0] = (uint8_t)(0xF0 | r >> 18);
        u[1] = (uint8_t)(0x80 | (r >> 12 & 0x3F));
        u[2] = (uint8_t)(0x80 | (r >> 6 & 0x3F));
        u[3] = (uint8_t)(0x80 | (r & 0x3F));
        n = 4;
    }
    return streamd_buf_append(s, u, n);
}

/*
 * special_bytes returns a word whose byte k has its high bit set when byte k
 * of w (little-endian: the k-th byte in memory) is '"', '\\', below 0x20 or
 * 0x80 and up: a byte a string's plain run stops at. The tests are the
 * classic SWAR ones ("has a zero byte", "has a byte less than n"): a borrow
 * may flag a byte above (after) a flagged one, never below, so the lowest
 * flagged byte is always a true stop and the word is 0 only if it has none.
 */
static inline uint64_t special_bytes(uint64_t w) {
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    uint64_t q = w ^ (ones * '"');   /* 0 where w has '"' */
    uint64_t bs = w ^ (ones * '\\'); /* 0 where w has '\\' */
    return (((q - ones) & ~q)     /* '"' */
            | ((bs - ones) & ~bs) /* '\\' */
            | (w - ones * 0x20)   /* below 0x20 (and 0xA0 and up: next line) */
            | w)                  /* 0x80 and up */
           & high;
}

/*
 * Sixteen bytes at a time, written once for both targets with the compilers'
 * vector extensions (clang and GCC): a compare gives a lane mask (0 or -1 per
 * byte) and only the step from a lane mask to a 16-bit mask differs: Wasm
 * SIMD's i8x16.bitmask (wazero compiles it to SSE's pmovmskb), SSE2's
 * _mm_movemask_epi8 natively (x86-64 has SSE2 always), else a loop. Under
 * wazero one v128.load is one bounds check for sixteen bytes.
 */
typedef unsigned char v16u __attribute__((vector_size(16)));
typedef signed char v16s __attribute__((vector_size(16)));
#define SPLAT(c) ((v16u){c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c})
#define SPLATS(c) ((v16s){c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c})

#if defined(__wasm_simd128__)
#include <wasm_simd128.h>
static inline unsigned lane_bits(v16s m) { return (unsigned)wasm_i8x16_bitmask((v128_t)m); }
#elif defined(__SSE2__)
#include <emmintrin.h>
static inline unsigned lane_bits(v16s m) { return (unsigned)_mm_movemask_epi8((__m128i)m); }
#else
static inline unsigned lane_bits(v16s m) {
    unsigned r = 0;
    for (int k = 0; k < 16; k++) {
        r |= (unsigned)(m[k] & 1) << k;
    }
    return r;
}
#endif

/*
 * special16 returns a mask whose bit k is set when byte k of p[0:16] is '"',
 * '\\', below 0x20 or 0x80 and up: a byte a string's plain run stops at. (As
 * signed bytes, 0x80 and up are negative: one compare finds both ranges.)
 */
static inline unsigned special16(const uint8_t *p) {
    v16u v;
    memcpy(&v, p, 16); /* one unaligned 16-byte load */
    v16s m = (v16s)(v == SPLAT('"')) | (v16s)(v == SPLAT('\\')) | ((v16s)v < SPLATS(0x20));
    return lane_bits(m);
}

/*
 * plain_run returns the index of the first byte at or after i in b[0:n] that
 * is not plain string content (see special16), or n. It tests sixteen bytes
 * per step; the last fewer than sixteen are tested with the value's last
 * sixteen bytes (never a read past b[n-1]), the lanes before i shifted out;
 * only a value shorter than sixteen bytes goes eight bytes (special_bytes)
 * and then one byte at a time.
 */
static size_t plain_run(const uint8_t *b, size_t i, size_t n) {
    /* The first sixteen outside the loop: most strings end in them, and a
     * loop head is a fuel check under wazero. */
    if (n - i >= 16) {
        unsigned m = special16(b + i);
        if (m) {
            return i + (size_t)__builtin_ctz(m);
        }
        i += 16;
    }
    while (n - i >= 16) {
        unsigned m = special16(b + i);
        if (m) {
            return i + (size_t)__builtin_ctz(m);
        }
        i += 16;
    }
    if (i == n) {
        return n;
    }
    if (n >= 16) {
        unsigned m = special16(b + n - 16) >> (16 - (n - i));
        return m ? i + (size_t)__builtin_ctz(m) : n;
    }
    while (n - i >= 8) {
        uint64_t w;
        memcpy(&w, b + i, 8); /* one unaligned little-endian load */
        uint64_t m = special_bytes(w);
        if (m) {
            return i + (size_t)(__builtin_ctzll(m) >> 3);
        }
        i += 8;
    }
    while (i < n && b[i] >= 0x20 && b[i] < 0x80 && b[i] != '"' && b[i] != '\\') {
        i++;
    }
    return i;
}

/*
 * str reads a string at p->i (which is '"'), validating UTF-8 and escapes.
 * When dst is not NULL the decoded bytes are appended to it.
 */
static int str(parser *p, streamd_buf *dst) {
    const uint8_t *b = p->b;
    p->i++; /* opening quote */
    for (;;) {
        size_t start = p->i;
        p->i = plain_run(b, p->i, p->n);
        if (dst && streamd_buf_append(dst, b + start, p->i - start) != STREAMD_OK) {
            return fail_oom(p);
        }
        if (p->i >= p->n) {
            return fail_at(p, "unterminated string");
        }
        uint8_t c = b[p->i];
        if (c == '"') {
            p->i++;
            return 0;
        }
        if (c < 0x20) {
            return fail_at(p, "control character in string");
        }
        if (c >= 0x80) {
            size_t n = utf8_len(b + p->i, p->n - p->i);
            if (n == 0) {
                return fail_at(p, "invalid UTF-8 in string");
            }
            if (dst && streamd_buf_append(dst, b + p->i, n) != STREAMD_OK) {
                return fail_oom(p);
            }
            p->i += n;
            continue;
        }
        /* backslash */
        p->esc = 1;
        if (p->i + 1 >= p->n) {
            return fail_at(p, "unterminated string");
        }
        uint8_t e = b[p->i + 1], out;
        switch (e) {
        case '"':
        case '\\':
        case '/':
            out = e;
            break;
        case 'b':
            out = '\b';
            break;
        case 'f':
            out = '\f';
            break;
        case 'n':
            out = '\n';
            break;
        case 'r':
            out = '\r';
            break;
        case 't':
            out = '\t';
            break;
        case 'u': {
            long r = hex4(p, p->i + 2);
            if (r < 0) {
                return fail_at(p, "invalid \\u escape");
            }
            if (r >= 0xDC00 && r <= 0xDFFF) {
                return fail_at(p, "unpaired surrogate escape");
            }
            if (r >= 0xD800 && r <= 0xDBFF) {
                if (p->n - p->i < 12 || b[p->i + 6] != '\\' || b[p->i + 7] != 'u') {
                    return fail_at(p, "unpaired surrogate escape");
                }
                long lo = hex4(p, p->i + 8);
                if (lo < 0xDC00 || lo > 0xDFFF) {
                    return fail_at(p, "unpaired surrogate escape");
                }
                r = 0x10000 + ((r - 0xD800) << 10) + (lo - 0xDC00);
                p->i += 12;
            } else {
                p->i += 6;
            }
            if (dst && put_rune(dst, (uint32_t)r) != STREAMD_OK) {
                return fail_oom(p);
            }
            continue;
        }
        default:
            p->i++; /* point at the escaped character */
            return fail_at(p, "invalid escape");
        }
        if (dst && streamd_buf_append_byte(dst, out) != STREAMD_OK) {
            return fail_oom(p);
        }
        p->i += 2;
    }
}

/* number reads a JSON number; *is_int says it has no fraction or exponent. */
static int number(parser *p, int *is_int) {
    const uint8_t *b = p->b;
    size_t n = p->n;
    if (p->i < n && b[p->i] == '-') {
        p->i++;
    }
    if (p->i < n && b[p->i] == '0') {
        p->i++;
    } else if (p->i < n && b[p->i] >= '1' && b[p->i] <= '9') {
        while (p->i < n && b[p->i] >= '0' && b[p->i] <= '9') {
            p->i++;
        }
    } else {
        return fail_at(p, "invalid number");
    }
    *is_int = 1;
    if (p->i < n && b[p->i] == '.') {
        *is_int = 0;
        p->i++;
        if (p->i >= n || b[p->i] < '0' || b[p->i] > '9') {
            return fail_at(p, "invalid number");
        }
        while (p->i < n && b[p->i] >= '0' && b[p->i] <= '9') {
            p->i++;
        }
    }
    if (p->i < n && (b[p->i] == 'e' || b[p->i] == 'E')) {
        *is_int = 0;
        p->i++;
        if (p->i < n && (b[p->i] == '+' || b[p->i] == '-')) {
            p->i++;
        }
        if (p->i >= n || b[p->i] < '0' || b[p->i] > '9') {
            return fail_at(p, "invalid number");
        }
        while (p->i < n && b[p->i] >= '0' && b[p->i] <= '9') {
            p->i++;
        }
    }
    return 0;
}

static int lit(parser *p, const char *s) {
    size_t len = strlen(s);
    if (p->n - p->i < len || memcmp(p->b + p->i, s, len) != 0) {
        return fail_at(p, "invalid literal");
    }
    p->i += len;
    return 0;
}

/*
 * The skipper of ignored values keeps its position in a local (a register)
 * and passes it along, instead of reading and writing p->i in memory at
 * every step: under wazero each of those is a bounds-checked load or store.
 * It returns the position after the value, or BAD with the reason in p->err;
 * its failures and their byte positions are those of the field-by-field
 * parser (p->i is set to the position before each fail_at), and anything
 * but a plain string goes to str itself.
 */
#define BAD ((size_t)-1)

static size_t bad_at(parser *p, size_t i, const char *what) {
    p->i = i;
    (void)fail_at(p, what);
    return BAD;
}

static inline size_t skip_ws(const uint8_t *b, size_t n, size_t i) {
    if (i < n && b[i] > ' ') {
        return i;
    }
    while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r')) {
        i++;
    }
    return i;
}

/* scan_str steps over the string at b[i] (a '"'): a plain one here, any
 * other through str (which also sets p->esc). */
static inline size_t scan_str(parser *p, const uint8_t *b, size_t n, size_t i) {
    size_t j = plain_run(b, i + 1, n);
    if (j < n && b[j] == '"') {
        return j + 1;
    }
    p->i = i;
    return str(p, NULL) == 0 ? p->i : BAD;
}

static size_t skip_value(parser *p, const uint8_t *b, size_t n, size_t i, int depth);

/* skip_object steps over the object at b[i] (a '{') at level depth. */
static size_t skip_object(parser *p, const uint8_t *b, size_t n, size_t i, int depth) {
    if (depth > MAX_DEPTH) {
        return bad_at(p, i, "nesting deeper than 64");
    }
    i = skip_ws(b, n, i + 1);
    if (i < n && b[i] == '}') {
        return i + 1;
    }
    for (;;) {
        i = skip_ws(b, n, i);
        if (i >= n || b[i] != '"') {
            return bad_at(p, i, "expected a string key");
        }
        if ((i = scan_str(p, b, n, i)) == BAD) {
            return BAD;
        }
        i = skip_ws(b, n, i);
        if (i >= n || b[i] != ':') {
            return bad_at(p, i, "expected ':'");
        }
        if ((i = skip_value(p, b, n, i + 1, depth + 1)) == BAD) {
            return BAD;
        }
        i = skip_ws(b, n, i);
        if (i >= n) {
            return bad_at(p, i, "unterminated object");
        }
        if (b[i] == ',') {
            i++;
        } else if (b[i] == '}') {
            return i + 1;
        } else {
            return bad_at(p, i, "expected ',' or '}'");
        }
    }
}

/* skip_value steps over any JSON value (whitespace first) at level depth. */
static size_t skip_value(parser *p, const uint8_t *b, size_t n, size_t i, int depth) {
    i = skip_ws(b, n, i);
    if (i >= n) {
        return bad_at(p, i, "unexpected end of value");
    }
    uint8_t c = b[i];
    int is_int;
    switch (c) {
    case '"':
        return scan_str(p, b, n, i);
    case '{':
        return skip_object(p, b, n, i, depth);
    case '[':
        if (depth > MAX_DEPTH) {
            return bad_at(p, i, "nesting deeper than 64");
        }
        i = skip_ws(b, n, i + 1);
        if (i < n && b[i] == ']') {
            return i + 1;
        }
        for (;;) {
            if ((i = skip_value(p, b, n, i, depth + 1)) == BAD) {
                return BAD;
            }
            i = skip_ws(b, n, i);
            if (i >= n) {
                return bad_at(p, i, "unterminated array");
            }
            if (b[i] == ',') {
                i++;
            } else if (b[i] == ']') {
                return i + 1;
            } else {
                return bad_at(p, i, "expected ',' or ']'");
            }
        }
    case 't':
    case 'f':
    case 'n':
        p->i = i;
        return lit(p, c == 't' ? "true" : c == 'f' ? "false" : "null") == 0 ? p->i : BAD;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            p->i = i;
            return number(p, &is_int) == 0 ? p->i : BAD;
        }
        return bad_at(p, i, "unexpected character");
    }
}

/* value reads and validates any JSON value at p->i; depth is the level an
 * object or array here would have. */
static int value(parser *p, int depth) {
    size_t e = skip_value(p, p->b, p->n, p->i, depth);
    if (e == BAD) {
        return -1;
    }
    p->i = e;
    return 0;
}

/*
 * member reads one member's value. Plain objects validate it (ctx NULL);
 * the top-level object and customer pick their fields.
 */
typedef int (*member_fn)(parser *p, void *ctx, int depth, const uint8_t *key, size_t len);

/*
 * object reads an object at p->i (which is '{') at nesting level depth.
 * When keys is not NULL every key is checked against it for duplicates.
 */
ALWAYS_INLINE int object(parser *p, int depth, keyset *keys, member_fn member, void *ctx) {
    /* The position in a local between the member calls (which read and
     * set p->i), as in skip_object; failures are reported where p->i was. */
    const uint8_t *b = p->b;
    size_t n = p->n, i = p->i;
    if (depth > MAX_DEPTH) {
        return fail_at(p, "nesting deeper than 64");
    }
    i = skip_ws(b, n, i + 1); /* past '{' */
    if (i < n && b[i] == '}') {
        p->i = i + 1;
        return 0;
    }
    for (;;) {
        i = skip_ws(b, n, i);
        if (i >= n || b[i] != '"') {
            bad_at(p, i, "expected a string key");
            return -1;
        }
        /* Validate the key in place; decode it only if it has an escape. */
        size_t at = i;
        p->esc = 0;
        if ((i = scan_str(p, b, n, at)) == BAD) {
            return -1;
        }
        uint32_t off = (uint32_t)(at + 1), in_arena = (uint32_t)p->esc;
        const uint8_t *key = b + off;
        size_t klen = i - 1 - off;
        if (in_arena) {
            off = (uint32_t)keys->arena.len;
            p->i = at;
            if (str(p, &keys->arena) != 0) { /* only out of memory */
                return -1;
            }
            key = keys->arena.data + off;
            klen = keys->arena.len - off;
        }
        /* keyset_add never moves the arena, so key stays valid. */
        int added = keyset_add(keys, off, (uint32_t)klen, in_arena);
        if (added < 0) {
            p->i = i;
            return fail_oom(p);
        }
        if (!added) {
            p->err->len = 0;
            err_str(p->err, "duplicate key ");
            (void)downgrade_append_string(p->err, key, klen > 64 ? 64 : klen);
            return -2; /* the caller says where */
        }
        i = skip_ws(b, n, i);
        if (i >= n || b[i] != ':') {
            bad_at(p, i, "expected ':'");
            return -1;
        }
        p->i = i + 1;
        if (member(p, ctx, depth, key, klen) != 0) {
            return -1;
        }
        i = skip_ws(b, n, p->i);
        if (i >= n) {
            bad_at(p, i, "unterminated object");
            return -1;
        }
        if (b[i] == ',') {
            i++;
        } else if (b[i] == '}') {
            p->i = i + 1;
            return 0;
        } else {
            bad_at(p, i, "expected ',' or '}'");
            return -1;
        }
    }
}

/*
 * kept_string reads a string value and sets r to its range: of the input
 * when it has no escape (no copy), else of p->s, where it is decoded.
 */
ALWAYS_INLINE int kept_string(parser *p, const char *field, size_t r[3]) {
    ws(p);
    if (p->i >= p->n || p->b[p->i] != '"') {
        if (value(p, 2) != 0) {
            return -1;
        }
        p->err->len = 0;
        err_str(p->err, field);
        err_str(p->err, " is not a string");
        return -1;
    }
    size_t at = p->i;
    p->esc = 0;
    if ((p->i = scan_str(p, p->b, p->n, at)) == BAD) {
        return -1;
    }
    if (!p->esc) {
        r[0] = at + 1;
        r[1] = p->i - 1;
        r[2] = 0;
        return 0;
    }
    /* It has an escape: decode it (a second pass, which can only run out of
     * memory: the first one validated it). */
    p->i = at;
    r[0] = p->s->len;
    if (str(p, p->s) != 0) {
        return -1;
    }
    r[1] = p->s->len;
    r[2] = 1;
    return 0;
}

/* integer reads an integer literal that fits int64. */
static int integer(parser *p, int64_t *out) {
    ws(p);
    size_t start = p->i;
    if (p->i >= p->n || (p->b[p->i] != '-' && (p->b[p->i] < '0' || p->b[p->i] > '9'))) {
        if (value(p, 2) != 0) {
            return -1;
        }
        return fail(p, "amount_cents is not a number");
    }
    int is_int;
    if (number(p, &is_int) != 0) {
        return -1;
    }
    if (!is_int) {
        return fail(p, "amount_cents is not an integer");
    }
    const uint8_t *d = p->b + start;
    size_t len = p->i - start;
    int neg = d[0] == '-';
    if (neg) {
        d++;
        len--;
    }
    uint64_t u = 0;
    for (size_t k = 0; k < len; k++) {
        uint64_t v = (uint64_t)(d[k] - '0');
        if (u > (UINT64_MAX - v) / 10) {
            return fail(p, "amount_cents does not fit int64");
        }
        u = u * 10 + v;
    }
    if (neg && u <= (uint64_t)1 << 63) {
        *out = (int64_t)(0 - u);
        return 0;
    }
    if (!neg && u < (uint64_t)1 << 63) {
        *out = (int64_t)u;
        return 0;
    }
    return fail(p, "amount_cents does not fit int64");
}

static int customer_member(parser *p, void *ctx, int depth, const uint8_t *key, size_t len) {
    order *o = ctx;
    if (len == 2 && key[0] == 'i' && key[1] == 'd') {
        o->seen |= 16; /* customer.id found */
        return kept_string(p, "customer.id", o->customer_id);
    }
    return value(p, depth + 1);
}

static int customer(parser *p, order *o) {
    ws(p);
    if (p->i >= p->n || p->b[p->i] != '{') {
        return fail_at(p, "customer is not an object");
    }
    keyset_reset(&customer_keys, p->b);
    int rc = object(p, 2, &customer_keys, customer_member, o);
    if (rc == -2) {
        err_str(p->err, " in customer");
        return -1;
    }
    if (rc != 0) {
        return -1;
    }
    if (!(o->seen & 16)) {
        return fail(p, "missing customer.id");
    }
    return 0;
}

/*
 * key_is reports whether key[0:n] is the literal lit of litn (8 to 16) bytes:
 * two overlapping 8-byte compares, which with a constant lit are two loads
 * and compares; memcmp would be a call of wasi-libc's byte loop.
 */
static inline int key_is(const uint8_t *key, size_t n, const char *lit, size_t litn) {
    uint64_t a, b, c, d;
    if (n != litn) {
        return 0;
    }
    memcpy(&a, key, 8);
    memcpy(&b, lit, 8);
    memcpy(&c, key + n - 8, 8);
    memcpy(&d, lit + n - 8, 8);
    return a == b && c == d;
}
#define KEY_IS(k, n, lit) key_is((k), (n), (lit), sizeof(lit) - 1)

static int top_member(parser *p, void *ctx, int depth, const uint8_t *key, size_t len) {
    order *o = ctx;
    if (KEY_IS(key, len, "order_id")) {
        o->seen |= SEEN_ORDER_ID;
        return kept_string(p, "order_id", o->order_id);
    }
    if (KEY_IS(key, len, "currency")) {
        o->seen |= SEEN_CURRENCY;
        return kept_string(p, "currency", o->currency);
    }
    if (KEY_IS(key, len, "amount_cents")) {
        o->seen |= SEEN_AMOUNT;
        return integer(p, &o->amount);
    }
    if (KEY_IS(key, len, "customer")) {
        o->seen |= SEEN_CUSTOMER;
        return customer(p, o);
    }
    return value(p, depth + 1);
}

static int top(parser *p, order *o) {
    ws(p);
    if (p->i >= p->n) {
        return fail_at(p, "empty value");
    }
    if (p->b[p->i] != '{') {
        return fail_at(p, "value is not a JSON object");
    }
    keyset_reset(&top_keys, p->b);
    int rc = object(p, 1, &top_keys, top_member, o);
    if (rc != 0) {
        return -1; /* -2 (duplicate) already has its message */
    }
    ws(p);
    if (p->i != p->n) {
        return fail_at(p, "data after the JSON object");
    }
    if (!(o->seen & SEEN_ORDER_ID)) {
        return fail(p, "missing order_id");
    }
    if (!(o->seen & SEEN_CUSTOMER)) {
        return fail(p, "missing customer");
    }
    if (!(o->seen & SEEN_AMOUNT)) {
        return fail(p, "missing amount_cents");
    }
    if (!(o->seen & SEEN_CURRENCY)) {
        return fail(p, "missing currency");
    }
    return 0;
}

/* ---- writer -------------------------------------------------------------- */

int downgrade_append_string(streamd_buf *dst, const uint8_t *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    /* Worst case: every byte becomes \u00xx. */
    if (n > (SIZE_MAX - 2) / 6 || streamd_buf_reserve(dst, 2 + 6 * n) != STREAMD_OK) {
        return -1;
    }
    uint8_t *w = dst->data + dst->len;
    *w++ = '"';
    for (size_t i = 0; i < n; i++) {
        /* Eight bytes at a time while none needs an escape (a '"', '\\' or
         * byte below 0x20; see special_bytes, here without the >= 0x80 term:
         * non-ASCII is copied raw). There is room: 6 * n were reserved. */
        while (n - i >= 8) {
            const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
            uint64_t v;
            memcpy(&v, s + i, 8);
            uint64_t q = v ^ (ones * '"'), bs = v ^ (ones * '\\');
            uint64_t m = (((q - ones) & ~q) | ((bs - ones) & ~bs) | ((v - ones * 0x20) & ~v)) & high;
            if (m) {
                size_t k = (size_t)(__builtin_ctzll(m) >> 3); /* the first that does */
                memcpy(w, s + i, k);
                w += k;
                i += k;
                break;
            }
            memcpy(w, &v, 8);
            w += 8;
            i += 8;
        }
        if (i == n) {
            break;
        }
        uint8_t c = s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *w++ = c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '"':
        case '\\':
            *w++ = c;
            break;
        case '\b':
            *w++ = 'b';
            break;
        case '\f':
            *w++ = 'f';
            break;
        case '\n':
            *w++ = 'n';
            break;
        case '\r':
            *w++ = 'r';
            break;
        case '\t':
            *w++ = 't';
            break;
        default:
            *w++ = 'u';
            *w++ = '0';
            *w++ = '0';
            *w++ = (uint8_t)hex[c >> 4];
            *w++ = (uint8_t)hex[c & 15];
        }
    }
    *w++ = '"';
    dst->len = (size_t)(w - dst->data);
    return STREAMD_OK;
}

/* put_lit writes the literal s (at most 16 bytes and a constant: two
 * stores) at w and returns the end. */
#define PUT_LIT(w, s) (memcpy((w), (s), sizeof(s) - 1), (w) + sizeof(s) - 1)

/*
 * put_field writes a kept string at w as a JSON string and returns the end.
 * A string read from the input without an escape is its own minimal JSON
 * text: str stopped it at its closing '"', found no '\\' and refused bytes
 * below 0x20, and bytes of 0x80 and up are written raw; so it is copied
 * between quotes. A decoded one (it had an escape) goes through the escaper.
 */
ALWAYS_INLINE uint8_t *put_field(streamd_buf *dst, uint8_t *w, const uint8_t *s, size_t n, int decoded) {
    if (!decoded) {
        *w = '"';
        streamd_copy(w + 1, s, n);
        w[n + 1] = '"';
        return w + n + 2;
    }
    dst->len = (size_t)(w - dst->data);
    (void)downgrade_append_string(dst, s, n); /* room reserved: cannot fail */
    return dst->data + dst->len;
}

/* put_int writes v in decimal at w and returns the end. */
static uint8_t *put_int(uint8_t *w, int64_t v) {
    char d[20];
    int n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        d[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) {
        *w++ = '-';
    }
    while (n) {
        *w++ = (uint8_t)d[--n];
    }
    return w;
}

int downgrade_value(streamd_buf *dst, streamd_buf *scratch, streamd_bytes in, streamd_buf *err) {
    if (in.data == NULL) {
        err->len = 0;
        err_str(err, "null value");
        return -1;
    }
    scratch->len = 0;
    parser p = {in.data, in.len, 0, scratch, err, 0, 0};
    order o;
    memset(&o, 0, sizeof o);
    if (top(&p, &o) != 0) {
        return p.oom ? -2 : -1;
    }
    /* One reservation for the whole value: the 56 bytes of keys and
     * punctuation, 20 for the number and each string's worst case (2 + its
     * length raw, 2 + 6 bytes per byte through the escaper). */
    size_t need = 56 + 20, f[3][2];
    const size_t *fields[3] = {o.order_id, o.customer_id, o.currency};
    for (int k = 0; k < 3; k++) {
        size_t n = fields[k][1] - fields[k][0];
        if (n > (SIZE_MAX / 4 - need) / 6) {
            need = SIZE_MAX;
            break;
        }
        need += 2 + (fields[k][2] ? 6 * n : n);
        f[k][0] = fields[k][0];
        f[k][1] = n;
    }
    if (need == SIZE_MAX || streamd_buf_reserve(dst, need) != STREAMD_OK) {
        err->len = 0;
        err_str(err, "out of memory");
        return -2;
    }
    /* A field's bytes: in the input, or decoded in scratch. */
#define FIELD(k) (fields[k][2] ? scratch->data : in.data) + f[k][0], f[k][1], (int)fields[k][2]
    uint8_t *w = dst->data + dst->len;
    w = PUT_LIT(w, "{\"order_id\":");
    w = put_field(dst, w, FIELD(0));
    w = PUT_LIT(w, ",\"customer_id\":");
    w = put_field(dst, w, FIELD(1));
    w = PUT_LIT(w, ",\"amount_cents\":");
    w = put_int(w, o.amount);
    w = PUT_LIT(w, ",\"currency\":");
    w = put_field(dst, w, FIELD(2));
    *w++ = '}';
#undef FIELD
    dst->len = (size_t)(w - dst->data);
    return 0;
}
