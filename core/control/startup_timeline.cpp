// SPDX-License-Identifier: Apache-2.0
#include "control/startup_timeline.h"

#include <cstdio>

namespace afmesh::control {

void StartupTimeline::joined(const std::string &who, Clock::time_point at) {
    if (!first_joined_) first_joined_ = at;
    last_joined_ = Mark{at, who};
}

void StartupTimeline::roster_sent(Clock::time_point at) { roster_sent_ = at; }

void StartupTimeline::connected(const std::string &who, Clock::time_point at) { last_connected_ = Mark{at, who}; }

std::string StartupTimeline::since_start(Clock::time_point at) const {
    char text[32];
    snprintf(text, sizeof text, "%.3f s", std::chrono::duration<double>(at - start_).count());
    return text;
}

std::string StartupTimeline::summary(int workers, int servers, Clock::time_point released) const {
    std::string out = "start-up of " + std::to_string(workers) + " worker(s) and " + std::to_string(servers) +
                      " server(s), from the scheduler's start:";
    if (first_joined_) out += " first node joined " + since_start(*first_joined_) + ";";
    if (last_joined_) out += " every node joined " + since_start(last_joined_->at) + " (last: " + last_joined_->who + ");";
    if (roster_sent_) out += " roster sent " + since_start(*roster_sent_) + ";";
    if (last_connected_)
        out += " every node connected to its peers " + since_start(last_connected_->at) +
               " (last: " + last_connected_->who + ");";
    return out + " start-up barrier released " + since_start(released);
}

}  // namespace afmesh::control
