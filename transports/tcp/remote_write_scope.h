// SPDX-License-Identifier: Apache-2.0
// Bytes a peer writes into a registered region stand in for a NIC's DMA.
// ThreadSanitizer never sees a NIC's writes, and cannot see the causality
// that orders them either: a server answers from its receive slice, the
// worker reads the answer and only then pushes into that slice again, but
// the link between the answer's send and the next push runs through
// another process. Seen by ThreadSanitizer, this module's receive path,
// writing into the slice on whichever thread polls, races the earlier send
// from it. Under ThreadSanitizer, a RemoteWriteScope hides those writes
// from it, so the emulation behaves as the hardware does; elsewhere it is
// empty.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define AFMESH_TCP_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define AFMESH_TCP_TSAN 1
#endif
#endif

#ifdef AFMESH_TCP_TSAN
extern "C" void AnnotateIgnoreWritesBegin(const char *file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char *file, int line);
#endif

namespace afmesh::tcp {

class RemoteWriteScope {
public:
#ifdef AFMESH_TCP_TSAN
    explicit RemoteWriteScope(bool active) : active_(active) {
        if (active_) AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    }
    ~RemoteWriteScope() {
        if (active_) AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
    }

private:
    const bool active_;
#else
    explicit RemoteWriteScope(bool) {}
#endif
public:
    RemoteWriteScope(const RemoteWriteScope &) = delete;
    RemoteWriteScope &operator=(const RemoteWriteScope &) = delete;
};

}  // namespace afmesh::tcp
