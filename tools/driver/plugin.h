// SPDX-License-Identifier: Apache-2.0
// Loading an NCCL net plugin the way NCCL 2.28 does, and the logger handed to it.
//
// Called once per rank process from its main thread, before any other plugin use.
#pragma once

#include <string>
#include <vector>

#include "driver/status.h"
#include "nccl/net_v11.h"
#include "nccl/tuner_v5.h"

namespace conflux::driver {

struct LoadedPlugin {
  void* lib = nullptr;                               // dlopen handle
  std::string opened_as;                             // the name dlopen succeeded with
  std::string path;                                  // resolved file (dladdr), for reports
  std::string net_symbol;                            // first ncclNetPlugin_vN found ("" if none)
  std::string collnet_symbol;                        // first ncclCollNetPlugin_vN found
  std::vector<std::string> net_versions;             // every ncclNetPlugin_vN present
  std::vector<std::string> collnet_versions;         // every ncclCollNetPlugin_vN present
  const nccl::ncclNet_v11_t* net = nullptr;          // set when ncclNetPlugin_v11 is used
  const nccl::ncclCollNet_v11_t* collnet = nullptr;  // set when ncclCollNetPlugin_v11 exists
  const nccl::ncclTuner_v5_t* tuner = nullptr;       // ncclTunerPlugin_v5, if the library has it
};

// dlopen(RTLD_NOW | RTLD_LOCAL) by NCCL_NET_PLUGIN rules: `name` as given, then (if it is a
// bare name, not a path nor lib*.so) "libnccl-net-<name>.so"; an empty name means
// "libnccl-net.so". Looks up ncclNetPlugin_v11, v10 ... v6 (NCCL's order, first wins) and
// only then ncclCollNetPlugin_v11 ... v6; a v12 symbol (NCCL 2.30+) is listed in the
// *_versions, never chosen (adapt_net, --net-abi 12, drives it). Errors: not found / not loadable,
// no Net symbol (NCCL rejects such a library even if it has CollNet), or a first Net symbol other
// than v11 (this driver calls v11 only). CollNet symbols other than v11 leave `collnet` null. NCCL
// also takes ncclTunerPlugin_v5 from the net plugin's library when NCCL_TUNER_PLUGIN is unset.
Status load_plugin(const std::string& name, LoadedPlugin* out);
void unload_plugin(LoadedPlugin* p);

// The logger given to init(): NCCL's signature. Prints "[rank] LEVEL file:line msg" to stderr
// when NCCL_DEBUG is WARN/INFO/TRACE (INFO prints WARN too). Thread-safe (one write per line).
void set_log_rank(int rank);
void driver_logger(nccl::ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...);

// "ncclSystemError" etc.
const char* result_name(int r);

// One line naming a failed plugin call: "rank 2: net.isend returned 2 (ncclSystemError)".
Status call_failed(int rank, const char* call, int result);

}  // namespace conflux::driver

// Calls a plugin function; a non-zero ncclResult_t becomes an error Status naming the call.
#define DRV_CALL(rank, name, expr)                                                    \
  do {                                                                                \
    int drv_rc_ = static_cast<int>(expr);                                             \
    if (drv_rc_ != 0) return ::conflux::driver::call_failed((rank), (name), drv_rc_); \
  } while (0)
