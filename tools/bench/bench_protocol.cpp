// SPDX-License-Identifier: Apache-2.0
#include "bench_protocol.h"

#include "bench_check.h"

namespace afmesh::bench {

std::string phase_message(Phase phase, const std::string &poll) {
    switch (phase) {
    case Phase::kAfmesh:
        return "A" + poll;
    case Phase::kFloor:
        return "F" + poll;
    case Phase::kIdle:
        break;
    }
    return "I";
}

bool parse_phase_message(const std::string &text, Phase *phase, std::string *poll) {
    if (text.empty()) return false;
    *poll = text.substr(1);
    switch (text[0]) {
    case 'A':
        *phase = Phase::kAfmesh;
        return true;
    case 'F':
        *phase = Phase::kFloor;
        return true;
    case 'I':
        *phase = Phase::kIdle;
        return poll->empty();
    default:
        return false;
    }
}

void set_phase_modes(afmesh_node *node, FloorEndpoint &floor, Phase phase, const std::string &poll) {
    check(afmesh_set_poll_mode(node, phase == Phase::kAfmesh ? poll.c_str() : "blocking"), "set poll mode");
    PollMode floor_mode = PollMode::kBlocking;
    if (phase == Phase::kFloor && !parse_poll_mode(poll, &floor_mode)) die("unknown polling mode " + poll);
    floor.set_mode(floor_mode);
}

}  // namespace afmesh::bench
