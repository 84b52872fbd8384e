// SPDX-License-Identifier: Apache-2.0
// Plugin loading (NCCL 2.28 rules) and the NCCL-signature logger.
#include "driver/plugin.h"

#include <dlfcn.h>
#include <strings.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace conflux::driver {
namespace {

std::atomic<int> g_log_rank{-1};

int debug_level_from_env() {
  const char* v = std::getenv("NCCL_DEBUG");
  if (v == nullptr) return nccl::NCCL_LOG_NONE;
  if (strcasecmp(v, "VERSION") == 0) return nccl::NCCL_LOG_VERSION;
  if (strcasecmp(v, "WARN") == 0) return nccl::NCCL_LOG_WARN;
  if (strcasecmp(v, "INFO") == 0) return nccl::NCCL_LOG_INFO;
  if (strcasecmp(v, "ABORT") == 0) return nccl::NCCL_LOG_ABORT;
  if (strcasecmp(v, "TRACE") == 0) return nccl::NCCL_LOG_TRACE;
  return nccl::NCCL_LOG_NONE;
}

const char* level_name(int level) {
  switch (level) {
    case nccl::NCCL_LOG_VERSION:
      return "VERSION";
    case nccl::NCCL_LOG_WARN:
      return "WARN";
    case nccl::NCCL_LOG_INFO:
      return "INFO";
    case nccl::NCCL_LOG_ABORT:
      return "ABORT";
    case nccl::NCCL_LOG_TRACE:
      return "TRACE";
    default:
      return "LOG";
  }
}

bool is_bare_name(const std::string& n) {
  if (n.find('/') != std::string::npos) return false;
  bool lib_prefix = n.rfind("lib", 0) == 0;
  bool so_suffix = n.size() >= 3 && n.compare(n.size() - 3, 3, ".so") == 0;
  return !(lib_prefix && so_suffix);
}

}  // namespace

void set_log_rank(int rank) { g_log_rank.store(rank); }

void driver_logger(nccl::ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                   const char* fmt, ...) {
  static const int threshold = debug_level_from_env();
  int lvl = static_cast<int>(level);
  if (lvl == nccl::NCCL_LOG_NONE || threshold == nccl::NCCL_LOG_NONE) return;
  // ABORT messages are warnings that must be seen: print them whenever WARN would print.
  int eff = (lvl == nccl::NCCL_LOG_ABORT) ? nccl::NCCL_LOG_WARN : lvl;
  int thr = (threshold == nccl::NCCL_LOG_ABORT) ? nccl::NCCL_LOG_WARN : threshold;
  if (eff > thr) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt != nullptr ? fmt : "", ap);
  va_end(ap);
  char out[1400];
  int n = std::snprintf(out, sizeof out, "[%d] %s %s:%d %s\n", g_log_rank.load(), level_name(lvl),
                        file != nullptr ? file : "?", line, msg);
  if (n > 0) {
    size_t len = static_cast<size_t>(n) < sizeof out ? static_cast<size_t>(n) : sizeof out - 1;
    ssize_t w = ::write(STDERR_FILENO, out, len);
    (void)w;
  }
}

const char* result_name(int r) {
  switch (r) {
    case nccl::ncclSuccess:
      return "ncclSuccess";
    case nccl::ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case nccl::ncclSystemError:
      return "ncclSystemError";
    case nccl::ncclInternalError:
      return "ncclInternalError";
    case nccl::ncclInvalidArgument:
      return "ncclInvalidArgument";
    case nccl::ncclInvalidUsage:
      return "ncclInvalidUsage";
    case nccl::ncclRemoteError:
      return "ncclRemoteError";
    case nccl::ncclInProgress:
      return "ncclInProgress";
    default:
      return "unknown ncclResult_t";
  }
}

Status call_failed(int rank, const char* call, int result) {
  return internal_error(std::string("plugin call ") + call + " returned " + std::to_string(result) +
                        " (" + result_name(result) + ")");
}

Status load_plugin(const std::string& name_in, LoadedPlugin* out) {
  *out = LoadedPlugin{};
  std::string name = name_in;
  if (name.empty()) {
    const char* env = std::getenv("NCCL_NET_PLUGIN");
    if (env != nullptr) name = env;
  }
  std::vector<std::string> tries;
  tries.push_back(name.empty() ? std::string("libnccl-net.so") : name);
  if (!name.empty() && is_bare_name(name)) tries.push_back("libnccl-net-" + name + ".so");
  std::string errors;
  for (const std::string& t : tries) {
    dlerror();
    out->lib = dlopen(t.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (out->lib != nullptr) {
      out->opened_as = t;
      break;
    }
    const char* e = dlerror();
    errors += "\n  dlopen(\"" + t + "\"): " + (e != nullptr ? e : "unknown error");
  }
  if (out->lib == nullptr) return internal_error("cannot load the net plugin:" + errors);

  // v12 is listed but never chosen: NCCL 2.28 does not know it (--net-abi 12 drives it).
  static const char* kVersions[] = {"v12", "v11", "v10", "v9", "v8", "v7", "v6"};
  const auto known = [](const char* v) { return std::strcmp(v, "v12") != 0; };
  for (const char* v : kVersions) {
    std::string sym = std::string("ncclNetPlugin_") + v;
    if (dlsym(out->lib, sym.c_str()) != nullptr) {
      out->net_versions.push_back(sym);
      if (out->net_symbol.empty() && known(v)) out->net_symbol = sym;
    }
  }
  for (const char* v : kVersions) {
    std::string sym = std::string("ncclCollNetPlugin_") + v;
    if (dlsym(out->lib, sym.c_str()) != nullptr) {
      out->collnet_versions.push_back(sym);
      if (out->collnet_symbol.empty() && known(v)) out->collnet_symbol = sym;
    }
  }
  Dl_info info{};
  void* any =
      dlsym(out->lib, out->net_symbol.empty() ? "ncclCollNetPlugin_v11" : out->net_symbol.c_str());
  if (any != nullptr && dladdr(any, &info) != 0 && info.dli_fname != nullptr) {
    out->path = info.dli_fname;
  } else {
    out->path = out->opened_as;
  }

  if (out->net_symbol.empty()) {
    std::string msg = "plugin " + out->opened_as +
                      " exports no ncclNetPlugin_v11..v6 symbol; NCCL would reject it";
    if (!out->collnet_symbol.empty()) {
      msg += " (it has " + out->collnet_symbol + ", but a CollNet without a Net is not used)";
    }
    unload_plugin(out);
    return internal_error(msg);
  }
  if (out->net_symbol != "ncclNetPlugin_v11") {
    std::string msg = "plugin " + out->opened_as + ": NCCL 2.28 would use " + out->net_symbol +
                      ", but this driver calls the v11 ABI only";
    unload_plugin(out);
    return internal_error(msg);
  }
  out->net = static_cast<const nccl::ncclNet_v11_t*>(dlsym(out->lib, "ncclNetPlugin_v11"));
  if (out->collnet_symbol == "ncclCollNetPlugin_v11") {
    out->collnet =
        static_cast<const nccl::ncclCollNet_v11_t*>(dlsym(out->lib, "ncclCollNetPlugin_v11"));
  }
  out->tuner = static_cast<const nccl::ncclTuner_v5_t*>(dlsym(out->lib, "ncclTunerPlugin_v5"));
  return Status();
}

void unload_plugin(LoadedPlugin* p) {
  if (p->lib != nullptr) dlclose(p->lib);
  p->lib = nullptr;
  p->net = nullptr;
  p->collnet = nullptr;
  p->tuner = nullptr;
}

}  // namespace conflux::driver
