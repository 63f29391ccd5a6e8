// Snapshots of device memory: a range is copied to the host with the real
// driver and stored in the trace as content pieces (identical pieces are
// stored once per file). A large range is copied asynchronously, a staging
// buffer at a time on the thread's own stream, while the previous buffer is
// hashed and stored.
//
// Staging buffers are pinned (cuMemHostAlloc) where the driver allows, for
// full device-to-host bandwidth, else plain host memory. They are reused,
// never freed: a pool holds two per thread that snapshotted concurrently,
// and those lent to the trace writer, which keeps the new pieces it holds
// until they are compressed instead of copying them (up to a limit: the
// writer's own bound on what waits to be written).
#pragma once

#include "hash.h"
#include "kcap.capnp.h"
#include "trace_writer.h"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace kcap {

class StagingPool {
    struct Shared;  // the free buffers: outlives the pool while the writer holds lent ones

public:
    // Buffers of `bufferBytes` (a multiple of the trace's piece size, so
    // that the pieces of a range do not depend on how it was staged); at
    // most `lendLimit` bytes of them lent at a time.
    StagingPool(size_t bufferBytes, size_t lendLimit);
    StagingPool(const StagingPool&) = delete;
    StagingPool& operator=(const StagingPool&) = delete;

    class Lease {
    public:
        Lease(std::shared_ptr<Shared> pool, size_t size, uint8_t* data)
            : pool_(std::move(pool)), size_(size), data_(data)
        {
        }
        Lease(Lease&& other) noexcept
            : pool_(std::move(other.pool_)), size_(other.size_), data_(std::exchange(other.data_, nullptr))
        {
        }
        Lease& operator=(Lease&& other) noexcept;
        Lease(const Lease&) = delete;
        Lease& operator=(const Lease&) = delete;
        ~Lease();
        uint8_t* data() const { return data_; }  // nullptr once lent
        size_t size() const { return size_; }

    private:
        friend class StagingPool;
        std::shared_ptr<Shared> pool_;
        size_t size_;
        uint8_t* data_;
    };

    Lease acquire();  // throws std::bad_alloc when no memory at all

    // Gives the lease's buffer to whoever holds the returned owner (and its
    // copies): it comes back to the pool when the last of them goes. Null,
    // leaving the lease as it was, when the lend limit would be passed.
    // Throws std::bad_alloc (the buffer back in the pool) when out of memory.
    std::shared_ptr<const void> lend(Lease& lease);

    size_t bufferBytes() const { return bufferBytes_; }

private:
    const size_t bufferBytes_;
    const size_t lendLimit_;
    std::shared_ptr<Shared> shared_;
};

// What a snapshot stored: Content fields, ready to be copied into an event.
struct StoredContent {
    uint64_t size = 0;
    uint32_t pieceSize = 0;
    std::vector<format::Hash128> pieces;

    void writeTo(schema::Content::Builder out) const;
};

struct SnapshotRange {
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t allocationBase = 0;
    schema::MemoryKind kind = schema::MemoryKind::ALLOCATION;
};

// Copies `range` from the device (host-mapped memory: read directly) and
// stores it. When `hostCopy` is given, the bytes are also left there (for
// scanning small buffers for pointers). Returns the first failing copy's
// result (the content is then incomplete and must not be used).
CUresult snapshot(format::TraceWriter& writer, StagingPool& staging, const SnapshotRange& range,
                  StoredContent& out, std::vector<uint8_t>* hostCopy);

}  // namespace kcap
