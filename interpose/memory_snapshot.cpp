#include "memory_snapshot.h"

#include "driver_api.h"
#include "stats.h"

#include <capnp/message.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kcap {

namespace {

// Adds the time until it goes out of scope to the snapshot profile
// (stats.h), when that is counted.
class PhaseTimer {
public:
    explicit PhaseTimer(SnapshotTime what) : what_(what), counting_(counting())
    {
        if (counting_) {
            start_ = std::chrono::steady_clock::now();
        }
    }
    ~PhaseTimer()
    {
        if (counting_) {
            const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
            count_snapshot_time(what_, static_cast<uint64_t>(ns.count()));
        }
    }
    PhaseTimer(const PhaseTimer&) = delete;
    PhaseTimer& operator=(const PhaseTimer&) = delete;

private:
    SnapshotTime what_;
    bool counting_;
    std::chrono::steady_clock::time_point start_;
};

}  // namespace

StagingPool::Lease::~Lease()
{
    if (data_ != nullptr) {
        std::lock_guard lock(pool_->mutex_);
        pool_->free_.push_back(data_);
    }
}

StagingPool::Lease StagingPool::acquire()
{
    {
        std::lock_guard lock(mutex_);
        if (!free_.empty()) {
            uint8_t* data = free_.back();
            free_.pop_back();
            return Lease(*this, data);
        }
    }
    const PhaseTimer timer(SnapshotTime::kStaging);
    count_staging_buffer_made();
    void* memory = nullptr;
    const auto hostAlloc = driverApi().memHostAlloc;
    if (hostAlloc == nullptr || hostAlloc(&memory, bufferBytes_, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS ||
        memory == nullptr) {
        memory = std::aligned_alloc(4096, bufferBytes_);
        if (memory == nullptr) {
            throw std::bad_alloc();
        }
    }
    return Lease(*this, static_cast<uint8_t*>(memory));
}

void StoredContent::writeTo(schema::Content::Builder out) const
{
    out.setSize(size);
    out.setPieceSize(pieceSize);
    auto list = out.initPieces(static_cast<unsigned>(pieces.size()));
    for (unsigned i = 0; i < pieces.size(); ++i) {
        list[i].setHigh(pieces[i].high);
        list[i].setLow(pieces[i].low);
    }
}

namespace {

// Stores one staged chunk of a range and appends its pieces to `out`.
void storeChunk(format::TraceWriter& writer, capnp::MallocMessageBuilder& scratch, const uint8_t* data, size_t size,
                StoredContent& out)
{
    const PhaseTimer timer(SnapshotTime::kStore);
    count_snapshot_chunk();
    auto content = scratch.initRoot<schema::Content>();
    writer.storeContent(data, size, content);
    for (const auto piece : content.asReader().getPieces()) {
        out.pieces.push_back({piece.getHigh(), piece.getLow()});
    }
}

// The calling thread's own stream in the current context, for the
// recorder's asynchronous copies: non-blocking, so that it never orders
// itself with the program's work (the recorder has synchronized what it
// snapshots). nullptr when the driver cannot make one. A few contexts per
// thread are remembered; a stream whose context is gone fails its first copy
// and is forgotten (forgetSnapshotStream).
struct ThreadStream {
    uint64_t context;
    CUstream stream;
};
constexpr size_t kThreadStreams = 4;
thread_local ThreadStream t_streams[kThreadStreams] = {};  // trivially destructible

CUstream snapshotStream()
{
    const uint64_t context = currentContext();
    const DriverApi& api = driverApi();
    if (context == 0 || api.streamCreate == nullptr || api.memcpyDtoHAsync == nullptr) {
        return nullptr;
    }
    for (const ThreadStream& known : t_streams) {
        if (known.context == context && known.stream != nullptr) {
            return known.stream;
        }
    }
    CUstream stream = nullptr;
    if (api.streamCreate(&stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
        return nullptr;
    }
    for (ThreadStream& slot : t_streams) {
        if (slot.stream == nullptr) {
            slot = {context, stream};
            return stream;
        }
    }
    t_streams[0] = {context, stream};  // full: the first one is left to the driver
    return stream;
}

void forgetSnapshotStream(CUstream stream)
{
    for (ThreadStream& slot : t_streams) {
        if (slot.stream == stream) {
            slot = {};
        }
    }
}

// One staging buffer at a time, copy then store, in series: host-mapped
// memory, or when asynchronous copies are not possible.
CUresult snapshotInSeries(format::TraceWriter& writer, StagingPool& staging, const SnapshotRange& range,
                          StoredContent& out, std::vector<uint8_t>* hostCopy)
{
    const bool hostMapped = range.kind == schema::MemoryKind::HOST_MAPPED;
    const auto copy = driverApi().memcpyDtoH;
    if (!hostMapped && copy == nullptr) {
        return CUDA_ERROR_NOT_FOUND;
    }
    StagingPool::Lease buffer = staging.acquire();
    capnp::MallocMessageBuilder scratch(256);
    for (uint64_t done = 0; done < range.size;) {
        const size_t chunk = static_cast<size_t>(std::min<uint64_t>(buffer.size(), range.size - done));
        if (hostMapped) {
            std::memcpy(buffer.data(), reinterpret_cast<const void*>(range.address + done), chunk);
        } else {
            const PhaseTimer timer(SnapshotTime::kCopyWait);
            if (const CUresult r = copy(buffer.data(), range.address + done, chunk); r != CUDA_SUCCESS) {
                return r;
            }
        }
        storeChunk(writer, scratch, buffer.data(), chunk, out);
        if (hostCopy != nullptr) {
            std::memcpy(hostCopy->data() + done, buffer.data(), chunk);
        }
        done += chunk;
    }
    return CUDA_SUCCESS;
}

CUresult waitForCopies(CUstream stream)
{
    const PhaseTimer timer(SnapshotTime::kCopyWait);
    return driverApi().streamSynchronize(stream);
}

// Waits for the stream when it goes out of scope: a staging buffer goes
// back to its pool only once no copy is landing in it.
class StreamDrain {
public:
    explicit StreamDrain(CUstream stream) : stream_(stream) {}
    ~StreamDrain() { driverApi().streamSynchronize(stream_); }
    StreamDrain(const StreamDrain&) = delete;
    StreamDrain& operator=(const StreamDrain&) = delete;

private:
    CUstream stream_;
};

}  // namespace

// Two staging buffers: the copy of chunk k+1 runs while chunk k is hashed
// and stored (on the writer's hashing threads), so a large snapshot moves at
// the slower of the device-to-host copy and the hashing, not their sum.
CUresult snapshot(format::TraceWriter& writer, StagingPool& staging, const SnapshotRange& range,
                  StoredContent& out, std::vector<uint8_t>* hostCopy)
{
    count_snapshot_range(range.size);
    out.size = range.size;
    out.pieceSize = writer.pieceSize();
    out.pieces.clear();
    out.pieces.reserve(range.size / out.pieceSize + 1);
    if (hostCopy != nullptr) {
        hostCopy->resize(range.size);
    }
    const DriverApi& api = driverApi();
    const bool overlap = range.kind != schema::MemoryKind::HOST_MAPPED && range.size > staging.bufferBytes() &&
                         api.streamSynchronize != nullptr;
    CUstream stream = overlap ? snapshotStream() : nullptr;
    if (stream == nullptr) {
        return snapshotInSeries(writer, staging, range, out, hostCopy);
    }
    StagingPool::Lease first = staging.acquire();
    StagingPool::Lease second = staging.acquire();
    uint8_t* const buffers[2] = {first.data(), second.data()};
    const uint64_t bufferBytes = staging.bufferBytes();
    auto chunkAt = [&](uint64_t offset) { return static_cast<size_t>(std::min(bufferBytes, range.size - offset)); };

    if (api.memcpyDtoHAsync(buffers[0], range.address, chunkAt(0), stream) != CUDA_SUCCESS) {
        // A stream of a context that is gone, most likely: once more in series.
        forgetSnapshotStream(stream);
        return snapshotInSeries(writer, staging, range, out, hostCopy);
    }
    const StreamDrain drain(stream);
    capnp::MallocMessageBuilder scratch(256);
    size_t slot = 0;
    for (uint64_t done = 0; done < range.size; slot ^= 1) {
        const size_t chunk = chunkAt(done);
        if (const CUresult r = waitForCopies(stream); r != CUDA_SUCCESS) {
            return r;
        }
        const uint64_t next = done + chunk;
        if (next < range.size) {
            if (const CUresult r = api.memcpyDtoHAsync(buffers[slot ^ 1], range.address + next, chunkAt(next), stream);
                r != CUDA_SUCCESS) {
                return r;
            }
        }
        storeChunk(writer, scratch, buffers[slot], chunk, out);
        if (hostCopy != nullptr) {
            std::memcpy(hostCopy->data() + done, buffers[slot], chunk);
        }
        done = next;
    }
    return CUDA_SUCCESS;
}

}  // namespace kcap
