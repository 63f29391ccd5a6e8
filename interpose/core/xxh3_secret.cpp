// XXH3's default secret, from the xxHash header itself (its implementation
// is only visible inline), for xxh3_long.h's callers.
#include "xxh3_long.h"

#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kcap::xxh3 {

static_assert(sizeof(XXH3_kSecret) == kSecretSize, "xxhash.h's default secret is not XXH3's 192 bytes");

Secret defaultSecret() {
  Secret secret;
  std::memcpy(secret.bytes, XXH3_kSecret, kSecretSize);
  return secret;
}

}  // namespace kcap::xxh3
