// SPDX-License-Identifier: Apache-2.0
// Unpredictable 64-bit values (nonces, job tokens) from the kernel CSPRNG.
#pragma once

#include <cstdint>

namespace conflux::agg {

uint64_t random_u64();

}  // namespace conflux::agg
