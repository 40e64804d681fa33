// SPDX-License-Identifier: Apache-2.0
// What `afmesh bench`'s workers and servers agree on: the control keys,
// the phase messages and the layout of an answer.
#pragma once

#include <cstdint>
#include <string>

#include "afmesh/afmesh.h"
#include "cost.h"
#include "floor.h"

namespace afmesh::bench {

// Control requests use keys no measured case uses.
constexpr uint64_t kSetupKey = uint64_t{1} << 62;  // pull a server's floor card
constexpr uint64_t kStopKey = kSetupKey + 1;
// Tells the servers which phase comes next and its polling mode (see
// phase_message); the side not being timed sleeps ("blocking") so it does
// not compete for the cores.
constexpr uint64_t kPhaseKey = kSetupKey + 2;
// Pushed to server 0, which answers every worker with what every worker
// pushed, once each has (see GatherDesk): worker 0's proposals in Sampler,
// every worker's cost record after a case.
constexpr uint64_t kAgreeKey = kSetupKey + 3;
constexpr uint64_t kGatherCostKey = kSetupKey + 4;
// Pulls a server's cost record of the case that just ended.
constexpr uint64_t kServerCostKey = kSetupKey + 5;
constexpr uint64_t kCardBytes = 4096;
constexpr int kTimeoutMs = 120000;

/** The kPhaseKey message: "A<poll>" (afmesh timed), "F<poll>" (the floor) or "I" (idle). */
std::string phase_message(Phase phase, const std::string &poll);
/** Reads a kPhaseKey message; false when it is none. */
bool parse_phase_message(const std::string &text, Phase *phase, std::string *poll);

// Answer header: bytes 0..3 the server's rank + 1 (stamped by the server),
// bytes 4..7 the iteration (written by the worker). Beyond the header the
// pushed pattern must come back unchanged.
inline uint8_t pattern_byte(uint64_t i) { return static_cast<uint8_t>(i * 7 + 3); }

/**
 * Polls the timed side in `poll` mode and lets the other sleep (both sleep
 * when idle): the same on workers and servers.
 */
void set_phase_modes(afmesh_node *node, FloorEndpoint &floor, Phase phase, const std::string &poll);

}  // namespace afmesh::bench
