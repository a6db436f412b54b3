/* MurmurHash3_x86_32 (Austin Appleby, public domain): the hash of
 * scikit-learn's FeatureHasher (sklearn.utils.murmurhash3_32, which runs
 * this same function), so that a feature hashed here lands in FeatureHasher's
 * column with FeatureHasher's sign. Little-endian reads as the reference's
 * getblock32 does on x86; memcpy keeps unaligned keys legal C (compilers
 * turn it into one load). */
#ifndef STREAMFIT_MURMUR_H
#define STREAMFIT_MURMUR_H
#include <stdint.h>
#include <string.h>

static inline uint32_t sf_rotl32(uint32_t x, int r) {
    return (x << r) | (x >> (32 - r));
}

static inline uint32_t sf_fmix32(uint32_t h) {
    h ^= h >> 16;
    h *= 0x85ebca6bU;
    h ^= h >> 13;
    h *= 0xc2b2ae35U;
    h ^= h >> 16;
    return h;
}

static inline uint32_t sf_load32le(const unsigned char *p) {
    /* the block's 4 bytes as a little-endian integer on any host */
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) |
           ((uint32_t) p[3] << 24);
}

static inline int32_t sf_murmurhash3_32(const void *key, ptrdiff_t len, uint32_t seed) {
    /* MurmurHash3_x86_32 of len bytes at key, as a signed 32-bit value
     * (murmurhash3_32(..., positive=False)) */
    const unsigned char *data = (const unsigned char *) key;
    const ptrdiff_t nblocks = len / 4;
    const uint32_t c1 = 0xcc9e2d51U, c2 = 0x1b873593U;
    uint32_t h1 = seed, k1;
    ptrdiff_t i;
    const unsigned char *tail;
    for (i = 0; i < nblocks; i++) {
        k1 = sf_load32le(data + 4 * i);
        k1 *= c1;
        k1 = sf_rotl32(k1, 15);
        k1 *= c2;
        h1 ^= k1;
        h1 = sf_rotl32(h1, 13);
        h1 = h1 * 5 + 0xe6546b64U;
    }
    tail = data + nblocks * 4;
    k1 = 0;
    switch (len & 3) {
    case 3: k1 ^= (uint32_t) tail[2] << 16; /* fall through */
    case 2: k1 ^= (uint32_t) tail[1] << 8;  /* fall through */
    case 1: k1 ^= tail[0];
        k1 *= c1;
        k1 = sf_rotl32(k1, 15);
        k1 *= c2;
        h1 ^= k1;
    }
    h1 ^= (uint32_t) len;
    h1 = sf_fmix32(h1);
    return (int32_t) h1;
}

static inline void sf_hash_column(int32_t h, ptrdiff_t n_features, int alternate_sign,
                                  int32_t *column, double *sign) {
    /* FeatureHasher's column abs(h) % n_features (abs(-2^31) taken as
     * 2^31 - 1 - (n_features - 1) before the modulo, as it does) and its
     * sign, +1 for h >= 0 else -1 (1 without alternate_sign) */
    int64_t a = h == INT32_MIN ? (int64_t) 2147483647 - (n_features - 1)
                               : (h < 0 ? -(int64_t) h : (int64_t) h);
    /* (a and n_features are in [0, 2^31): the same remainder by a mask when
     * n_features is a power of two, the usual case, else by a 32-bit
     * division; a 64-bit division is a few tens of cycles a feature) */
    if ((n_features & (n_features - 1)) == 0)
        *column = (int32_t) (a & (n_features - 1));
    else
        *column = (int32_t) ((uint32_t) a % (uint32_t) n_features);
    *sign = (alternate_sign && h < 0) ? -1.0 : 1.0;
}

#endif
