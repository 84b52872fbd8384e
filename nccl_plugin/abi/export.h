// SPDX-License-Identifier: Apache-2.0
// Marks the plugin's exported C symbols; use inside an extern "C" { } block. Everything else
// in libnccl-net-conflux.so is hidden (-fvisibility=hidden plus the linker version script
// exports.map, which must list every symbol marked here).
#pragma once

#define CONFLUX_EXPORT __attribute__((visibility("default")))
