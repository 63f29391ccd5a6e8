// XXH3's default secret, from the xxHash header itself (its implementation
// is only visible inline), for xxh3_long.h's callers.
#include "xxh3_long.h"

#include <cstring>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#define XXH_INLINE_ALL
#include <xxhash.h>
#pragma GCC diagnostic pop

namespace kcap::xxh3 {

static_assert(sizeof(XXH3_kSecret) == kSecretSize, "xxhash.h's default secret is not XXH3's 192 bytes");

Secret defaultSecret()
{
    Secret secret;
    std::memcpy(secret.bytes, XXH3_kSecret, kSecretSize);
    return secret;
}

}  // namespace kcap::xxh3
