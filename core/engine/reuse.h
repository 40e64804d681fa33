// SPDX-License-Identifier: Apache-2.0
// Reusing storage on the hot paths: an object set back to its defaults
// keeps the capacity its vectors grew to, so a steady stream of push-pulls
// of one shape allocates nothing.
#pragma once

#include <vector>

namespace afmesh {

/** Moves `from`'s storage into `to`, emptied: the elements go, the capacity stays. */
template <class T>
void keep_capacity(std::vector<T> &from, std::vector<T> &to) {
    from.clear();
    to.swap(from);
}

}  // namespace afmesh
