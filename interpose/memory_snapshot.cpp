#include "memory_snapshot.h"

#include "driver_api.h"

#include <capnp/message.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace kcap {

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
        auto content = scratch.initRoot<schema::Content>();
        writer.storeContent(buffer.data(), chunk, content);
        for (const auto piece : content.asReader().getPieces()) {
            out.pieces.push_back({piece.getHigh(), piece.getLow()});
        }
        if (hostCopy != nullptr) {
            std::memcpy(hostCopy->data() + done, buffer.data(), chunk);
        }
        done += chunk;
    }
    return CUDA_SUCCESS;
}

}  // namespace kcap
