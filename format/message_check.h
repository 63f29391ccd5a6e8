// Deep validation of an event message before any consumer sees it.
//
// Cap'n Proto checks pointers lazily, when a field is read: a malformed
// message (a Text without its NUL, a list where a struct should be) throws
// kj::Exception from inside whatever consumer reads that field. The reader
// instead reads every pointer field of every event once, as the schema
// types it (scalars cannot be malformed), inside its own error handling;
// consumers then never meet a malformed message.
#pragma once

#include <string>

#include "kcap.capnp.h"

namespace kcap::format {

// Reads every pointer field reachable from `event` as its schema type says.
// Throws kj::Exception on the first malformed one.
void checkEventFields(schema::Event::Reader event);

// The schema's invariants of a launch's parameter buffer, which every consumer
// that indexes `params` relies on: each paramLayout entry and each pointer word
// (8 bytes) lies inside `params`. Offsets and sizes are 32-bit fields whose sum
// can wrap in 32 bits, so they are checked here in 64. The reader does not
// reject such an event (dump and info still show it); replay refuses to build
// its parameters and `kcap check` reports it. Returns "" when they hold, else
// what is wrong, naming the entry and its values.
std::string launchParamProblem(schema::Launch::Reader launch);

}  // namespace kcap::format
