// Deep validation of an event message before any consumer sees it.
//
// Cap'n Proto checks pointers lazily, when a field is read: a malformed
// message (a Text without its NUL, a list where a struct should be) throws
// kj::Exception from inside whatever consumer reads that field. The reader
// instead reads every field of every event once, through the schema, inside
// its own error handling; consumers then never meet a malformed message.
#pragma once

#include "kcap.capnp.h"

namespace kcap::format {

// Reads every field reachable from `event` as its schema type says.
// Throws kj::Exception on the first malformed one.
void checkEventFields(schema::Event::Reader event);

}  // namespace kcap::format
