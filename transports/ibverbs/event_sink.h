// The caller's event array for one poll() call, filled front to back.
#pragma once

#include "afmesh/hal/transport.h"

namespace afmesh::ibverbs {

class EventSink {
public:
    EventSink(afmesh_net_event *events, int capacity) : events_(events), capacity_(capacity) {}

    bool full() const { return count_ >= capacity_; }
    int room() const { return capacity_ - count_; }
    int count() const { return count_; }

    /** The next event, cleared and typed. Requires !full(). */
    afmesh_net_event &add(afmesh_net_event_type type, afmesh_net_conn *conn) {
        afmesh_net_event &event = events_[count_++];
        event = afmesh_net_event{};
        event.type = type;
        event.conn = conn;
        return event;
    }

private:
    afmesh_net_event *const events_;
    const int capacity_;
    int count_ = 0;
};

}  // namespace afmesh::ibverbs
