// SPDX-License-Identifier: Apache-2.0
// The adapters in abi/ are written in NCCL's own words: they use the declarations of nccl/
// (namespace conflux::nccl) unqualified. Included by every abi/ header, by nothing outside abi/.
#pragma once

#include "nccl/nccl_types.h"

namespace conflux::abi {
using namespace ::conflux::nccl;  // NOLINT(google-build-using-namespace): abi/ only
}  // namespace conflux::abi
