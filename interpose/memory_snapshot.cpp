#include "memory_snapshot.h"

#include "driver_api.h"

#include <capnp/message.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kcap {

struct StagingPool::Shared {
    std::mutex mutex;
    std::vector<uint8_t*> free;
    size_t lentBytes = 0;

    void giveBack(uint8_t* data)
    {
        std::lock_guard lock(mutex);
        free.push_back(data);
    }
};

StagingPool::StagingPool(size_t bufferBytes, size_t lendLimit)
    : bufferBytes_(bufferBytes), lendLimit_(lendLimit), shared_(std::make_shared<Shared>())
{
}

StagingPool::Lease::~Lease()
{
    if (data_ != nullptr) {
        pool_->giveBack(data_);
    }
}

StagingPool::Lease& StagingPool::Lease::operator=(Lease&& other) noexcept
{
    if (this != &other) {
        if (data_ != nullptr) {
            pool_->giveBack(data_);
        }
        pool_ = std::move(other.pool_);
        size_ = other.size_;
        data_ = std::exchange(other.data_, nullptr);
    }
    return *this;
}

StagingPool::Lease StagingPool::acquire()
{
    {
        std::lock_guard lock(shared_->mutex);
        if (!shared_->free.empty()) {
            uint8_t* data = shared_->free.back();
            shared_->free.pop_back();
            return Lease(shared_, bufferBytes_, data);
        }
    }
    void* memory = nullptr;
    const auto hostAlloc = driverApi().memHostAlloc;
    if (hostAlloc == nullptr || hostAlloc(&memory, bufferBytes_, CU_MEMHOSTALLOC_PORTABLE) != CUDA_SUCCESS ||
        memory == nullptr) {
        memory = std::aligned_alloc(4096, bufferBytes_);
        if (memory == nullptr) {
            throw std::bad_alloc();
        }
    }
    return Lease(shared_, bufferBytes_, static_cast<uint8_t*>(memory));
}

std::shared_ptr<const void> StagingPool::lend(Lease& lease)
{
    {
        std::lock_guard lock(shared_->mutex);
        if (lease.data_ == nullptr || shared_->lentBytes + bufferBytes_ > lendLimit_) {
            return nullptr;
        }
        shared_->lentBytes += bufferBytes_;
    }
    uint8_t* data = std::exchange(lease.data_, nullptr);
    auto giveBack = [shared = shared_, bytes = bufferBytes_](const void* lent) {
        std::lock_guard lock(shared->mutex);
        shared->free.push_back(static_cast<uint8_t*>(const_cast<void*>(lent)));
        shared->lentBytes -= bytes;
    };
    // Should the control block's allocation throw, shared_ptr gives the buffer back first.
    return std::shared_ptr<const void>(data, giveBack);
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

// Stores the first `size` bytes of a staging buffer and appends their pieces
// to `out`. The buffer is lent to the writer where the pool allows (the lease
// is then empty: the caller takes another), else the writer copies what it
// keeps.
void storeChunk(format::TraceWriter& writer, StagingPool& staging, capnp::MallocMessageBuilder& scratch,
                StagingPool::Lease& buffer, size_t size, StoredContent& out)
{
    auto content = scratch.initRoot<schema::Content>();
    const uint8_t* data = buffer.data();
    if (std::shared_ptr<const void> owner = staging.lend(buffer)) {
        writer.storeLentContent(data, size, std::move(owner), content);
    } else {
        writer.storeContent(data, size, content);
    }
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
        } else if (const CUresult r = copy(buffer.data(), range.address + done, chunk); r != CUDA_SUCCESS) {
            return r;
        }
        if (hostCopy != nullptr) {  // first: a lent buffer may be refilled as soon as the writer lets it go
            std::memcpy(hostCopy->data() + done, buffer.data(), chunk);
        }
        storeChunk(writer, staging, scratch, buffer, chunk, out);
        if (buffer.data() == nullptr) {
            buffer = staging.acquire();
        }
        done += chunk;
    }
    return CUDA_SUCCESS;
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
    StagingPool::Lease buffers[2] = {staging.acquire(), staging.acquire()};
    const uint64_t bufferBytes = staging.bufferBytes();
    auto chunkAt = [&](uint64_t offset) { return static_cast<size_t>(std::min(bufferBytes, range.size - offset)); };

    if (api.memcpyDtoHAsync(buffers[0].data(), range.address, chunkAt(0), stream) != CUDA_SUCCESS) {
        // A stream of a context that is gone, most likely: once more in series.
        forgetSnapshotStream(stream);
        return snapshotInSeries(writer, staging, range, out, hostCopy);
    }
    const StreamDrain drain(stream);
    capnp::MallocMessageBuilder scratch(256);
    size_t slot = 0;
    for (uint64_t done = 0; done < range.size; slot ^= 1) {
        const size_t chunk = chunkAt(done);
        if (const CUresult r = api.streamSynchronize(stream); r != CUDA_SUCCESS) {
            return r;
        }
        const uint64_t next = done + chunk;
        if (next < range.size) {
            if (const CUresult r =
                    api.memcpyDtoHAsync(buffers[slot ^ 1].data(), range.address + next, chunkAt(next), stream);
                r != CUDA_SUCCESS) {
                return r;
            }
        }
        if (hostCopy != nullptr) {  // first: a lent buffer may be refilled as soon as the writer lets it go
            std::memcpy(hostCopy->data() + done, buffers[slot].data(), chunk);
        }
        storeChunk(writer, staging, scratch, buffers[slot], chunk, out);
        if (buffers[slot].data() == nullptr) {  // lent: another for the chunk after next (while this one copies)
            buffers[slot] = staging.acquire();
        }
        done = next;
    }
    return CUDA_SUCCESS;
}

}  // namespace kcap
